package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// sentinel pushes a notifications/test onto c's GET stream and waits for
// it: everything appended to the stream before it has arrived by then.
func sentinel(t *testing.T, n *node, c *mcptest.Client, st *mcptest.Stream) {
	t.Helper()
	want := st.Count("notifications/test") + 1
	if err := n.h.NotifySession(context.Background(), c.Session, "notifications/test", nil); err != nil {
		t.Fatal(err)
	}
	if !st.WaitFor(5*time.Second, countAtLeast("notifications/test", want)) {
		t.Fatal("sentinel not received")
	}
}

// A tools/list_changed (the demo's toggle_extra_tool) reaches the GET
// stream of every session exactly once per change.
func TestPushListChangedEverySessionOnce(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			clients := make([]*mcptest.Client, 3)
			streams := make([]*mcptest.Stream, 3)
			for i := range clients {
				clients[i] = session(t, n.url, v, nil)
				streams[i] = getStream(t, clients[i], n.url, "")
			}
			// A change made while the previous one's fan-out still waits
			// for its turn is covered by it (one list_changed for both,
			// sent after both): each change waits for its notification.
			for change := 1; change <= 2; change++ {
				resultText(t, post(t, clients[0], n.url, "tools/call", toolCall("toggle_extra_tool", nil, false), nil))
				for i, st := range streams {
					if !st.WaitFor(5*time.Second, countAtLeast("notifications/tools/list_changed", change)) {
						t.Fatalf("session %d: got %d list_changed, want %d", i, st.Count("notifications/tools/list_changed"), change)
					}
				}
			}
			for i, st := range streams {
				sentinel(t, n, clients[i], st)
				if got := st.Count("notifications/tools/list_changed"); got != 2 {
					t.Fatalf("session %d: got %d list_changed, want exactly 2", i, got)
				}
			}
		})
	}
}

// resources/updated reaches only the sessions subscribed to the resource,
// and stops after resources/unsubscribe.
func TestPushResourceUpdatedOnlySubscribers(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			sub := session(t, n.url, v, nil)
			other := session(t, n.url, v, nil)
			subSt := getStream(t, sub, n.url, "")
			otherSt := getStream(t, other, n.url, "")
			post(t, sub, n.url, "resources/subscribe", map[string]any{"uri": "demo://counter"}, nil).Result(t, nil)
			resultText(t, post(t, other, n.url, "tools/call", toolCall("bump_counter", nil, false), nil))
			if !subSt.WaitFor(5*time.Second, hasMethod("notifications/resources/updated")) {
				t.Fatal("the subscriber got no resources/updated")
			}
			var p struct {
				URI string `json:"uri"`
			}
			for _, m := range subSt.Messages() {
				if m.Method == "notifications/resources/updated" {
					_ = json.Unmarshal(m.Params, &p)
				}
			}
			if p.URI != "demo://counter" {
				t.Fatalf("updated uri %q, want demo://counter", p.URI)
			}
			sentinel(t, n, other, otherSt)
			if otherSt.Count("notifications/resources/updated") != 0 {
				t.Fatal("a session that did not subscribe got resources/updated")
			}

			post(t, sub, n.url, "resources/unsubscribe", map[string]any{"uri": "demo://counter"}, nil).Result(t, nil)
			resultText(t, post(t, sub, n.url, "tools/call", toolCall("bump_counter", nil, false), nil))
			// The toggle is a later change that reaches everyone.
			resultText(t, post(t, sub, n.url, "tools/call", toolCall("toggle_extra_tool", nil, false), nil))
			if !subSt.WaitFor(5*time.Second, hasMethod("notifications/tools/list_changed")) {
				t.Fatal("list_changed missing")
			}
			sentinel(t, n, sub, subSt)
			if got := subSt.Count("notifications/resources/updated"); got != 1 {
				t.Fatalf("got %d resources/updated, want 1 (none after unsubscribe)", got)
			}
		})
	}
}

