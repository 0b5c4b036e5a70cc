package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

var (
	samplingReply = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "4"}}
	elicitReply   = map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "email": "ada@example.com"}}
	rootsReply    = map[string]any{"roots": []any{map[string]any{"uri": "file:///src", "name": "src"}}}
)

// A handler's request to the client (sampling, elicitation, roots) goes
// on the request's POST stream before the final response; the client
// answers with a separate POST (202) and the handler gets the answer.
func TestServerRequestOnPostStream(t *testing.T) {
	cases := []struct {
		tool     string
		args     map[string]any
		method   string
		reply    any
		want     string
		versions []string
	}{
		{"sample", map[string]any{"prompt": "2+2?"}, "sampling/createMessage", samplingReply, "4", mcp.LegacyVersions},
		{"roots", nil, "roots/list", rootsReply, "file:///src", mcp.LegacyVersions},
		{"elicit", nil, "elicitation/create", elicitReply, "ada@example.com", []string{mcp.Version20250618, mcp.Version20251125}},
	}
	for _, tc := range cases {
		for _, v := range tc.versions {
			t.Run(tc.tool+"/"+v, func(t *testing.T) {
				n := newNode(t, nil)
				c := session(t, n.url, v, samplingCaps)
				var asked *jsonrpc.Message
				resp := c.Call("tools/call", toolCall(tc.tool, tc.args, false), func(m *jsonrpc.Message) *jsonrpc.Message {
					if m.Kind() != jsonrpc.KindRequest {
						return nil
					}
					asked = m
					r, _ := jsonrpc.Response(m.ID, tc.reply)
					return r // posted separately; Reply fails the test unless 202
				})
				if !resp.SSE {
					t.Fatal("the answer is not a stream")
				}
				if asked == nil || asked.Method != tc.method {
					t.Fatalf("the stream carried %+v, want a %s request", asked, tc.method)
				}
				if got := resultText(t, resp); !strings.Contains(got, tc.want) {
					t.Fatalf("got %q, want it to contain %q", got, tc.want)
				}
			})
		}
	}
}

// A reply for an id the session never issued (by a node that runs) is
// accepted (202) and ignored; the session's real exchange and other sessions are
// undisturbed.
func TestReplyForUnknownIDIgnored(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			a := session(t, n.url, v, samplingCaps)
			b := session(t, n.url, v, samplingCaps)
			bogus := func(c *mcptest.Client, id jsonrpc.ID) {
				t.Helper()
				r, _ := jsonrpc.Response(id, map[string]any{"role": "assistant", "model": "evil", "content": map[string]any{"type": "text", "text": "bogus"}})
				body, _ := jsonrpc.Encode(r)
				resp, err := c.PostRaw(context.Background(), n.url, body, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != http.StatusAccepted || len(resp.Body) != 0 {
					t.Fatalf("reply to %v: got %d %q, want 202 without body", id, resp.Status, resp.Body)
				}
			}
			resp := a.Call("tools/call", toolCall("sample", map[string]any{"prompt": "q"}, false), func(m *jsonrpc.Message) *jsonrpc.Message {
				if m.Kind() != jsonrpc.KindRequest {
					return nil
				}
				bogus(a, jsonrpc.IntID(4242))
				bogus(a, jsonrpc.StringID(m.ID.Str()+"0"))
				bogus(b, m.ID) // another session's pending id
				r, _ := jsonrpc.Response(m.ID, samplingReply)
				return r
			})
			if got := resultText(t, resp); got != "4" {
				t.Fatalf("got %q, want 4", got)
			}
			post(t, b, n.url, "ping", nil, nil).Result(t, nil)
		})
	}
}

// A reply POSTed on session B with the id of a request sent to session A
// never reaches A's handler: A's call still waits and gets A's own reply.
func TestReplyFromOtherSessionNeverReachesWaiter(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			a := session(t, n.url, v, samplingCaps)
			b := session(t, n.url, v, samplingCaps)
			resp := a.Call("tools/call", toolCall("sample", map[string]any{"prompt": "q"}, false), func(m *jsonrpc.Message) *jsonrpc.Message {
				if m.Kind() != jsonrpc.KindRequest {
					return nil
				}
				stolen, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "b", "content": map[string]any{"type": "text", "text": "from B"}})
				body, _ := jsonrpc.Encode(stolen)
				r, err := b.PostRaw(context.Background(), n.url, body, nil, nil)
				if err != nil {
					t.Error(err)
				} else if r.Status >= 500 {
					t.Errorf("B's reply: got %d", r.Status)
				}
				own, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "a", "content": map[string]any{"type": "text", "text": "from A"}})
				return own
			})
			if got := resultText(t, resp); got != "from A" {
				t.Fatalf("got %q, want A's own reply", got)
			}
		})
	}
}
