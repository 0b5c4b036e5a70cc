package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// decodeBatchBody decodes a JSON array of JSON-RPC messages.
func decodeBatchBody(t *testing.T, body []byte) []*jsonrpc.Message {
	t.Helper()
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		t.Fatalf("body %q is not a JSON array: %v", body, err)
	}
	out := make([]*jsonrpc.Message, 0, len(raws))
	for _, r := range raws {
		m, err := jsonrpc.Decode(r)
		if err != nil {
			t.Fatalf("batch member %s: %v", r, err)
		}
		out = append(out, m)
	}
	return out
}

// A batch body is accepted only on 2025-03-26 sessions, where each bad
// member gets its own error and each request its own response; other
// revisions answer 400 with a JSON-RPC error.
func TestPostBatchOnlyOn20250326(t *testing.T) {
	batch := `[
		{"jsonrpc":"2.0","id":1,"method":"ping"},
		{"jsonrpc":"1.0","id":2,"method":"ping"},
		42,
		{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"in a batch"}}},
		{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
		{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}
	]`
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			if v != mcp.Version20260728 {
				c.Initialize(v, nil)
			} else {
				c.Version = v
			}
			resp, err := c.PostRaw(context.Background(), n.url, []byte(batch), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v != mcp.Version20250326 {
				wantRPCError(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest)
				return
			}
			if resp.Status != http.StatusOK {
				t.Fatalf("got status %d, want 200 (body %q)", resp.Status, resp.Body)
			}
			msgs := decodeBatchBody(t, resp.Body)
			byID := map[string]*jsonrpc.Message{}
			nullErrors := 0
			for _, m := range msgs {
				if m.Kind() != jsonrpc.KindResponse {
					t.Fatalf("batch answer holds a %v", m.Kind())
				}
				if !m.ID.IsValid() {
					nullErrors++
					continue
				}
				byID[m.ID.String()] = m
			}
			if len(msgs) != 5 || nullErrors != 1 {
				t.Fatalf("got %d answers (%d with a null id), want 5 (1): %s", len(msgs), nullErrors, resp.Body)
			}
			if m := byID["1"]; m == nil || m.Error != nil {
				t.Errorf("ping: got %+v, want a result", m)
			}
			if m := byID["2"]; m == nil || m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
				t.Errorf("bad member: got %+v, want its own -32600", m)
			}
			if m := byID["3"]; m == nil || m.Error != nil || !strings.Contains(string(m.Result), "in a batch") {
				t.Errorf("echo: got %+v, want its result", m)
			}
			if m := byID["4"]; m == nil || m.Error == nil {
				t.Errorf("initialize in a batch: got %+v, want an error", m)
			}
			// Notifications only: 202, no body.
			resp, err = c.PostRaw(context.Background(), n.url, []byte(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusAccepted || len(resp.Body) != 0 {
				t.Fatalf("notification batch: got %d %q, want 202 without body", resp.Status, resp.Body)
			}
		})
	}
}

// The Accept header of a POST must allow application/json (every answer
// may be JSON) and text/event-stream (the answer may become a stream);
// when it excludes the stream, a request that needs one gets 406.
func TestPostAcceptHeader(t *testing.T) {
	const (
		ok   = http.StatusOK
		none = http.StatusNotAcceptable
	)
	cases := []struct {
		accept    string
		json, sse int // status for a JSON answer, for one that needs a stream
	}{
		{"application/json, text/event-stream", ok, ok},
		{"", ok, ok},
		{"*/*", ok, ok},
		{"application/*, text/*", ok, ok},
		{"text/event-stream, application/json;q=0.5", ok, ok},
		{"application/json", ok, none},
		{"application/json, text/event-stream;q=0", ok, none},
		{"text/event-stream", none, none},
		{"text/html", none, none},
	}
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			if v != mcp.Version20260728 {
				c.Initialize(v, nil)
			}
			call := func(params map[string]any, accept string) *mcptest.Response {
				mod := header("Accept", accept)
				if v == mcp.Version20260728 {
					return postModern(t, c, n.url, "tools/call", params, mod)
				}
				return post(t, c, n.url, "tools/call", params, mod)
			}
			for _, tc := range cases {
				resp := call(toolCall("echo", map[string]any{"text": "x"}, false), tc.accept)
				if tc.json != ok {
					wantRPCError(t, resp, tc.json, jsonrpc.CodeInvalidRequest)
				} else if resp.Status != ok || resp.SSE {
					t.Errorf("Accept %q, echo: got %d (SSE %v), want 200 JSON", tc.accept, resp.Status, resp.SSE)
				}
				resp = call(toolCall("progress", map[string]any{"steps": 2}, true), tc.accept)
				switch {
				case tc.sse != ok:
					wantRPCError(t, resp, tc.sse, jsonrpc.CodeInvalidRequest)
				case !resp.SSE || resp.Status != ok:
					t.Errorf("Accept %q, progress: got %d (SSE %v), want 200 SSE", tc.accept, resp.Status, resp.SSE)
				}
			}
		})
	}
}

