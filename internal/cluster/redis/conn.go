package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Defaults of the zero fields of ConnOptions: go-redis's own, with which
// make bench measures the nodes.
const (
	DefaultDialTimeout  = 5 * time.Second
	DefaultReadTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
	// DefaultPoolSize 0 leaves go-redis's pool size: 10 connections per
	// CPU (GOMAXPROCS) to a server, 5 per CPU to each node of a Cluster.
	DefaultPoolSize     = 0
	DefaultMinIdleConns = 0
)

// ConnOptions are the connection settings a URL does not carry, or
// carries only in the clear: TLS with a private CA and a client
// certificate, ACL credentials kept in a file, and the pool and its
// timeouts. Every file is read again when it changes (a mounted secret
// that rotates), at the next connection that needs it, so that rotated
// certificates and passwords take effect without a restart; a version
// that does not parse (caught half-written) leaves the previous one in
// use. The zero value adds nothing to the URL.
type ConnOptions struct {
	// Username is the ACL user. The URL may name one instead, not both.
	Username string
	// PasswordFile holds the password of the ACL user (or of the
	// default user), trailing newlines dropped. The URL then holds
	// none. It applies to the Redis servers, not to Sentinel (whose
	// credentials are the URL's sentinel_username and sentinel_password).
	PasswordFile string
	// CAFile holds the PEM certificates of the authorities the servers'
	// certificates must chain to, instead of the system's roots.
	CAFile string
	// CertFile and KeyFile hold the PEM client certificate (with its
	// intermediates) and its key, for servers that authenticate clients
	// (tls-auth-clients): both or neither.
	CertFile, KeyFile string
	// TLSServerName is the name the servers' certificates must carry,
	// and the one sent in SNI, when it is not the URL's host.
	TLSServerName string
	// PoolSize is the connections to one server in the command pool
	// (DefaultPoolSize when 0).
	PoolSize int
	// MinIdleConns is the idle connections the pool keeps open, each
	// ready for a command without a dial (and handshake) first.
	MinIdleConns int
	// DialTimeout, ReadTimeout and WriteTimeout bound a connection's
	// dial (with its TLS handshake and authentication), a reply's read
	// and a command's write (DefaultDialTimeout and siblings when 0).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Logger receives a line when a file is read again, and a warning
	// when its new version is unusable. The zero Logger discards them.
	Logger zerolog.Logger
}

// DefaultConnOptions returns the ConnOptions its zero value stands for:
// the defaults written out.
func DefaultConnOptions() ConnOptions {
	return ConnOptions{PoolSize: DefaultPoolSize, MinIdleConns: DefaultMinIdleConns,
		DialTimeout: DefaultDialTimeout, ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout}
}

// ConnError is an error of ConnOptions.Apply; Field names the field of
// ConnOptions at fault.
type ConnError struct {
	Field string
	Err   error
}

