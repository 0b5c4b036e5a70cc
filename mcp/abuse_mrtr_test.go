package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// redisNodes starts n nodes on one test-started redis-server (returned
// too), sharing a state key; ro tunes each node's Redis backend.
func redisNodes(t *testing.T, n int, o nodeOptions, ro *redisbackend.Options) ([]*node, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	o.Server.StateKeys = [][]byte{bytes.Repeat([]byte{3}, 32)}
	var nodes []*node
	for range n {
		be, err := redisbackend.Open(context.Background(), rs.URL(), ro)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		oo := o
		oo.HTTP.Backend = be
		nodes = append(nodes, newNode(t, &oo))
	}
	return nodes, rs
}

// mrtrRound is a 2026-07-28 tools/call result that may ask for input.
type mrtrRound struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
	Content       []mcp.Content              `json:"content"`
}

func sampled(text string) map[string]any {
	return map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": text}}
}

func callModern(t *testing.T, c *mcptest.Client, url, tool string, extra map[string]any) *mcptest.Response {
	t.Helper()
	params := toolCall(tool, nil, false)
	for k, v := range extra {
		params[k] = v
	}
	return postModern(t, c, url, "tools/call", params, nil)
}

// The MRTR replay paths, on two nodes sharing Redis: a requestState a
// handler consumed is refused when replayed on another node; answers
// sealed in an earlier round win over a retry's answers for the same key;
// a requestState that is not a string gets -32602 instead of a fresh
// round.
func TestAbuseMRTRReplay(t *testing.T) {
	var paid atomic.Int32
	nodes, _ := redisNodes(t, 2, nodeOptions{Setup: func(s *mcp.Server) {
		ask := func(ctx context.Context, req *mcp.Request, q string) (string, error) {
			res, err := req.Sample(ctx, &mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent(q)}}}, MaxTokens: 10})
			if err != nil {
				return "", err
			}
			return res.Text(), nil
		}
		mcp.AddTool(s, mcp.Tool{Name: "two_answers"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			a, err := ask(ctx, req, "first")
			if err != nil {
				return "", err
			}
			b, err := ask(ctx, req, "second")
			if err != nil {
				return "", err
			}
			return a + "|" + b, nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "pay"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			if _, err := ask(ctx, req, "confirm?"); err != nil {
				return "", err
			}
			if err := req.ConsumeState(ctx); err != nil {
				return "", err
			}
			paid.Add(1)
			return "paid", nil
		})
	}}, nil)
	a, b := nodes[0], nodes[1]
	c := mcptest.New(t, a.url)

	t.Run("single use across nodes", func(t *testing.T) {
		var r1 mrtrRound
		callModern(t, c, a.url, "pay", nil).Result(t, &r1)
		if r1.ResultType != "input_required" || len(r1.InputRequests) != 1 {
			t.Fatalf("round 1: got %+v", r1)
		}
		retry := map[string]any{"requestState": r1.RequestState, "inputResponses": map[string]any{firstKey(r1.InputRequests): sampled("yes")}}
		if got := resultText(t, callModern(t, c, a.url, "pay", retry)); got != "paid" {
			t.Fatalf("retry: got %q, want paid", got)
		}
		replay := callModern(t, c, b.url, "pay", retry)
		if f := replay.Final(); f == nil || f.Error == nil || f.Error.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("replay on another node: got %s, want -32602", replay.Body)
		}
		if got := paid.Load(); got != 1 {
			t.Fatalf("paid %d times, want 1", got)
		}
	})

	t.Run("sealed answers win", func(t *testing.T) {
		var r1, r2 mrtrRound
		callModern(t, c, a.url, "two_answers", nil).Result(t, &r1)
		k1 := firstKey(r1.InputRequests)
		callModern(t, c, b.url, "two_answers", map[string]any{"requestState": r1.RequestState,
			"inputResponses": map[string]any{k1: sampled("A")}}).Result(t, &r2)
		if r2.ResultType != "input_required" || len(r2.InputRequests) != 1 {
			t.Fatalf("round 2: got %+v", r2)
		}
		k2 := firstKey(r2.InputRequests)
		// The retry tries to change the first answer after the handler
		// acted on it.
		got := resultText(t, callModern(t, c, a.url, "two_answers", map[string]any{"requestState": r2.RequestState,
			"inputResponses": map[string]any{k1: sampled("CHANGED"), k2: sampled("B")}}))
		if got != "A|B" {
			t.Fatalf("got %q, want A|B (the sealed answer)", got)
		}
	})

	t.Run("requestState of the wrong type", func(t *testing.T) {
		for _, v := range []any{42, true, map[string]any{}, []any{"x"}} {
			resp := callModern(t, c, a.url, "two_answers", map[string]any{"requestState": v})
			if f := resp.Final(); f == nil || f.Error == nil || f.Error.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("requestState %v: got %s, want -32602", v, resp.Body)
			}
		}
	})
}

func firstKey(m map[string]json.RawMessage) string {
	for k := range m {
		return k
	}
	return ""
}
