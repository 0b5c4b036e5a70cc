package inproc_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
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

// A session change is acknowledged by the nodes that hold a copy of the
// session (those that served it since its last change), not by every
// node: a session initialized on node 0 and called on node 1 is deleted
// (and, another, given a log level) on node 2 with exactly two
// acknowledgements, each delivered to node 2 alone, whether the cluster
// has 3 nodes or 8; and the change holds on the holders at once.
func TestSessionChangeAcknowledgedByItsHoldersOnly(t *testing.T) {
	for _, n := range []int{3, 5, 8} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			c := inproc.New(t, inproc.Options{Nodes: n, HTTP: mcp.HTTPOptions{SessionCacheTTL: 10 * time.Second}, Setup: func(_ int, s *mcp.Server) {
				mcp.AddTool(s, mcp.Tool{Name: "say"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
					_ = req.Log(ctx, mcp.LevelInfo, "test", "said at info")
					return "ok", nil
				})
			}})
			var acks [8]atomic.Int64 // acknowledgements delivered, per node
			for i, nd := range c.Nodes {
				nd.Faults.Filter(func(_ string, msg []byte) inproc.Verdict {
					if bytes.Contains(msg, []byte(`"t":"invd"`)) {
						acks[i].Add(1)
					}
					return inproc.Verdict{}
				})
			}
			delivered := func() (total int64, where []int) {
				for i := range c.Nodes {
					if k := acks[i].Swap(0); k > 0 {
						total += k
						where = append(where, i)
					}
				}
				return total, where
			}
			open := func() *mcptest.Client {
				cl := mcptest.New(t, c.Nodes[0].URL)
				cl.Initialize(mcp.Version20251125, nil)
				if resp := callAt(t, cl, c.Nodes[1].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusOK {
					t.Fatalf("tools/call on node 1: got %d %s", resp.Status, resp.Body)
				}
				return cl
			}
			// setLevel on node 2: nodes 0 and 1 acknowledge; the new level
			// holds on node 1 at once.
			cl := open()
			delivered()
			if resp := callAt(t, cl, c.Nodes[2].URL, "logging/setLevel", map[string]any{"level": "error"}); resp.Status != http.StatusOK {
				t.Fatalf("setLevel on node 2: got %d %s", resp.Status, resp.Body)
			}
			if total, where := delivered(); total != 2 || !slices.Equal(where, []int{2}) {
				t.Fatalf("setLevel: %d acknowledgements delivered to nodes %v, want 2, to node 2 only", total, where)
			}
			if resp := callAt(t, cl, c.Nodes[1].URL, "tools/call", tool("say", nil)); mcptest.Count(resp.Messages, "notifications/message") != 0 {
				t.Fatalf("node 1 logged at info after setLevel error on node 2 (a stale copy): %s", resp.Body)
			}
			// DELETE on node 2 of a fresh session: nodes 0 and 1
			// acknowledge; the session is gone on node 1 at once.
			cl = open()
			delivered()
			if st := cl.Delete(c.Nodes[2].URL); st != http.StatusNoContent {
				t.Fatalf("DELETE on node 2: got %d", st)
			}
			if total, where := delivered(); total != 2 || !slices.Equal(where, []int{2}) {
				t.Fatalf("DELETE: %d acknowledgements delivered to nodes %v, want 2, to node 2 only", total, where)
			}
			if resp := callAt(t, cl, c.Nodes[1].URL, "tools/call", tool("say", nil)); resp.Status != http.StatusNotFound {
				t.Fatalf("tools/call on node 1 after DELETE on node 2: got %d, want 404", resp.Status)
			}
		})
	}
}
