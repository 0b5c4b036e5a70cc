package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// By default /metrics is served on a listener of its own, not on the MCP
// one, where any client of the endpoint could read it; the probes answer
// on both.
func TestMetricsOwnListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-level", "error", "--drain-timeout", "1s"},
			strings.NewReader(""), pw, &testWriter{t})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the node did not stop")
		}
	})
	mcpRE := regexp.MustCompile(`listening on http://([0-9.:]+)/`)
	metricsRE := regexp.MustCompile(`^metrics on http://([0-9.:]+)/metrics`)
	var mcpAddr, metricsAddr string
	lines := bufio.NewScanner(pr)
	for (mcpAddr == "" || metricsAddr == "") && lines.Scan() {
		if m := mcpRE.FindStringSubmatch(lines.Text()); m != nil {
			mcpAddr = m[1]
		}
		if m := metricsRE.FindStringSubmatch(lines.Text()); m != nil {
			metricsAddr = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if mcpAddr == "" || metricsAddr == "" {
		t.Fatalf("no addresses printed (mcp %q, metrics %q)", mcpAddr, metricsAddr)
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, _ := get("http://" + mcpAddr + "/metrics"); st != http.StatusNotFound {
		t.Errorf("/metrics on the MCP listener: got %d, want 404", st)
	}
	if st, body := get("http://" + metricsAddr + "/metrics"); st != http.StatusOK || !strings.Contains(body, "mcp_") {
		t.Errorf("/metrics on the metrics listener: got %d with %d bytes, want 200 with mcp_ metrics", st, len(body))
	}
	for _, addr := range []string{mcpAddr, metricsAddr} {
		if st, _ := get("http://" + addr + "/healthz"); st != http.StatusOK {
			t.Errorf("/healthz on %s: got %d, want 200", addr, st)
		}
	}
}

// testWriter sends the node's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