func (e *ConnError) Error() string { return "redis connection: " + e.Field + ": " + e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// NewClient parses url (ParseURL) and returns a client with c applied.
func NewClient(url string, c ConnOptions) (goredis.UniversalClient, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if err := c.Apply(o); err != nil {
		return nil, err
	}
	return goredis.NewUniversalClient(o), nil
}

// Apply adds c to the options a URL gave (ParseURL). An option the URL
// sets itself (pool_size, dial_timeout, ...) wins over c's. The TLS
// fields need a TLS URL (rediss://, rediss-sentinel://, rediss-cluster://).
// Apply reads every file once, so that a missing or malformed one is
// reported now.
func (c ConnOptions) Apply(o *goredis.UniversalOptions) error {
	for _, f := range []struct {
		name string
		n    int64
	}{{"PoolSize", int64(c.PoolSize)}, {"MinIdleConns", int64(c.MinIdleConns)},
		{"DialTimeout", int64(c.DialTimeout)}, {"ReadTimeout", int64(c.ReadTimeout)}, {"WriteTimeout", int64(c.WriteTimeout)}} {
		if f.n < 0 {
			return &ConnError{f.name, errors.New("must not be negative")}
		}
	}
	if c.PoolSize > 0 && c.MinIdleConns > c.PoolSize {
		return &ConnError{"MinIdleConns", fmt.Errorf("%d exceeds PoolSize %d", c.MinIdleConns, c.PoolSize)}
	}
	if o.TLSConfig == nil {
		for _, f := range []struct{ name, v string }{{"CAFile", c.CAFile}, {"CertFile", c.CertFile}, {"KeyFile", c.KeyFile}, {"TLSServerName", c.TLSServerName}} {
			if f.v != "" {
				return &ConnError{f.name, errors.New("needs a TLS URL (rediss://, rediss-sentinel:// or rediss-cluster://)")}
			}
		}
	} else {
		cfg, err := c.tlsConfig(o.TLSConfig)
		if err != nil {
			return err
		}
		o.TLSConfig = cfg
	}
	if err := c.credentials(o); err != nil {
		return err
	}
	if o.PoolSize == 0 {
		o.PoolSize = c.PoolSize
	}
	if o.MinIdleConns == 0 {
		o.MinIdleConns = c.MinIdleConns
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = c.DialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = c.ReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = c.WriteTimeout
	}
	return nil
}

// credentials sets the user, and the password read from PasswordFile at
// each new connection (go-redis authenticates each with what the
// provider returns).
func (c ConnOptions) credentials(o *goredis.UniversalOptions) error {
	if c.Username != "" {
		if o.Username != "" {
			return &ConnError{"Username", errors.New("the URL names a user too: give it in one place")}
		}
		o.Username = c.Username
	}
	if c.PasswordFile == "" {
		return nil
	}
	if o.Password != "" {
		return &ConnError{"PasswordFile", errors.New("the URL holds a password too: give it in one place")}
	}
	pw := &watched[string]{paths: []string{c.PasswordFile}, what: "Redis password file", log: c.Logger,
		parse: func(b [][]byte) (string, error) {
			p := strings.TrimRight(string(b[0]), "\r\n")
			if p == "" {
				return "", fmt.Errorf("%s is empty", c.PasswordFile)
			}
			return p, nil
		}}
	if _, err := pw.get(); err != nil {
		return &ConnError{"PasswordFile", err}
	}
	user := o.Username
	o.CredentialsProviderContext = func(context.Context) (string, string, error) {
		p, err := pw.get()
		return user, p, err
	}
	return nil
}

// tlsConfig returns base (the URL's, with its server name) with c's
// files: the client certificate offered at each handshake is the one
// the files hold then, and so are the authorities the server's
// certificate is verified against.
func (c ConnOptions) tlsConfig(base *tls.Config) (*tls.Config, error) {
	cfg := base.Clone()
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	if c.TLSServerName != "" {
		cfg.ServerName = c.TLSServerName
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		field := "CertFile"
		if c.KeyFile == "" {
			field = "KeyFile"
		}
		return nil, &ConnError{field, errors.New("a client certificate needs both CertFile and KeyFile")}
	}
	if c.CertFile != "" {
		pair := &watched[*tls.Certificate]{paths: []string{c.CertFile, c.KeyFile}, what: "Redis client certificate", log: c.Logger,
			parse: func(b [][]byte) (*tls.Certificate, error) {
				cert, err := tls.X509KeyPair(b[0], b[1])
				if err != nil {
					return nil, fmt.Errorf("%s and %s: %w", c.CertFile, c.KeyFile, err)
				}
				return &cert, nil
			}}
		if _, err := pair.get(); err != nil {
			return nil, &ConnError{"CertFile", err}
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.get() }
	}
	if c.CAFile == "" {
		return cfg, nil
	}
	if base.InsecureSkipVerify {
		return nil, &ConnError{"CAFile", errors.New("the URL turns verification off (skip_verify): drop one")}
	}
	roots := &watched[*x509.CertPool]{paths: []string{c.CAFile}, what: "Redis CA file", log: c.Logger,
		parse: func(b [][]byte) (*x509.CertPool, error) {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(b[0]) {
				return nil, fmt.Errorf("%s holds no PEM certificate", c.CAFile)
			}
			return pool, nil
		}}
	if _, err := roots.get(); err != nil {
		return nil, &ConnError{"CAFile", err}
	}
	name := cfg.ServerName
	if name == "" {
		return nil, &ConnError{"TLSServerName", errors.New("no server name to verify the certificates against")}
	}
	// crypto/tls verifies against a fixed RootCAs; the CA file may
	// rotate, so the chain and the name are verified here instead, as
	// crypto/tls would, against the authorities the file holds now.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		pool, err := roots.get()
		if err != nil {
			return err
		}
		return verifyPeer(cs.PeerCertificates, pool, name)
	}
	return cfg, nil
}

// verifyPeer checks that the server's certificate chains to roots and
// names name (a host name or an IP address).
func verifyPeer(certs []*x509.Certificate, roots *x509.CertPool, name string) error {
	if len(certs) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name})
	if err != nil {
		return fmt.Errorf("tls: the server's certificate: %w", err)
	}
	return nil
}

// watched is the value parsed from files, read again when one of them
// changed (another inode, size or modification time: a Kubernetes secret
// volume swaps a symlink). A new version that does not parse leaves the
// previous value in use, and is tried again at the next get.
type watched[T any] struct {
	paths []string
	parse func([][]byte) (T, error)
	what  string
	log   zerolog.Logger

	mu     sync.Mutex
	stamps []os.FileInfo
	val    T
	ok     bool
	failed []os.FileInfo // the stamps of the last version that failed, logged once
}

func (w *watched[T]) get() (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	stamps := make([]os.FileInfo, len(w.paths))
	for i, p := range w.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return w.keep(nil, err)
		}
		stamps[i] = fi
	}
	if w.ok && same(stamps, w.stamps) {
		return w.val, nil
	}
	data := make([][]byte, len(w.paths))
	for i, p := range w.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return w.keep(stamps, err)
		}
		data[i] = b
	}
	v, err := w.parse(data)
	if err != nil {
		return w.keep(stamps, err)
	}
	if w.ok {
		w.log.Info().Strs("files", w.paths).Msg(w.what + " changed: read again")
	}
	w.val, w.ok, w.stamps, w.failed = v, true, stamps, nil
	return v, nil
}

// keep returns the previous value after a failed read, or the error when
// there is none; the failure is logged once per version of the files.
func (w *watched[T]) keep(stamps []os.FileInfo, err error) (T, error) {
	if !w.ok {
		var zero T
		return zero, err
	}
	if stamps == nil || !same(stamps, w.failed) {
		w.log.Warn().Err(err).Strs("files", w.paths).Msg(w.what + " unusable: keeping the previous version")
		w.failed = stamps
	}
	return w.val, nil
}

func same(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if b[i] == nil || !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}
