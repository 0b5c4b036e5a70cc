package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TLS makes a server (Options.TLS) speak TLS only: redis-server's
// --tls-port on the server's port, --port 0, a certificate of CA for
// Hosts, and CA's certificate to check clients' certificates against.
// A Cluster node also speaks TLS on its cluster bus (tls-cluster), and
// every server to its primary (tls-replication), as a Sentinel does to
// the servers it watches.
type TLS struct {
	// CA signs the server's certificate, and the client certificates
	// the server accepts (tls-ca-cert-file). Its File may hold more
	// authorities (see CA.Bundle).
	CA *CA
	// AuthClients is tls-auth-clients: "yes" (when empty: a client
	// certificate is required), "optional" or "no".
	AuthClients string
	// Hosts are the names and addresses the server's certificate
	// carries (default 127.0.0.1 and localhost).
	Hosts []string
}

// CA is a certificate authority of a test: its certificate and key in
// memory and its certificate in a PEM file.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the PEM file of the authority's certificate.
	File string
	dir  string
}

var serials atomic.Int64

// NewCA makes an authority named name, valid for a day; its files live
// in a temporary directory removed when the test ends.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("redistest: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: CA: %v", err)
	}
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	writeFile(t, ca.File, pemBlock("CERTIFICATE", der))
	return ca
}

// Bundle writes a PEM file holding the certificates of every one of cas
// and returns its path.
func Bundle(t testing.TB, cas ...*CA) string {
	t.Helper()
	var out []byte
	for _, ca := range cas {
		out = append(out, pemBlock("CERTIFICATE", ca.Cert.Raw)...)
	}
	path := filepath.Join(t.TempDir(), "bundle.pem")
	writeFile(t, path, out)
	return path
}

// Issue returns a PEM certificate of the authority for name and its PEM
// key, good for a server and a client (serverAuth and clientAuth), with
// hosts as its names and IP addresses.
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("redistest: certificate %s: %v", name, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kb)
}

// IssueFiles is Issue writing the certificate and key to name.crt and
// name.key in dir (a fresh temporary directory when empty), and returns
// their paths.
func (ca *CA) IssueFiles(t testing.TB, dir, name string, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	c, k := ca.Issue(t, name, hosts...)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	return certFile, keyFile
}

// ClientConfig is a TLS configuration that trusts the authority and
// presents a certificate of it, for tests that talk to a TLS server
// directly.
func (ca *CA) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	c, k := ca.Issue(t, "redistest client")
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// tlsArgs are the redis-server arguments of TLS on port, with the
// server's certificate written to s.dir.
func (s *Server) tlsArgs(port string) []string {
	o := s.opts.TLS
	hosts := o.Hosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	auth := o.AuthClients
	if auth == "" {
		auth = "yes"
	}
	cert, key := filepath.Join(s.dir, "server.crt"), filepath.Join(s.dir, "server.key")
	if _, err := os.Stat(cert); err != nil { // a restart keeps the certificate
		c, k := o.CA.Issue(s.t, "redistest server", hosts...)
		writeFile(s.t, cert, c)
		writeFile(s.t, key, k)
	}
	args := []string{"--port", "0", "--tls-port", port, "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", o.CA.File, "--tls-auth-clients", auth, "--tls-replication", "yes"}
	if s.opts.Cluster {
		args = append(args, "--tls-cluster", "yes")
	}
	return args
}

// clientTLS is what the harness itself presents to a TLS server: a
// certificate of its authority, verified against it. It is made once.
func (s *Server) clientTLS() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsClient == nil {
		s.tlsClient = s.opts.TLS.CA.ClientConfig(s.t)
		s.tlsClient.ServerName = "127.0.0.1"
		if h := s.opts.TLS.Hosts; len(h) > 0 {
			s.tlsClient.ServerName = h[0]
		}
	}
	return s.tlsClient
}
