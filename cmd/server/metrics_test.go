package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// By default /metrics is served on a listener of its own, not on the MCP
// one, where any client of the endpoint could read it; the probes answer
// on both.
func TestMetricsOwnListener(t *testing.T) {
	out, _ := startNode(t)
	mcpAddr := addrIn(t, out.String(), `listening on http://([0-9.:]+)/`)
	metricsAddr := addrIn(t, out.String(), `(?m)^metrics on http://([0-9.:]+)/metrics`)
	if st, _ := get(t, "http://"+mcpAddr+"/metrics"); st != http.StatusNotFound {
		t.Errorf("/metrics on the MCP listener: got %d, want 404", st)
	}
	if st, body := get(t, "http://"+metricsAddr+"/metrics"); st != http.StatusOK || !strings.Contains(body, "mcp_") {
		t.Errorf("/metrics on the metrics listener: got %d with %d bytes, want 200 with mcp_ metrics", st, len(body))
	}
	if st, _ := get(t, "http://"+metricsAddr+"/debug/pprof/"); st != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --pprof: got %d, want 404", st)
	}
	for _, addr := range []string{mcpAddr, metricsAddr} {
		if st, _ := get(t, "http://"+addr+"/healthz"); st != http.StatusOK {
			t.Errorf("/healthz on %s: got %d, want 200", addr, st)
		}
	}
}

// --pprof serves the runtime profiles on the metrics listener only.
func TestPprofOnMetricsListener(t *testing.T) {
	out, _ := startNode(t, "--pprof")
	mcpAddr := addrIn(t, out.String(), `listening on http://([0-9.:]+)/`)
	metricsAddr := addrIn(t, out.String(), `(?m)^metrics on http://([0-9.:]+)/metrics`)
	if st, body := get(t, "http://"+metricsAddr+"/debug/pprof/goroutine?debug=1"); st != http.StatusOK || !strings.Contains(body, "goroutine profile: total") {
		t.Errorf("goroutine profile on the metrics listener: got %d, %.80q", st, body)
	}
	if st, _ := get(t, "http://"+mcpAddr+"/debug/pprof/goroutine?debug=1"); st != http.StatusNotFound {
		t.Errorf("profiles on the MCP listener: got %d, want 404", st)
	}
}

func addrIn(t *testing.T, out, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no address matching %s in %q", re, out)
	}
	return m[1]
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
