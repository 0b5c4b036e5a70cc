package inproc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// With the session cache on, a node answers a session's requests from
// its own copy, which every change drops over the bus. The node that
// makes a change answers its client only once every other node has
// acknowledged dropping its copy. These tests make every bus message
// reach A 20ms late and B 30ms late: a client that hears of the change
// from B and goes straight to A must find it there. They fail when B
// answers without waiting for the acknowledgements.

// cacheRig is two nodes whose bus messages arrive late, and a session
// initialized on A (which caches it) with its copy warm.
func cacheRig(t *testing.T) (*inproc.Cluster, func(t *testing.T) *mcptest.Client) {
	c := inproc.New(t, inproc.Options{Nodes: 2, HTTP: mcp.HTTPOptions{SessionCacheTTL: 10 * time.Second}, Setup: func(_ int, s *mcp.Server) {
		mcp.AddTool(s, mcp.Tool{Name: "say"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			_ = req.Log(ctx, mcp.LevelInfo, "test", "said at info")
			return "ok", nil
		})
	}})
	c.Nodes[0].Faults.Filter(func(string, []byte) inproc.Verdict { return inproc.Verdict{Delay: 20 * time.Millisecond} })
	c.Nodes[1].Faults.Filter(func(string, []byte) inproc.Verdict { return inproc.Verdict{Delay: 30 * time.Millisecond} })
	open := func(t *testing.T) *mcptest.Client {
		cl := mcptest.New(t, c.Nodes[0].URL)
		cl.Initialize(mcp.Version20251125, nil)
		if resp := callAt(t, cl, c.Nodes[0].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusOK {
			t.Fatalf("tools/call on A: got %d %s", resp.Status, resp.Body)
		}
		return cl
	}
	return c, open
}

// A DELETE on B, then at once a request on A, whose copy of the session
// is warm: 404, every time.
func TestDeleteOnBThenRequestOnAWithWarmCache(t *testing.T) {
	c, open := cacheRig(t)
	for i := range 20 {
		cl := open(t)
		if st := cl.Delete(c.Nodes[1].URL); st != http.StatusNoContent {
			t.Fatalf("round %d: DELETE on B: got %d", i, st)
		}
		if resp := callAt(t, cl, c.Nodes[0].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusNotFound {
			t.Fatalf("round %d: tools/call on A right after DELETE on B: got %d %s, want 404 (A answered from a stale copy)", i, resp.Status, resp.Body)
		}
	}
}

// logging/setLevel on B, then at once a call on A that logs at info: the
// level set on B is the one A applies, every time.
func TestSetLevelOnBAppliesAtOnceOnA(t *testing.T) {
	c, open := cacheRig(t)
	cl := open(t)
	for i, level := range []string{"error", "debug", "warning", "info", "emergency", "debug"} {
		if resp := callAt(t, cl, c.Nodes[1].URL, "logging/setLevel", map[string]any{"level": level}); resp.Status != http.StatusOK || resp.Final() == nil || resp.Final().Error != nil {
			t.Fatalf("round %d: setLevel %s on B: got %d %s", i, level, resp.Status, resp.Body)
		}
		resp := callAt(t, cl, c.Nodes[0].URL, "tools/call", tool("say", nil))
		logged := mcptest.Count(resp.Messages, "notifications/message") > 0
		if want := level == "debug" || level == "info"; logged != want {
			t.Fatalf("round %d: level %s set on B, a log at info on A was sent: %v, want %v (A used a stale level)", i, level, logged, want)
		}
	}
}

// While A is cut off the bus it misses invalidations: it serves nothing
// from its copies meanwhile (503, or 404 from the store), and drops them
// when its bus is back, so the session ended on B meanwhile is a 404 on
// A then too.
func TestCacheNotTrustedAfterTheBusWasCut(t *testing.T) {
	c, open := cacheRig(t)
	cl := open(t)
	c.Nodes[0].Cut()
	if st := cl.Delete(c.Nodes[1].URL); st != http.StatusNoContent {
		t.Fatalf("DELETE on B: got %d", st)
	}
	if resp := callAt(t, cl, c.Nodes[0].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusServiceUnavailable && resp.Status != http.StatusNotFound {
		t.Fatalf("tools/call on A, cut off the bus, after DELETE on B: got %d %s, want 503 or 404", resp.Status, resp.Body)
	}
	c.Nodes[0].Heal(t)
	if resp := callAt(t, cl, c.Nodes[0].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusNotFound {
		t.Fatalf("tools/call on A, back on the bus, after DELETE on B: got %d %s, want 404 (the copy outlived the lost invalidation)", resp.Status, resp.Body)
	}
}
