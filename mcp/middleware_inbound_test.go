package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// inboundGuard records every inbound message it sees as "name:method"
// ("name:reply" for a client's reply) and refuses subscriptions/listen,
// notifications/cancelled and replies whose text is "drop-me".
func inboundGuard(tr *trail, name string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			seen := method
			if method == "" {
				seen = "reply"
			}
			tr.add(name + ":" + seen)
			switch {
			case method == "subscriptions/listen", method == "notifications/cancelled",
				method == "" && bytes.Contains(req.Params, []byte(`"drop-me"`)):
				return nil, mcp.NewError(codeRefused, "refused: "+seen, nil)
			}
			return next(ctx, method, req)
		}
	}
}

// dropMe is a sampling reply inboundGuard drops.
var dropMe = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "drop-me"}}

// only keeps the entries of a trail that start with prefix.
func only(got []string, prefix string) []string {
	return slices.DeleteFunc(got, func(s string) bool { return !strings.HasPrefix(s, prefix) })
}

// Receiving middleware sees every inbound message on HTTP, on the node
// that receives it: notifications, the client's replies to server→client
// requests (a reply it refuses is dropped: the handler gets the next
// one), and subscriptions/listen (refused: the JSON-RPC error). With
// two nodes the call runs on one and every other message is posted to
// the other, so the reply crosses nodes after the middleware passed it.
func TestReceivingMiddlewareSeesEveryInboundMessageHTTP(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		t.Run(map[int]string{1: "one node", 2: "two nodes"}[nodes], func(t *testing.T) {
			be := mcp.NewMemoryBackend()
			t.Cleanup(func() { _ = be.Close() })
			trs := []*trail{{}, {}}
			var ns []*node
			for i := range nodes {
				name := []string{"a", "b"}[i]
				ns = append(ns, newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: be}, Setup: func(s *mcp.Server) {
					s.AddReceivingMiddleware(inboundGuard(trs[i], name))
				}}))
			}
			runs, other := ns[0], ns[len(ns)-1]
			c := mcptest.New(t, runs.url)
			c.Initialize(mcp.LatestLegacyVersion, samplingCaps)

			// A reply the middleware drops, then the one it passes.
			body, _ := encodeRequest(t, c, "tools/call", toolCall("sample", map[string]any{"prompt": "2+2?"}, false))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := c.PostRaw(ctx, runs.url, body, nil, func(m *jsonrpc.Message) *jsonrpc.Message {
				if m.Kind() != jsonrpc.KindRequest {
					return nil
				}
				for _, reply := range []any{dropMe, samplingReply} {
					r, _ := jsonrpc.Response(m.ID, reply)
					b, _ := jsonrpc.Encode(r)
					if got, err := c.PostRaw(ctx, other.url, b, nil, nil); err != nil || got.Status != http.StatusAccepted {
						t.Errorf("reply: %v %+v", err, got)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, resp); !strings.Contains(got, "4") || strings.Contains(got, "drop-me") {
				t.Fatalf("got %q, want the answer of the reply the middleware passed", got)
			}

			// A refused notifications/cancelled does not cancel.
			st, id := openLegacy(t, c, runs.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
			runs.probe.waitStarted(t)
			cancelled, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": id})
			b, _ := jsonrpc.Encode(cancelled)
			if got, err := c.PostRaw(ctx, other.url, b, nil, nil); err != nil || got.Status != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %v %+v", err, got)
			}
			runs.probe.release <- struct{}{}
			if !st.WaitFor(10*time.Second, finalResponse) {
				t.Fatal("no result for the blocked call")
			}
			if ms := st.Messages(); !strings.Contains(string(ms[len(ms)-1].Result), "released") {
				t.Fatalf("got %+v, want the released result: the refused cancellation cancelled it", ms[len(ms)-1])
			}

			// subscriptions/listen is refused with the middleware's error.
			listen := postModern(t, mcptest.New(t, other.url), other.url, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
			wantRPCError(t, listen, http.StatusOK, codeRefused)

			// Each node's middleware saw what was posted to it, in order.
			x := []string{"a", "b"}[nodes-1]
			want := []string{"a:initialize", "a:notifications/initialized", "a:tools/call", x + ":reply", x + ":reply",
				"a:tools/call", x + ":notifications/cancelled", x + ":subscriptions/listen"}
			for i, name := range []string{"a", "b"} {
				if got, want := trs[i].list(), only(slices.Clone(want), name+":"); !slices.Equal(got, want) {
					t.Fatalf("node %s's middleware saw %q, want %q", name, got, want)
				}
			}
		})
	}
}

// Receiving middleware sees every inbound message on stdio: notifications,
// replies (a refused reply is dropped: the handler gets the next one)
// and subscriptions/listen (refused: the JSON-RPC error).
func TestReceivingMiddlewareSeesEveryInboundMessageStdio(t *testing.T) {
	tr := &trail{}
	s := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	demo.Register(s)
	s.AddReceivingMiddleware(inboundGuard(tr, "s"))
	c := startStdio(t, s, nil)
	c.send(stdioInit)
	c.next("the initialize answer")
	c.send(stdioInitialized, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"2+2?"}}}`)
	ask := c.next("the sampling request")
	if ask.Method != "sampling/createMessage" {
		t.Fatalf("got %s, want a sampling request", ask.raw)
	}
	for _, reply := range []any{dropMe, samplingReply} {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": ask.ID, "result": reply})
		c.send(string(b))
	}
	if l := c.next("the tools/call answer"); !strings.Contains(string(l.Result), "4") || strings.Contains(string(l.Result), "drop-me") {
		t.Fatalf("got %s, want the answer of the reply the middleware passed", l.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
		`{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+stdioModernMeta+`}}`)
	if l := c.next("the listen answer"); l.Error == nil || l.Error.Code != codeRefused {
		t.Fatalf("got %s, want the middleware's refusal", l.raw)
	}
	want := []string{"s:initialize", "s:notifications/initialized", "s:tools/call", "s:reply", "s:reply",
		"s:notifications/cancelled", "s:notifications/roots/list_changed", "s:subscriptions/listen"}
	if got := tr.list(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
