package mcp_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// listedTools returns the tool names node url lists to c.
func listedTools(t *testing.T, c *mcptest.Client, url string) []string {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	post(t, c, url, "tools/list", map[string]any{}, nil).Result(t, &res)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// A run-time change of the registry made on one node (the demo's
// toggle_extra_tool) is seen by every node: tools/list agrees across the
// cluster, and the enabled tool can be called anywhere.
func TestAbuseRegistryAcrossNodes(t *testing.T) {
	nodes, _ := redisNodes(t, 2, nodeOptions{}, nil)
	a, b := nodes[0], nodes[1]
	c := session(t, a.url, mcp.LatestLegacyVersion, nil)
	for i, want := range []string{"added", "removed", "added"} {
		on, other := a, b
		if i%2 == 1 {
			on, other = b, a
		}
		if got := resultText(t, post(t, c, on.url, "tools/call", toolCall("toggle_extra_tool", nil, false), nil)); got != want {
			t.Fatalf("toggle %d: got %q, want %q", i+1, got, want)
		}
		listed := want == "added"
		mcptest.Eventually(t, 5*time.Second, "every node to list the same tools", func() bool {
			return slices.Contains(listedTools(t, c, other.url), "extra") == listed &&
				slices.Contains(listedTools(t, c, on.url), "extra") == listed
		})
	}
	if got := resultText(t, post(t, c, b.url, "tools/call", toolCall("extra", nil, false), nil)); got != "extra" {
		t.Fatalf("extra on the other node: got %q", got)
	}
}

// Registry changes in a burst start a bounded number of fan-outs: the
// node's goroutines stay near their baseline while 300 changes notify
// 200 sessions, instead of one fan-out (with its workers) per change.
func TestAbuseFanOutBound(t *testing.T) {
	nodes, _ := redisNodes(t, 1, nodeOptions{}, nil)
	n := nodes[0]
	for range 200 {
		session(t, n.url, mcp.LatestLegacyVersion, nil)
	}
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if g := int64(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for range 150 {
		n.srv.AddToolRaw(mcp.Tool{Name: "burst"}, func(context.Context, *mcp.Request, json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		n.srv.RemoveTools("burst")
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	sampler.Wait()
	// 4 fan-outs of 16 workers run at once, and one more waits.
	t.Logf("goroutines: baseline %d, peak %d", base, peak.Load())
	if extra := peak.Load() - int64(base); extra > 120 {
		t.Fatalf("goroutines peaked %d above the baseline of %d, want at most 120", extra, base)
	}
}
