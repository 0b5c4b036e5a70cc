// Package redistest runs throwaway redis-server processes for tests: each
// Server listens on a random loopback port (or a unix socket) of its own,
// keeps nothing on disk (unless Options.Persist asks for an append-only
// file, so a restart keeps the data), and is killed when the test ends.
// Tests never touch a Redis they did not start. Options.TLS makes a
// server speak TLS only, with certificates of an authority the test makes
// (NewCA), as a Cluster's nodes and a Sentinel then do too.
//
// The redis-server binary is looked up on PATH and then in /usr/bin and
// /usr/sbin. When it is missing, Start fails the test (it never skips):
// install Debian's redis-server package.
package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options tunes Start. The zero value means a TCP server on a random
// loopback port.
type Options struct {
	// Unix serves on a unix socket in a fresh temporary directory instead
	// of TCP.
	Unix bool
	// Cluster runs the server as a one-node Redis Cluster owning every
	// slot, so clients take their Cluster code paths (and the server
	// enforces the single-slot rule of multi-key commands and scripts).
	Cluster bool
	// Persist keeps the data across Kill and Restart: the server writes
	// an append-only file in its temporary directory and fsyncs it after
	// every write (--appendonly yes --appendfsync always), so every write
	// it acknowledged survives even a SIGKILL and is loaded again by
	// Restart. Without it a restarted server starts empty.
	Persist bool
	// Args are extra redis-server arguments, e.g. "--maxclients", "50".
	Args []string
	// Sentinel, when it has a Master, runs the server as a Redis Sentinel
	// instead (see StartSentinel).
	Sentinel Sentinel
	// TLS, when set, makes the server speak TLS only (see TLS).
	TLS *TLS
	// Replicas is, for StartClusterWith, how many replicas each primary
	// gets (see replicas.go).
	Replicas int
}

// Sentinel describes what a Sentinel started by StartSentinel watches.
type Sentinel struct {
	// Master is the server the Sentinel monitors, under the name Name
	// (default "mymaster"), with a quorum of 1.
	Master *Server
	Name   string
	// Config are extra lines of the Sentinel's configuration file, e.g.
	// "sentinel auth-pass mymaster pw" or "requirepass spw".
	Config []string
}

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	t    testing.TB
	bin  string
	opts Options
	dir  string
	port int    // TCP port, 0 in unix mode
	sock string // unix socket path, "" in TCP mode
	// slots is the range of hash slots a Cluster node owns; a shard of
	// StartCluster (shard true) waits for its peers instead of
	// cluster_state:ok at start.
	slots [2]int
	shard bool
	// replica: a replica of a StartClusterWith shard, which owns no slots.
	replica bool

	mu        sync.Mutex
	cmd       *exec.Cmd
	out       *lockedWriter
	exit      chan struct{}
	tlsClient *tls.Config
}

// Start starts a TCP redis-server on a random free loopback port and
// waits until it answers PING. It is killed on t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartUnix is Start serving on a unix socket.
func StartUnix(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{Unix: true})
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) on a
// random free loopback port, watching sen.Master.
func StartSentinel(t testing.TB, sen Sentinel) *Server {
	t.Helper()
	if sen.Master == nil || sen.Master.sock != "" {
		t.Fatalf("redistest: a Sentinel needs a TCP master")
	}
	if sen.Name == "" {
		sen.Name = "mymaster"
	}
	// A Sentinel of a TLS master speaks TLS too, with the same authority.
	return StartWith(t, Options{Sentinel: sen, TLS: sen.Master.opts.TLS})
}

// StartWith starts a redis-server with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	return startWith(t, opts)
}

// StartCluster starts a Redis Cluster of shards primaries (no replicas)
// on random loopback ports, the 16384 hash slots split evenly between
// them, and waits until every node sees cluster_state:ok. Unlike the
// one-node Cluster of Options.Cluster, keys of different slots live on
// different processes, so clients follow redirections and a PUBLISH is
// relayed between the nodes (SPUBLISH is not).
func StartCluster(t testing.TB, shards int) []*Server {
	t.Helper()
	return StartClusterWith(t, shards, Options{})
}