// RequestOnSession and Ping deliver a request on the session's GET
// stream and return the reply the client POSTs separately.
func TestRequestOnSession(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := session(t, n.url, v, map[string]any{"roots": map[string]any{}})
			st := getStream(t, c, n.url, "")
			answer := func(method string, result any) {
				t.Helper()
				var req *jsonrpc.Message
				st.WaitFor(5*time.Second, func(ms []*jsonrpc.Message) bool {
					for _, m := range ms {
						if m.Method == method && m.Kind() == jsonrpc.KindRequest {
							req = m
						}
					}
					return req != nil
				})
				if req == nil {
					t.Fatalf("no %s request on the GET stream", method)
				}
				reply, _ := jsonrpc.Response(req.ID, result)
				c.Reply(context.Background(), reply) // a separate POST; fails the test unless 202
			}

			type result struct {
				raw json.RawMessage
				err error
			}
			got := make(chan result, 1)
			go func() {
				raw, err := n.h.RequestOnSession(context.Background(), c.Session, "roots/list", nil)
				got <- result{raw, err}
			}()
			answer("roots/list", map[string]any{"roots": []any{map[string]any{"uri": "file:///work", "name": "work"}}})
			r := <-got
			var roots mcp.ListRootsResult
			if r.err != nil || json.Unmarshal(r.raw, &roots) != nil || len(roots.Roots) != 1 || roots.Roots[0].URI != "file:///work" {
				t.Fatalf("RequestOnSession: got %s, %v", r.raw, r.err)
			}

			pinged := make(chan error, 1)
			go func() { pinged <- n.h.Ping(context.Background(), c.Session) }()
			answer("ping", map[string]any{})
			if err := <-pinged; err != nil {
				t.Fatalf("Ping: %v", err)
			}
		})
	}
}

// Without an open GET stream, RequestOnSession fails at once.
func TestRequestOnSessionWithoutStream(t *testing.T) {
	n := newNode(t, nil)
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			c := session(t, n.url, v, nil)
			for _, sid := range []string{c.Session, "no-such-session"} {
				start := time.Now()
				err := n.h.Ping(context.Background(), sid)
				if !errors.Is(err, mcp.ErrNoChannel) {
					t.Fatalf("Ping without a GET stream: got %v, want ErrNoChannel", err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("Ping took %v to fail", d)
				}
			}
			// After the stream closed, too.
			st := getStream(t, c, n.url, "")
			st.Close()
			mcptest.Eventually(t, 5*time.Second, "the GET stream's claim released", func() bool {
				return errors.Is(n.h.Ping(context.Background(), c.Session), mcp.ErrNoChannel)
			})
		})
	}
}

// A request delivered on a GET stream that then disconnects fails
// promptly, well before its timeout.
func TestRequestOnSessionStreamDrops(t *testing.T) {
	const timeout = 30 * time.Second
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, &nodeOptions{Server: mcp.ServerOptions{RequestTimeout: timeout}})
			c := session(t, n.url, v, nil)
			st, err := c.Get(n.url, "")
			if err != nil {
				t.Fatal(err)
			}
			failed := make(chan error, 1)
			go func() {
				_, err := n.h.RequestOnSession(context.Background(), c.Session, "roots/list", nil)
				failed <- err
			}()
			if !st.WaitFor(5*time.Second, hasMethod("roots/list")) {
				t.Fatal("the request did not reach the GET stream")
			}
			start := time.Now()
			st.Close()
			select {
			case err := <-failed:
				if !errors.Is(err, jsonrpc.ErrConnectionClosed) {
					t.Fatalf("got %v, want a connection-closed error", err)
				}
			case <-time.After(timeout / 3):
				t.Fatalf("still waiting %v after the stream closed", time.Since(start))
			}
		})
	}
}

// Ending a session fails its pending GET-stream request at once.
func TestRequestOnSessionEnded(t *testing.T) {
	n := newNode(t, &nodeOptions{Server: mcp.ServerOptions{RequestTimeout: 30 * time.Second}})
	c := session(t, n.url, mcp.Version20251125, nil)
	st := getStream(t, c, n.url, "")
	failed := make(chan error, 1)
	go func() { failed <- n.h.Ping(context.Background(), c.Session) }()
	if !st.WaitFor(5*time.Second, hasMethod("ping")) {
		t.Fatal("the ping did not reach the GET stream")
	}
	if got := c.Delete(n.url); got != http.StatusNoContent {
		t.Fatalf("DELETE: %d", got)
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("Ping succeeded on an ended session")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ping still waiting after the session ended")
	}
}
