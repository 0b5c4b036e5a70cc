package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// TestRedisRoundTripsPerToolCall counts the commands a node sends to
// Redis (MONITOR: one round trip each, scripts counted once) for a
// legacy tools/call answered with JSON, without a session cache (every
// call loads its session) and with one: DESIGN §5 allows one or two, and
// the session load is the one. The per-caller rate adds one batched
// debit per 20ms window, whatever the number of requests in it.
func TestRedisRoundTripsPerToolCall(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name     string
		cacheTTL time.Duration
		max      float64
	}{
		{"uncached", 0, 1},
		{"cached", time.Hour, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			be, err := redisbackend.Open(t.Context(), srv.URL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = be.Close() })
			// A long lease keeps the heartbeat out of the window.
			n := newRoundTripNode(t, &mcp.HTTPOptions{Backend: be, SessionCacheTTL: c.cacheTTL, LeaseTTL: time.Minute})
			hdr := n.initialize(t)
			n.call(t, hdr) // warms the cache when there is one
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			mon, err := bench.StartMonitor(ctx, srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer mon.Close()
			const calls = 50
			mon.Begin()
			start := time.Now()
			for range calls {
				n.call(t, hdr)
			}
			// The per-caller rate is debited in one batch per 20ms window
			// (not per request).
			debits := int64(time.Since(start)/(20*time.Millisecond)) + 1
			client, script, err := mon.End(300 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			var sent int64
			for _, v := range client {
				sent += v
			}
			perCall := float64(sent) / calls
			t.Logf("%s: %.2f round trips per tools/call (client commands %v, in scripts %v)", c.name, perCall, client, script)
			// Background work (a heartbeat, the janitor) may add a
			// command or two to the window.
			if limit := int64(c.max*calls) + 2 + debits; sent > limit {
				t.Errorf("got %.2f round trips per tools/call, want at most %v", perCall, c.max)
			}
		})
	}
}

type roundTripNode struct{ *benchNode }

func newRoundTripNode(t *testing.T, opts *mcp.HTTPOptions) roundTripNode {
	t.Helper()
	s := mcp.NewServer(mcp.Implementation{Name: "rt", Version: "1"}, nil)
	demo.Register(s)
	h, err := s.NewHTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return roundTripNode{&benchNode{h: h}}
}

func (n roundTripNode) initialize(t *testing.T) map[string]string {
	t.Helper()
	init := n.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"rt","version":"1"}}}`), nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
}

func (n roundTripNode) call(t *testing.T, hdr map[string]string) {
	t.Helper()
	rec := n.post([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`), hdr)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("tools/call: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}