// StartClusterWith is StartCluster with opts for every shard (Cluster is
// implied). With opts.Replicas each primary gets that many replicas:
// the servers are the primaries in slot order, then the replicas of the
// first primary, of the second, and so on (Replicas says which are whose
// as the roles change), and the nodes run with a cluster-node-timeout
// of 2 s unless opts.Args name one, so that a replica takes over a
// killed primary within about 3 s.
func StartClusterWith(t testing.TB, shards int, opts Options) []*Server {
	t.Helper()
	opts.Cluster = true
	if shards < 1 {
		t.Fatalf("redistest: a cluster needs at least one shard")
	}
	if opts.Replicas > 0 && !slices.Contains(opts.Args, "--cluster-node-timeout") {
		opts.Args = append([]string{"--cluster-node-timeout", "2000"}, opts.Args...)
	}
	var out []*Server
	for i := range shards {
		lo, hi := i*16384/shards, (i+1)*16384/shards-1
		out = append(out, startWith(t, opts, [2]int{lo, hi}))
	}
	for range shards * opts.Replicas {
		out = append(out, startWith(t, opts, [2]int{-1, -1}))
	}
	for _, s := range out[1:] {
		if line, err := out[0].Do(fmt.Sprintf("CLUSTER MEET 127.0.0.1 %d", s.port)); err != nil || line != "+OK" {
			t.Fatalf("redistest: CLUSTER MEET: %q, %v", line, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range out {
		want := fmt.Sprintf("cluster_known_nodes:%d", len(out))
		if err := s.waitClusterInfo(deadline, "cluster_state:ok", want); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	if opts.Replicas > 0 {
		if err := replicate(out[:shards], out[shards:], opts.Replicas, deadline); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	return out
}

func startWith(t testing.TB, opts Options, shard ...[2]int) *Server {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	// A short directory: unix socket paths are limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{t: t, bin: bin, opts: opts, dir: dir, slots: [2]int{0, 16383}}
	if len(shard) == 1 {
		s.slots, s.shard = shard[0], true
		s.replica = shard[0][0] < 0
	}
	t.Cleanup(func() {
		s.Kill()
		_ = os.RemoveAll(dir)
	})
	if opts.Unix {
		s.sock = filepath.Join(dir, "redis.sock")
		if err := s.start(); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return s
	}
	// A port found free may be taken before redis binds it: retry.
	for attempt := 0; ; attempt++ {
		s.port, err = freePort()
		if err == nil {
			err = s.start()
		}
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatalf("redistest: %v", err)
		}
	}
}

func findBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("redis-server not found on PATH, in /usr/bin or in /usr/sbin: " +
		"install it (Debian/Ubuntu: apt-get install redis-server)")
}

// freePort returns a loopback TCP port that was free a moment ago, never
// the default Redis port.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port != 6379 {
			return port, nil
		}
	}
}

