package redis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// connect returns a client of url with c applied, as a node makes it.
func connect(t testing.TB, url string, c redis.ConnOptions) goredis.UniversalClient {
	t.Helper()
	cl, err := redis.NewClient(url, c)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", url, err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// exercise runs a backend on c: a session is created and read back, and
// a bus message reaches a subscriber (over sharded pub/sub on Cluster).
func exercise(t *testing.T, c goredis.UniversalClient, prefix string) {
	t.Helper()
	b := backend(t, c, redis.Options{Prefix: prefix})
	ctx := t.Context()
	if err := b.Sessions.Create(ctx, "s1", map[string]string{"k": "v"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if f, err := b.Sessions.Load(ctx, "s1", time.Minute, ""); err != nil || f["k"] != "v" {
		t.Fatalf("Load: %v, %v", f, err)
	}
	got := make(chan string, 1)
	cancel, err := b.Bus.Subscribe(ctx, "topic", func(m []byte) { got <- string(m) })
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancel()
	if _, err := b.Bus.Publish(ctx, "topic", []byte("hello")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case m := <-got:
		if m != "hello" {
			t.Fatalf("bus: got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("bus: no message")
	}
}

// refused checks that a client of url with c cannot reach the server,
// with an error that mentions want.
func refused(t *testing.T, url string, c redis.ConnOptions, want string) {
	t.Helper()
	cl, err := redis.NewClient(url+"?max_retries=-1&dial_timeout=2s", c)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer cl.Close()
	err = cl.Ping(t.Context()).Err()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Ping: got %v, want an error mentioning %q", err, want)
	}
}

// The backend works over TLS with a private CA and a client certificate
// on a standalone server, through Sentinel and on a three-shard Cluster
// (tls-cluster, tls-replication); a client without a certificate, one
// trusting another authority, and one expecting another name are
// refused.
func TestTLS(t *testing.T) {
	ca := redistest.NewCA(t, "private CA")
	cert, key := ca.IssueFiles(t, "", "node")
	conn := redis.ConnOptions{CAFile: ca.File, CertFile: cert, KeyFile: key}
	opts := redistest.Options{TLS: &redistest.TLS{CA: ca}}

	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartWith(t, opts)
		exercise(t, connect(t, srv.URL(), conn), "tls")
		refused(t, srv.URL(), redis.ConnOptions{CAFile: ca.File}, "certificate")
		other := redistest.NewCA(t, "another CA")
		refused(t, srv.URL(), redis.ConnOptions{CAFile: other.File, CertFile: cert, KeyFile: key}, "unknown authority")
		refused(t, srv.URL(), redis.ConnOptions{CertFile: cert, KeyFile: key}, "unknown authority") // the system roots
		o, _ := redis.ParseURL(srv.URL())
		if err := conn.Apply(o); err != nil || o.TLSConfig.MinVersion < tls.VersionTLS12 {
			t.Fatalf("Apply: %v; minimum version %x, want TLS 1.2 at least", err, o.TLSConfig.MinVersion)
		}
	})
	t.Run("server name", func(t *testing.T) {
		srv := redistest.StartWith(t, redistest.Options{TLS: &redistest.TLS{CA: ca, Hosts: []string{"redis.internal"}}})
		refused(t, srv.URL(), conn, "127.0.0.1") // not a name of the certificate
		named := conn
		named.TLSServerName = "redis.internal"
		exercise(t, connect(t, srv.URL(), named), "tls")
	})
	t.Run("sentinel", func(t *testing.T) {
		m := redistest.StartWith(t, redistest.Options{TLS: opts.TLS, Args: []string{"--repl-diskless-sync-delay", "0"}})
		host, port, _ := strings.Cut(m.Addr(), ":")
		replica := redistest.StartWith(t, redistest.Options{TLS: opts.TLS, Args: []string{"--replicaof", host, port}})
		s := redistest.StartSentinel(t, redistest.Sentinel{Master: m})
		c := connect(t, "rediss-sentinel://"+s.Addr()+"/mymaster", conn)
		exercise(t, c, "tls")
		// The replica follows the master over TLS (tls-replication).
		if err := c.Set(t.Context(), "tls:replicated", "yes", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		r := goredis.NewClient(&goredis.Options{Addr: replica.Addr(), TLSConfig: replicaTLS(t, ca)})
		defer r.Close()
		waitFor(t, 10*time.Second, "the key on the replica", func() bool {
			v, _ := r.Get(t.Context(), "tls:replicated").Result()
			return v == "yes"
		})
	})
	t.Run("cluster", func(t *testing.T) {
		srvs := redistest.StartClusterWith(t, 3, opts)
		var addrs []string
		for _, s := range srvs {
			addrs = append(addrs, s.Addr())
		}
		c := connect(t, "rediss-cluster://"+strings.Join(addrs, ","), conn)
		exercise(t, c, "tls")
		if _, ok := c.(*goredis.ClusterClient); !ok {
			t.Fatalf("client %T, want a Cluster client", c)
		}
	})
}

// replicaTLS is a client configuration of the authority for a server on
// 127.0.0.1.
func replicaTLS(t *testing.T, ca *redistest.CA) *tls.Config {
	cfg := ca.ClientConfig(t)
	cfg.ServerName = "127.0.0.1"
	return cfg
}

// replace swaps the file at path for one holding b, as a Kubernetes
// secret volume does (a new file renamed over the old one).
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// load runs sessions and bus messages through b until stop, and counts
// what failed; every session it created is in created.
type load struct {
	b       *cluster.Backend
	stop    chan struct{}
	wg      sync.WaitGroup
	ops     atomic.Int64
	mu      sync.Mutex
	errs    []error
	created []string
}

func startLoad(t *testing.T, b *cluster.Backend, workers int) *load {
	l := &load{b: b, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				err := b.Sessions.Create(ctx, id, map[string]string{"n": id}, time.Minute, 0, cluster.CreateOptions{})
				if err == nil {
					var f map[string]string
					f, err = b.Sessions.Load(ctx, id, time.Minute, "")
					if err == nil && f["n"] != id {
						err = fmt.Errorf("session %s read back as %v", id, f)
					}
				}
				l.mu.Lock()
				if err != nil {
					l.errs = append(l.errs, fmt.Errorf("%s: %w", id, err))
				} else {
					l.created = append(l.created, id)
				}
				l.mu.Unlock()
				l.ops.Add(1)
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitOps waits until the load did n more operations.
func (l *load) waitOps(t *testing.T, n int64) {
	t.Helper()
	target := l.ops.Load() + n
	waitFor(t, 10*time.Second, fmt.Sprintf("%d more operations", n), func() bool { return l.ops.Load() >= target })
}

// The client certificate rotates under load: the node's connections are
// cut once the server accepts only the new certificate's authority, and
// the new connections present the certificate the files hold now. No
// operation fails, every session written is there, and the bus works
// again.
func TestTLSClientCertificateRotationUnderLoad(t *testing.T) {
	ca, next := redistest.NewCA(t, "old client CA"), redistest.NewCA(t, "new client CA")
	srv := redistest.StartWith(t, redistest.Options{TLS: &redistest.TLS{CA: ca}})
	if _, err := srv.Do("CONFIG SET tls-ca-cert-file " + redistest.Bundle(t, ca, next)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := ca.IssueFiles(t, dir, "node")
	c := connect(t, srv.URL(), redis.ConnOptions{CAFile: ca.File, CertFile: cert, KeyFile: key})
	b := backend(t, c, redis.Options{})
	l := startLoad(t, b, 4)
	l.waitOps(t, 50)

	newCert, newKey := next.Issue(t, "node")
	replace(t, key, newKey)
	replace(t, cert, newCert)
	// The harness's own connection is of the old authority: the kill
	// follows the CONFIG SET on that connection. (The pub/sub connection
	// speaks RESP3, where a subscribed client is of type normal.)
	replies, err := srv.DoAll("CONFIG SET tls-ca-cert-file "+next.File, "CLIENT KILL TYPE normal")
	if err != nil || replies[0] != "+OK" || replies[1] == ":0" {
		t.Fatalf("rotation on the server: %v, %v (want +OK and connections killed)", replies, err)
	}
	l.waitOps(t, 200)
	waitFor(t, 10*time.Second, "the bus back", b.Ready)
	got := make(chan struct{}, 1)
	cancel, err := b.Bus.Subscribe(t.Context(), "after", func([]byte) { got <- struct{}{} })
	if err != nil {
		t.Fatalf("Subscribe after the rotation: %v", err)
	}
	defer cancel()
	if n, err := b.Bus.Publish(t.Context(), "after", []byte("x")); err != nil || n != 1 {
		t.Fatalf("Publish after the rotation: %d receivers, %v", n, err)
	}
	<-got
	l.end()
	if len(l.errs) > 0 {
		t.Fatalf("%d of %d operations failed, first: %v", len(l.errs), l.ops.Load(), l.errs[0])
	}
	for _, id := range l.created {
		if _, err := b.Sessions.Load(t.Context(), id, time.Minute, ""); err != nil {
			t.Fatalf("session %s written under load: %v", id, err)
		}
	}
	// The old certificate no longer gets in: the new connections did not
	// present it.
	oldCert, oldKey := ca.IssueFiles(t, "", "old")
	refused(t, srv.URL(), redis.ConnOptions{CAFile: ca.File, CertFile: oldCert, KeyFile: oldKey}, "")
	t.Logf("%d operations, %d sessions", l.ops.Load(), len(l.created))
}

// The password of an ACL user is read from a file, again when the file
// changes: after a rotation under load (the new password added, the file
// changed, the old password removed and the connections cut) the node
// authenticates with the new one, and no operation fails. The
// user is allowed only the keys and channels of the backend's prefix. A
// wrong password, from the file or from the URL, is never in an error.
func TestPasswordFile(t *testing.T) {
	srv := redistest.Start(t)
	acl := "ACL SETUSER app on >first-secret ~app:* ~{app:nodes}:sharded &app:* +@all"
	if r, err := srv.Do(acl); err != nil || r != "+OK" {
		t.Fatalf("%s: %q, %v", acl, r, err)
	}
	pwFile := filepath.Join(t.TempDir(), "password")
	replace(t, pwFile, []byte("first-secret\n"))
	c := connect(t, srv.URL(), redis.ConnOptions{Username: "app", PasswordFile: pwFile})
	exercise(t, c, "app")
	b := backend(t, c, redis.Options{Prefix: "app"})
	l := startLoad(t, b, 2)
	l.waitOps(t, 20)

	// A rotation as an operator runs it: the user gets the new password
	// beside the old one, the secret changes, the old password goes.
	if r, err := srv.Do("ACL SETUSER app >second-secret"); err != nil || r != "+OK" {
		t.Fatalf("new password: %q, %v", r, err)
	}
	replace(t, pwFile, []byte("second-secret\n"))
	replies, err := srv.DoAll("ACL SETUSER app <first-secret", "CLIENT KILL USER app")
	if err != nil || replies[0] != "+OK" || replies[1] == ":0" {
		t.Fatalf("rotation on the server: %v, %v", replies, err)
	}
	l.waitOps(t, 100)
	waitFor(t, 10*time.Second, "the bus back", b.Ready)
	l.end()
	if len(l.errs) > 0 {
		t.Fatalf("%d of %d operations failed, first: %v", len(l.errs), l.ops.Load(), l.errs[0])
	}

	wrong := filepath.Join(t.TempDir(), "wrong")
	replace(t, wrong, []byte("wrong-file-secret"))
	for _, tc := range []struct {
		url    string
		conn   redis.ConnOptions
		secret string
	}{
		{srv.URL(), redis.ConnOptions{Username: "app", PasswordFile: wrong}, "wrong-file-secret"},
		{"redis://app:wrong-url-secret@" + srv.Addr(), redis.ConnOptions{}, "wrong-url-secret"},
	} {
		cl, err := redis.NewClient(tc.url, tc.conn)
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		_, err = redis.New(t.Context(), cl, redis.Options{Prefix: "app"})
		cl.Close()
		if err == nil || !errors.Is(err, cluster.ErrUnavailable) || strings.Contains(err.Error(), tc.secret) {
			t.Fatalf("New with a wrong password (%s): got %v, want ErrUnavailable without the password", tc.secret, err)
		}
	}
}

func TestConnOptionsApply(t *testing.T) {
	// The defaults are go-redis's own.
	plain := goredis.NewClient(&goredis.Options{})
	defer plain.Close()
	if o := plain.Options(); o.DialTimeout != redis.DefaultDialTimeout || o.ReadTimeout != redis.DefaultReadTimeout || o.WriteTimeout != redis.DefaultWriteTimeout {
		t.Errorf("go-redis defaults dial %v read %v write %v; the documented ones are %v %v %v", o.DialTimeout, o.ReadTimeout, o.WriteTimeout,
			redis.DefaultDialTimeout, redis.DefaultReadTimeout, redis.DefaultWriteTimeout)
	}
	set := redis.ConnOptions{PoolSize: 7, MinIdleConns: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second}
	o, _ := redis.ParseURL("redis://h")
	if err := set.Apply(o); err != nil || o.PoolSize != 7 || o.MinIdleConns != 2 || o.DialTimeout != time.Second || o.ReadTimeout != 2*time.Second || o.WriteTimeout != 3*time.Second {
		t.Errorf("Apply: %v; got %+v", err, o)
	}
	// An option in the URL wins.
	o, _ = redis.ParseURL("redis://h?pool_size=3&read_timeout=9s")
	if err := set.Apply(o); err != nil || o.PoolSize != 3 || o.ReadTimeout != 9*time.Second || o.DialTimeout != time.Second {
		t.Errorf("Apply over URL options: %v; got pool %d read %v dial %v", err, o.PoolSize, o.ReadTimeout, o.DialTimeout)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	replace(t, pw, []byte("s\n"))
	for _, tc := range []struct {
		url   string
		c     redis.ConnOptions
		field string
	}{
		{"redis://h", redis.ConnOptions{PoolSize: -1}, "PoolSize"},
		{"redis://h", redis.ConnOptions{ReadTimeout: -time.Second}, "ReadTimeout"},
		{"redis://h", redis.ConnOptions{PoolSize: 2, MinIdleConns: 3}, "MinIdleConns"},
		{"redis://h", redis.ConnOptions{CAFile: "ca.pem"}, "CAFile"},
		{"redis-cluster://h", redis.ConnOptions{TLSServerName: "x"}, "TLSServerName"},
		{"rediss://h", redis.ConnOptions{CAFile: filepath.Join(t.TempDir(), "missing.pem")}, "CAFile"},
		{"rediss://h", redis.ConnOptions{CAFile: pw}, "CAFile"}, // no PEM
		{"rediss://h", redis.ConnOptions{CertFile: pw}, "KeyFile"},
		{"rediss://h?skip_verify=true", redis.ConnOptions{CAFile: pw}, "CAFile"},
		{"redis://u@h", redis.ConnOptions{Username: "app"}, "Username"},
		{"redis://:p@h", redis.ConnOptions{PasswordFile: pw}, "PasswordFile"},
		{"redis://h", redis.ConnOptions{PasswordFile: filepath.Join(t.TempDir(), "missing")}, "PasswordFile"},
	} {
		o, err := redis.ParseURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var ce *redis.ConnError
		if err := tc.c.Apply(o); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s %+v: got %v, want an error of %s", tc.url, tc.c, err, tc.field)
		}
	}
}

// The CA file is read again when it changes: a server whose certificate
// a new authority signed is refused, then accepted once the file holds
// that authority, with the name still checked.
func TestTLSCAFileReadAgain(t *testing.T) {
	old, next := redistest.NewCA(t, "old CA"), redistest.NewCA(t, "new CA")
	c, k := next.Issue(t, "server", "127.0.0.1")
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	caPEM := func(ca *redistest.CA) []byte {
		b, err := os.ReadFile(ca.File)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	replace(t, caFile, caPEM(old))
	config := func(url string) *tls.Config {
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		if err := (redis.ConnOptions{CAFile: caFile}).Apply(o); err != nil {
			t.Fatal(err)
		}
		return o.TLSConfig
	}
	dial := func(cfg *tls.Config) error {
		conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			conn.Close()
		}
		return err
	}
	cfg := config("rediss://" + ln.Addr().String())
	if err := dial(cfg); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("with the old CA: got %v, want an unknown authority", err)
	}
	replace(t, caFile, caPEM(next))
	if err := dial(cfg); err != nil {
		t.Fatalf("with the new CA, read again: %v", err)
	}
	_, port, _ := strings.Cut(ln.Addr().String(), ":")
	if err := dial(config("rediss://localhost:" + port)); err == nil || !strings.Contains(err.Error(), "localhost") {
		t.Fatalf("a name the certificate does not carry: got %v", err)
	}
}
