// Package examples_test runs the example programs as their users do: it
// builds examples/node and examples/proxy, starts them as processes (the
// nodes on a redis-server of the test's own), and speaks MCP to them over
// the wire. clients/gosdk drives the official Go SDK client through the
// same two programs across a kill -9 (TestExamplesWithGoSDK there).
package examples_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
)

// nodeBin and proxyBin are the programs under test, built by TestMain.
var nodeBin, proxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpcluster-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin, proxyBin = filepath.Join(dir, "node"), filepath.Join(dir, "proxy")
	if out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./node", "./proxy").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./node ./proxy: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a program under test; it is killed when the test ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  mcptest.LogBuffer
	done chan struct{}
	err  error // Wait's, once done is closed
}

// start runs bin with args and env (added to the test's environment less
// its MCP_ variables).
func start(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// await waits until the output matches re and returns the submatches.
func (p *proc) await(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q:\n%s", p.name, p.err, re, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, re, timeout, p.out.String())
		}
	}
}

// exited waits for the process to end and returns Wait's error.
func (p *proc) exited(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s still runs after %v", p.name, timeout)
		return nil
	}
}

// node is a running examples/node.
type node struct {
	*proc
	url     string // the MCP endpoint
	base    string // http://host:port
	metrics string
}

var serving = regexp.MustCompile(`msg=serving mcp=(\S+) metrics=(\S+)`)

// startNode starts examples/node over HTTP on free loopback ports and
// waits until /readyz answers 200.
func startNode(t *testing.T, name string, env ...string) *node {
	t.Helper()
	p := start(t, name, env, nodeBin, "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0")
	m := p.await(t, serving, 20*time.Second)
	n := &node{proc: p, url: m[1], base: strings.TrimSuffix(m[1], "/mcp"), metrics: m[2]}
	waitFor(t, 10*time.Second, name+" ready", func() bool { return status(n.base+"/readyz") == http.StatusOK })
	return n
}

// startProxy starts examples/proxy in front of nodes (base URLs).
func startProxy(t *testing.T, nodes ...string) (p *proc, url string) {
	t.Helper()
	p = start(t, "proxy", nil, proxyBin, append([]string{"-addr", "127.0.0.1:0"}, nodes...)...)
	return p, p.await(t, regexp.MustCompile(`listening on (\S+)`), 10*time.Second)[1]
}

// refusingAddr returns a loopback address nothing listens on.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// status GETs url and returns the status, 0 when it got no answer.
func status(url string) int {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