// start launches the process on s's address and waits for PING.
func (s *Server) start() error {
	appendonly := []string{"--appendonly", "no"}
	if s.opts.Persist {
		appendonly = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	args := append([]string{"--save", ""}, appendonly...)
	if sen := s.opts.Sentinel; sen.Master != nil {
		// A Sentinel rewrites its configuration file, so it gets one.
		conf := filepath.Join(s.dir, "sentinel.conf")
		lines := append([]string{fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", sen.Name, sen.Master.port)}, sen.Config...)
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		args = []string{conf, "--sentinel"}
	}
	args = append(args,
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	switch {
	case s.sock != "":
		args = append(args, "--port", "0", "--unixsocket", s.sock, "--unixsocketperm", "700")
	case s.opts.TLS != nil:
		args = append(args, "--bind", "127.0.0.1")
		args = append(args, s.tlsArgs(strconv.Itoa(s.port))...)
	default:
		args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1")
	}
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(s.bin, args...)
	out := &lockedWriter{}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	s.mu.Lock()
	s.cmd, s.out, s.exit = cmd, out, exit
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exit:
			return fmt.Errorf("redis-server exited at start-up: %s", out.String())
		default:
		}
		if err := s.ping(); err == nil {
			if s.opts.Cluster {
				return s.ownSlots(deadline)
			}
			return nil
		} else if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer PING: %v", s.Addr(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping sends PING over a raw connection and expects +PONG.
func (s *Server) ping() error {
	line, err := s.Do("PING")
	if err != nil {
		return err
	}
	// A server with a password is up, and says so, before AUTH.
	if line != "+PONG" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Do sends one inline command on a new connection and returns the first
// line of the reply (e.g. "+OK", ":1", "$-1"). It is meant for set-up and
// for poking the server from tests, not for reading large replies.
func (s *Server) Do(cmd string) (string, error) {
	lines, err := s.DoAll(cmd)
	if err != nil {
		return "", err
	}
	return lines[0], nil
}

// DoAll sends inline commands in order on one new connection and returns
// the first line of each reply: a command that would cut the harness off
// (a CONFIG SET of the TLS authorities) may be followed by others.
func (s *Server) DoAll(cmds ...string) ([]string, error) {
	c, r, err := s.send(cmds...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []string
	for range cmds {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out, nil
}

// send writes inline commands on a new connection, which it returns
// with a reader of the replies (2 s to read them).
func (s *Server) send(cmds ...string) (net.Conn, *bufio.Reader, error) {
	c, err := s.dial()
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(strings.Join(cmds, "\r\n") + "\r\n")); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, bufio.NewReader(c), nil
}

// dial connects to the server as the harness: over TLS with a
// certificate of the authority when the server speaks TLS.
func (s *Server) dial() (net.Conn, error) {
	d := &net.Dialer{Timeout: time.Second}
	if s.opts.TLS == nil {
		return d.Dial(s.Network(), s.Addr())
	}
	c, err := tls.DialWithDialer(d, "tcp", s.Addr(), s.clientTLS())
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ownSlots gives the node its hash slots (unless its nodes.conf
// already did) and, unless it is a shard of a larger cluster, waits for
// cluster_state:ok.
func (s *Server) ownSlots(deadline time.Time) error {
	if s.replica {
		return nil
	}
	if line, err := s.Do(fmt.Sprintf("CLUSTER ADDSLOTSRANGE %d %d", s.slots[0], s.slots[1])); err != nil {
		return fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
	} else if line != "+OK" && !strings.Contains(line, "busy") {
		return fmt.Errorf("CLUSTER ADDSLOTSRANGE answered %q", line)
	}
	if s.shard {
		return nil
	}
	return s.waitClusterInfo(deadline, "cluster_state:ok")
}

// waitClusterInfo waits until CLUSTER INFO contains every one of want.
func (s *Server) waitClusterInfo(deadline time.Time, want ...string) error {
	for {
		c, err := s.dial()
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Write([]byte("CLUSTER INFO\r\n"))
			buf := make([]byte, 4096)
			n, _ := io.ReadAtLeast(c, buf, 1)
			c.Close()
			if containsAll(string(buf[:n]), want) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster node %s never reached %v", s.Addr(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster reports whether the server runs in Redis Cluster mode (a
// one-node Cluster, or a shard of StartCluster).
func (s *Server) Cluster() bool { return s.opts.Cluster }

// Network is "tcp" or "unix".
func (s *Server) Network() string {
	if s.sock != "" {
		return "unix"
	}
	return "tcp"
}

// Addr is "127.0.0.1:PORT", or the socket path in unix mode.
func (s *Server) Addr() string {
	if s.sock != "" {
		return s.sock
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL is "redis://127.0.0.1:PORT" ("rediss://" with TLS), or
// "unix:///path/redis.sock".
func (s *Server) URL() string {
	switch {
	case s.sock != "":
		return "unix://" + s.sock
	case s.opts.TLS != nil:
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// PID is the running redis-server's process id (0 when stopped), e.g.
// to read its CPU time from /proc.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill ends the process with SIGKILL (a crash: clients see their
// connections reset) and waits for it. Killing a stopped server is a
// no-op.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop ends the process with SIGTERM (a clean shutdown) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
	}
}

// Restart kills the server if it runs and starts a new one on the same
// address; clients reconnect to it as after an outage. The new server is
// empty, or with Options.Persist holds every write the old one
// acknowledged.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Output returns what redis-server logged so far (for failure messages).
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

// lockedWriter is a bytes.Buffer safe to write from the exec copier while
// tests read it.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
