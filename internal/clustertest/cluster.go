// Package clustertest runs real clusters for tests: n reference nodes
// (the cmd/server binary, as separate processes) on one real
// redis-server, behind an in-process router that sends every HTTP
// request to the next node round robin or to a random one. Nodes can be
// killed abruptly (SIGKILL), drained (SIGTERM) and restarted, and Redis
// restarted, while the test waits for conditions.
//
// The flows that need no process or Redis fault run faster and
// deterministically in process: see package clustertest/inproc.
package clustertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// Options configure a cluster.
type Options struct {
	// Nodes is the number of nodes (default 3).
	Nodes int
	// Memory runs a single node on the in-memory backend (no Redis).
	Memory bool
	// Random routes each request to a random node instead of round robin.
	Random bool
	// Tools is the tool pack (default demo).
	Tools string
	// Args are extra flags for every node.
	Args []string
	// NodeArgs, when set, returns extra flags for node i (0-based),
	// after Args (a repeated flag takes the last value): e.g. a Redis URL
	// with a user of its own, whose ACL a test can change.
	NodeArgs func(c *Cluster, i int) []string
	// RedisOptions configure the redis-server (e.g. Persist, so that
	// Cluster.Redis.Restart keeps the data acknowledged before).
	RedisOptions redistest.Options
	// Binary is the cmd/server the nodes start with (default: this
	// tree's, Binary); Node.RestartWith changes a node's. A binary of
	// another release gets only the flags it knows (see KnownFlags).
	Binary string
}

// Cluster is a running cluster.
type Cluster struct {
	T      testing.TB
	Redis  *redistest.Server
	Nodes  []*Node
	Router *Router
	opts   Options
	key    string
}

// Node is one server process.
type Node struct {
	ID   string
	Addr string // host:port
	URL  string // MCP endpoint

	c    *Cluster
	args []string
	bin  string // the cmd/server it runs
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *logBuffer
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/server once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpcluster-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "server")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/server")
		cmd.Dir = moduleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("clustertest: %v", buildErr)
	}
	return binPath
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts a cluster and stops it on cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Memory {
		opts.Nodes = 1
	}
	if opts.Tools == "" {
		opts.Tools = "demo"
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	c := &Cluster{T: t, opts: opts, key: hex.EncodeToString(k)}
	if !opts.Memory {
		c.Redis = redistest.StartWith(t, opts.RedisOptions)
	}
	bin := opts.Binary
	if bin == "" {
		bin = Binary(t)
	}
	for i := range opts.Nodes {
		n := &Node{ID: fmt.Sprintf("node%d", i+1), c: c, bin: bin}
		n.Addr = freeAddr(t)
		n.URL = "http://" + n.Addr + "/mcp"
		n.args = []string{"--addr", n.Addr, "--node-id", n.ID, "--tools", opts.Tools, "--state-key", c.key, "--log-level", "debug", "--metrics-addr", "127.0.0.1:0"}
		if c.Redis != nil {
			n.args = append(n.args, "--redis-url", c.Redis.URL())
		}
		n.args = append(n.args, opts.Args...)
		if opts.NodeArgs != nil {
			n.args = append(n.args, opts.NodeArgs(c, i)...)
		}
		c.Nodes = append(c.Nodes, n)
		if err := n.start(); err != nil {
			t.Fatalf("clustertest: starting %s: %v", n.ID, err)
		}
	}
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL
	}
	c.Router = NewRouter(urls, opts.Random)
	t.Cleanup(func() {
		c.Router.Close()
		for _, n := range c.Nodes {
			n.Kill()
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("--- logs of %s (last lines) ---\n%s", n.ID, n.logs.tail(60))
			}
		}
	})
	return c
}

// URL is the router's MCP endpoint.
func (c *Cluster) URL() string { return c.Router.URL + "/mcp" }

// NodeURLs lists the nodes' endpoints.
func (c *Cluster) NodeURLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL
	}
	return out
}

func (n *Node) start() error {
	args := n.args
	if n.bin != Binary(n.c.T) {
		known, err := KnownFlags(n.bin)
		if err != nil {
			return err
		}
		args = onlyFlags(args, known)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := exec.Command(n.bin, args...)
	// A node never outlives the test process, even one that crashed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	n.logs = &logBuffer{}
	cmd.Stderr = n.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd = cmd
	n.done = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "listening on") {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	done := n.done
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("exited at start:\n%s", n.logs.tail(30))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("not listening after 30s:\n%s", n.logs.tail(30))
	}
}

// Kill stops the node abruptly (SIGKILL): no drain, no lease release.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM (graceful drain) and waits for the exit.
func (n *Node) Stop() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s did not exit within 60s of SIGTERM", n.ID)
	}
}

// Restart starts a stopped or killed node again on the same address,
// with the binary it ran.
func (n *Node) Restart() { n.RestartWith(n.Binary()) }

// RestartWith starts a stopped or killed node again on the same address
// and with the same id, running bin (a cmd/server of another release:
// an upgrade or a downgrade).
func (n *Node) RestartWith(bin string) {
	n.c.T.Helper()
	n.mu.Lock()
	n.bin = bin
	n.mu.Unlock()
	if err := n.start(); err != nil {
		n.c.T.Fatalf("clustertest: restarting %s: %v", n.ID, err)
	}
}

// Binary is the cmd/server the node runs (or ran last).
func (n *Node) Binary() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bin
}

// PID is the node's process id (0 before its first start), e.g. to
// read its CPU time from /proc.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Alive reports whether the process runs.
func (n *Node) Alive() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Logs returns the node's log output so far.
func (n *Node) Logs() string { return n.logs.String() }

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("clustertest: timed out after %v waiting for %s", timeout, what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// logBuffer keeps a node's stderr, bounded.
type logBuffer struct {
	mu sync.Mutex
	b  []byte
}

const maxLog = 4 << 20

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > maxLog {
		l.b = append([]byte(nil), l.b[len(l.b)-maxLog/2:]...)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func (l *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
