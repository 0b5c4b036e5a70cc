package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// subscriptionID returns the io.modelcontextprotocol/subscriptionId of a
// params or result _meta.
func subscriptionID(t *testing.T, raw json.RawMessage) jsonrpc.ID {
	t.Helper()
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &p)
	var id jsonrpc.ID
	if b, ok := p.Meta[mcp.MetaSubscriptionID]; !ok || id.UnmarshalJSON(b) != nil {
		t.Fatalf("%s has no %s", raw, mcp.MetaSubscriptionID)
	}
	return id
}

// subscriptions/listen: the acknowledgement comes first and names the
// subscription; only the notification types asked for follow, each
// tagged with the subscription id; request-scoped progress and log
// messages never go on it; a graceful end (Close or Drain) sends the
// listen result before the stream closes.
func TestListen(t *testing.T) {
	for _, end := range []string{"Close", "Drain"} {
		t.Run(end, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			type listener struct {
				id     jsonrpc.ID
				filter map[string]any
				st     *mcptest.Stream
				want   []string // methods after the acknowledgement
			}
			ls := []*listener{
				{id: jsonrpc.StringID("L1"), filter: map[string]any{"toolsListChanged": true, "promptsListChanged": true},
					want: []string{"notifications/tools/list_changed"}},
				{id: jsonrpc.IntID(7), filter: map[string]any{"resourceSubscriptions": []any{"demo://counter"}},
					want: []string{"notifications/resources/updated", "notifications/resources/updated"}},
			}
			for _, l := range ls {
				l.st = openModern(t, c, n.url, "subscriptions/listen", l.id, map[string]any{"notifications": l.filter}, nil)
				if !l.st.WaitFor(5*time.Second, func(ms []*jsonrpc.Message) bool { return len(ms) > 0 }) {
					t.Fatalf("listen %v: no acknowledgement", l.id)
				}
				ack := l.st.Messages()[0]
				if ack.Method != "notifications/subscriptions/acknowledged" {
					t.Fatalf("listen %v: first message %q, want the acknowledgement", l.id, ack.Method)
				}
				if got := subscriptionID(t, ack.Params); got != l.id {
					t.Fatalf("acknowledgement names subscription %v, want %v", got, l.id)
				}
				var p struct {
					Notifications map[string]any `json:"notifications"`
				}
				_ = json.Unmarshal(ack.Params, &p)
				if !reflect.DeepEqual(p.Notifications, l.filter) {
					t.Fatalf("acknowledged %v, want %v", p.Notifications, l.filter)
				}
			}

			// Progress and log messages of a request stay on its own stream.
			resp := postModern(t, c, n.url, "tools/call", modernParams(toolCall("progress", map[string]any{"steps": 2}, true), map[string]any{mcp.MetaLogLevel: "debug"}), nil)
			if !hasMethod("notifications/progress")(resp.Messages) || !hasMethod("notifications/message")(resp.Messages) {
				t.Fatal("the request's own stream lacks its progress and log messages")
			}
			// Each change is awaited before the next, so by the time a
			// listener sees a later change, an earlier wrong delivery
			// would have arrived (one bus, delivered in order).
			call := func(tool string) {
				t.Helper()
				resultText(t, postModern(t, c, n.url, "tools/call", toolCall(tool, nil, false), nil))
			}
			call("bump_counter")
			if !ls[1].st.WaitFor(5*time.Second, hasMethod("notifications/resources/updated")) {
				t.Fatal("resources/updated missing")
			}
			call("toggle_extra_tool")
			if !ls[0].st.WaitFor(5*time.Second, hasMethod("notifications/tools/list_changed")) {
				t.Fatal("tools/list_changed missing")
			}
			call("bump_counter")
			if !ls[1].st.WaitFor(5*time.Second, countAtLeast("notifications/resources/updated", 2)) {
				t.Fatal("second resources/updated missing")
			}
			for _, l := range ls {
				ms := l.st.Messages()[1:]
				var got []string
				for _, m := range ms {
					got = append(got, m.Method)
					if m.Kind() != jsonrpc.KindNotification {
						t.Fatalf("listen %v: a %v before the end", l.id, m.Kind())
					}
					if sid := subscriptionID(t, m.Params); sid != l.id {
						t.Fatalf("listen %v: %s tagged %v", l.id, m.Method, sid)
					}
				}
				if !reflect.DeepEqual(got, l.want) {
					t.Fatalf("listen %v: got %v, want %v", l.id, got, l.want)
				}
			}

			if end == "Close" {
				n.h.Close()
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				n.h.Drain(ctx)
				cancel()
			}
			for _, l := range ls {
				select {
				case <-l.st.Done():
				case <-time.After(5 * time.Second):
					t.Fatalf("listen %v: still open after %s", l.id, end)
				}
				ms := l.st.Messages()
				last := ms[len(ms)-1]
				if last.Kind() != jsonrpc.KindResponse || last.ID != l.id || last.Error != nil {
					t.Fatalf("listen %v: ends with %+v, want its result", l.id, last)
				}
				var res struct {
					ResultType string `json:"resultType"`
				}
				_ = json.Unmarshal(last.Result, &res)
				if res.ResultType != "complete" || subscriptionID(t, last.Result) != l.id {
					t.Fatalf("listen %v: result %s", l.id, last.Result)
				}
			}
		})
	}
}

// A draining node refuses new listen streams with 503 and a JSON-RPC
// error, so the client opens them on another node.
func TestListenWhileDraining(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	n.h.Drain(context.Background())
	resp := postModern(t, c, n.url, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	wantRPCError(t, resp, http.StatusServiceUnavailable, jsonrpc.CodeDraining)
}
