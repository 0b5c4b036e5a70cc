package mcp_test

import (
	"context"
	"sync"
	"testing"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// Without a transport, SwapEnabled and ToggleEnabled change this
// process's state and report it; unknown features are errors.
func TestEnabledLocal(t *testing.T) {
	ctx := context.Background()
	s := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "x"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
	for i, step := range []struct{ on, was bool }{{true, true}, {false, true}, {false, false}, {true, false}} {
		was, err := s.SwapEnabled(ctx, mcp.KindTool, "x", step.on)
		if err != nil || was != step.was {
			t.Fatalf("swap %d to %v: was %v, %v; want %v", i+1, step.on, was, err, step.was)
		}
	}
	for i, want := range []bool{false, true, false} {
		on, err := s.ToggleEnabled(ctx, mcp.KindTool, "x")
		if err != nil || on != want || s.Enabled(mcp.KindTool, "x") != want {
			t.Fatalf("toggle %d: %v, %v (Enabled %v); want %v", i+1, on, err, s.Enabled(mcp.KindTool, "x"), want)
		}
	}
	if _, err := s.ToggleEnabled(ctx, mcp.KindTool, "nope"); err == nil {
		t.Fatal("toggling an unregistered tool: no error")
	}
	if _, err := s.SwapEnabled(ctx, "widget", "x", true); err == nil {
		t.Fatal("a feature of an unknown kind: no error")
	}
}

// On Redis, SwapEnabled from two nodes at once changes the state once
// (one of them sees the change), a swap to the state a feature has
// unrecorded (its registered default) changes nothing, and toggles on
// alternating nodes each flip the shared state, whatever each node has
// heard of the other's change.
func TestEnabledSharedAtomic(t *testing.T) {
	nodes, _ := redisNodes(t, 2, nodeOptions{}, nil)
	ctx := context.Background()
	// 'extra' (the demo pack's) is registered disabled.
	for _, n := range nodes {
		if was, err := n.srv.SwapEnabled(ctx, mcp.KindTool, "extra", false); err != nil || was {
			t.Fatalf("disabling the disabled extra: was %v, %v; want false", was, err)
		}
	}
	for round, on := range []bool{true, false, true} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		changed := 0
		for _, n := range nodes {
			wg.Go(func() {
				was, err := n.srv.SwapEnabled(ctx, mcp.KindTool, "extra", on)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if was != on {
					changed++
				}
			})
		}
		wg.Wait()
		if changed != 1 {
			t.Fatalf("round %d: %d of two concurrent SwapEnabled(%v) saw a change, want 1", round+1, changed, on)
		}
	}
	for i, want := range []bool{false, true, false, true, false} {
		on, err := nodes[i%2].srv.ToggleEnabled(ctx, mcp.KindTool, "extra")
		if err != nil || on != want {
			t.Fatalf("toggle %d on node %d: %v, %v; want %v", i+1, i%2, on, err, want)
		}
	}
}
