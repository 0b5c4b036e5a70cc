package clustertest_test

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// A node whose Redis is not up yet starts anyway: /healthz answers, but
// /readyz and the MCP endpoint answer 503 (the latter with a JSON-RPC
// error) while it retries; once a real redis-server appears on the
// address the node becomes ready by itself and serves. Every line it
// logs meanwhile, go-redis's included, is JSON.
func TestNodeStartsBeforeRedis(t *testing.T) {
	rs := redistest.Start(t)
	rs.Stop() // the address is known, nothing listens on it
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	cmd := exec.Command(clustertest.Binary(t), "--addr", addr, "--redis-url", rs.URL(),
		"--state-key", strings.Repeat("ab", 32), "--backend-retry-max", "200ms", "--log-level", "debug")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr mcptest.LogBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the process ended
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})

	base := "http://" + addr
	status := func(method, path string, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	clustertest.WaitFor(t, 15*time.Second, "the node to answer /healthz", func() bool {
		select {
		case <-exited:
			t.Fatalf("the node exited while Redis was down: %v", exitErr)
		default:
		}
		code, _ := status(http.MethodGet, "/healthz", "")
		return code == http.StatusOK
	})
	// Several attempts fail; the node stays up and unready.
	clustertest.WaitFor(t, 30*time.Second, "two failed attempts", func() bool {
		return strings.Count(stderr.String(), "backend unavailable: not ready, retrying") >= 2
	})
	if !strings.Contains(stdout.String(), "waiting for its backend") {
		t.Errorf("stdout does not say the node waits for its backend: %q", stdout.String())
	}
	if code, _ := status(http.MethodGet, "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without Redis: got %d, want 503", code)
	}
	code, body := status(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("MCP request without Redis: got %d, want 503 (body %q)", code, body)
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil || msg.Error == nil || msg.Error.Code != jsonrpc.CodeUnavailable {
		t.Fatalf("MCP request without Redis: body %q is not a JSON-RPC unavailable error (%v)", body, err)
	}

	rs.Restart() // Redis appears on the same address
	clustertest.WaitFor(t, 15*time.Second, "the node to become ready", func() bool {
		code, _ := status(http.MethodGet, "/readyz", "")
		return code == http.StatusOK
	})
	c := mcptest.New(t, base+"/mcp")
	c.Initialize("2025-06-18", nil)
	if r := c.Call("tools/list", map[string]any{}, nil); r.Status != http.StatusOK {
		t.Fatalf("tools/list once ready: status %d", r.Status)
	}
	if !strings.Contains(stdout.String(), "listening on "+base) {
		t.Fatalf("stdout does not say the node listens once ready: %q", stdout.String())
	}

	// Every log line is a JSON object: go-redis's messages included.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not stop within 30s of SIGTERM")
	}
	lines := stderr.JSONLines(t)
	goRedis := 0
	for _, m := range lines {
		if m["component"] == "go-redis" {
			goRedis++
		}
	}
	if goRedis == 0 {
		t.Errorf("no go-redis message in the log, though it failed to dial: %d lines", len(lines))
	}
}
