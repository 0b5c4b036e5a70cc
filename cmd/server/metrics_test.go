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
	addr := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no address matching %s in %q", re, out.String())
		}
		return m[1]
	}
	mcpAddr := addr(`listening on http://([0-9.:]+)/`)
	metricsAddr := addr(`(?m)^metrics on http://([0-9.:]+)/metrics`)
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