// Notifications and responses are answered 202 without a body.
func TestPostNotificationsAndResponsesAccepted(t *testing.T) {
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			modern := v == mcp.Version20260728
			var mod func(*http.Request)
			if modern {
				mod = header("Mcp-Protocol-Version", v, "Mcp-Method", "notifications/cancelled")
			} else {
				c.Initialize(v, nil)
			}
			notif := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"test"}}`)
			if modern {
				notif = []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
			}
			resp, err := c.PostRaw(context.Background(), n.url, notif, mod, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusAccepted || len(resp.Body) != 0 {
				t.Fatalf("notification: got %d %q, want 202 without body", resp.Status, resp.Body)
			}
			reply := []byte(`{"jsonrpc":"2.0","id":"client-chosen-1","result":{}}`)
			resp, err = c.PostRaw(context.Background(), n.url, reply, mod, nil)
			if err != nil {
				t.Fatal(err)
			}
			if modern {
				// Clients do not send responses on 2026-07-28.
				wantRPCError(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest)
				return
			}
			if resp.Status != http.StatusAccepted || len(resp.Body) != 0 {
				t.Fatalf("response: got %d %q, want 202 without body", resp.Status, resp.Body)
			}
		})
	}
}

// A reply to a request minted by a process that no longer runs (here:
// one that never held a lease) cannot reach anyone: the client is told
// so with 410 and a node-lost error instead of a 202 that drops it.
func TestReplyToGoneNodeAnswersNodeLost(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	c.Initialize(mcp.Version20251125, nil)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"c.nobody.x1.1","result":{}}`,
		// The node id of a live node with another incarnation: a previous
		// process of the same node.
		`{"jsonrpc":"2.0","id":"c.` + n.h.NodeID() + `.previous.1","result":{}}`,
	} {
		resp, err := c.PostRaw(context.Background(), n.url, []byte(body), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantRPCError(t, resp, http.StatusGone, jsonrpc.CodeNodeLost)
	}
}

// A request is answered with JSON unless the handler sends something
// before its result; the first such message (progress, log, a request to
// the client) turns the answer into an event stream that ends with the
// final response.
func TestPostRequestJSONOrLazyStream(t *testing.T) {
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			modern := v == mcp.Version20260728
			if !modern {
				c.Initialize(v, nil)
			}
			call := func(params map[string]any, meta map[string]any) (*mcptest.Response, jsonrpc.ID) {
				if modern {
					params = modernParams(params, meta)
				} else if meta != nil {
					params["_meta"] = meta
				}
				b, id := encodeRequest(t, c, "tools/call", params)
				var mod func(*http.Request)
				if modern {
					mod = modernMod("tools/call", params, nil)
				}
				resp, err := c.PostRaw(context.Background(), n.url, b, mod, nil)
				if err != nil {
					t.Fatal(err)
				}
				return resp, id
			}
			// Nothing before the result: JSON.
			resp, id := call(toolCall("echo", map[string]any{"text": "plain"}, false), nil)
			if resp.SSE || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("echo: got Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
			}
			if f := resp.Final(); f == nil || f.ID != id || len(resp.Messages) != 1 {
				t.Fatalf("echo: got %d messages, want one response to %v", len(resp.Messages), id)
			}
			// Progress: an event stream with the notifications first and
			// the response to this request last.
			resp, id = call(toolCall("progress", map[string]any{"steps": 3}, false), map[string]any{"progressToken": "p"})
			if !resp.SSE || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("progress: got Content-Type %q, want text/event-stream", resp.Header.Get("Content-Type"))
			}
			if got := mcptest.ProgressValues(resp.Messages); len(got) != 3 || got[0] != 1 || got[2] != 3 {
				t.Fatalf("progress: got %v, want [1 2 3]", got)
			}
			last := resp.Messages[len(resp.Messages)-1]
			if last.Kind() != jsonrpc.KindResponse || last.ID != id || last.Error != nil {
				t.Fatalf("progress: the stream ends with %+v, want the result of %v", last, id)
			}
			for _, m := range resp.Messages[:len(resp.Messages)-1] {
				if m.Kind() != jsonrpc.KindNotification {
					t.Fatalf("progress: %v before the final response", m.Kind())
				}
			}
			// A log message alone also upgrades (2026-07-28 only with a
			// logLevel in _meta).
			var meta map[string]any
			if modern {
				meta = map[string]any{mcp.MetaLogLevel: "debug"}
			}
			resp, id = call(toolCall("progress", map[string]any{"steps": 1}, false), meta)
			if !resp.SSE || !hasMethod("notifications/message")(resp.Messages) || resp.Final() == nil || resp.Final().ID != id {
				t.Fatalf("log: got SSE %v with %d messages, want a stream with notifications/message and the response", resp.SSE, len(resp.Messages))
			}
		})
	}
}
