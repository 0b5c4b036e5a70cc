package mcp_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// inputKeys returns the keys of a round's input requests, sorted.
func inputKeys(r mrtrRound) []string {
	return slices.Sorted(maps.Keys(r.InputRequests))
}

// inputMethod returns the method of one input request of a round.
func inputMethod(r mrtrRound, key string) string {
	var ir struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(r.InputRequests[key], &ir)
	return ir.Method
}

// A handler names its input requests with WithInputKey; unnamed ones keep
// input-N (N counting the round's asks); several asks made past
// IsInputRequired errors reach the client in one round, and the retry
// answers each under its key.
func TestMRTRInputKeys(t *testing.T) {
	n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) {
		s.AddToolRaw(mcp.Tool{Name: "keys"}, func(ctx context.Context, req *mcp.Request, _ json.RawMessage) (*mcp.CallToolResult, error) {
			el, err1 := req.Elicit(mcp.WithInputKey(ctx, "user_name"), &mcp.ElicitParams{
				Message: "name?", RequestedSchema: map[string]any{"type": "object"},
			})
			roots, err2 := req.ListRoots(ctx)
			for _, err := range []error{err1, err2} {
				if err != nil && !mcp.IsInputRequired(err) {
					return nil, err
				}
			}
			if err1 != nil {
				return nil, err1
			}
			if err2 != nil {
				return nil, err2
			}
			return mcp.TextResult(el.Action + " " + roots.Roots[0].URI), nil
		})
		s.AddToolRaw(mcp.Tool{Name: "dup"}, func(ctx context.Context, req *mcp.Request, _ json.RawMessage) (*mcp.CallToolResult, error) {
			ctx = mcp.WithInputKey(ctx, "same")
			if _, err := req.ListRoots(ctx); err != nil {
				return nil, err
			}
			_, err := req.ListRoots(ctx)
			return mcp.ErrorResult(err.Error()), nil
		})
		s.AddToolRaw(mcp.Tool{Name: "empty"}, func(ctx context.Context, req *mcp.Request, _ json.RawMessage) (*mcp.CallToolResult, error) {
			_, err := req.ListRoots(mcp.WithInputKey(ctx, ""))
			return mcp.ErrorResult(err.Error()), nil
		})
	}})
	c := mcptest.New(t, n.url)
	call := func(name string, extra map[string]any) *mcptest.Response {
		t.Helper()
		meta := mcptest.ModernMeta()
		meta[mcp.MetaClientCapabilities] = map[string]any{"elicitation": map[string]any{}, "roots": map[string]any{}}
		params := map[string]any{"name": name, "arguments": map[string]any{}, "_meta": meta}
		for k, v := range extra {
			params[k] = v
		}
		msg, _ := jsonrpc.Request(c.NextID(), "tools/call", params)
		b, _ := jsonrpc.Encode(msg)
		resp, err := c.PostRaw(context.Background(), n.url, b, mcptest.ModernHeaders("tools/call", name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	var r1 mrtrRound
	call("keys", nil).Result(t, &r1)
	if r1.ResultType != "input_required" || !slices.Equal(inputKeys(r1), []string{"input-2", "user_name"}) || r1.RequestState == "" {
		t.Fatalf("round 1: got %+v, want input requests user_name and input-2", r1)
	}
	if inputMethod(r1, "user_name") != "elicitation/create" || inputMethod(r1, "input-2") != "roots/list" {
		t.Fatalf("round 1 methods: %+v", r1.InputRequests)
	}
	answers := map[string]any{
		"user_name": map[string]any{"action": "accept", "content": map[string]any{}},
		"input-2":   map[string]any{"roots": []any{map[string]any{"uri": "file:///r"}}},
	}
	if got := textOf(t, call("keys", map[string]any{"inputResponses": answers, "requestState": r1.RequestState})); got != "accept file:///r" {
		t.Fatalf("round 2: got %q", got)
	}

	// Once "same" is answered, asking it again in the round fails.
	var d1 mrtrRound
	call("dup", nil).Result(t, &d1)
	if !slices.Equal(inputKeys(d1), []string{"same"}) {
		t.Fatalf("dup round 1: got %+v", d1)
	}
	retry := map[string]any{
		"inputResponses": map[string]any{"same": map[string]any{"roots": []any{}}},
		"requestState":   d1.RequestState,
	}
	for name, want := range map[string]string{"dup": `input key "same" used twice`, "empty": "empty input key"} {
		var res mcp.CallToolResult
		extra := map[string]any(nil)
		if name == "dup" {
			extra = retry
		}
		call(name, extra).Result(t, &res)
		if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, want) {
			t.Errorf("%s: got %+v, want a tool error containing %q", name, res, want)
		}
	}
}
