package mcp_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// initializeBody is an initialize request for version.
func initializeBody(version string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
}

// The session id issued at initialize has at least 128 bits of entropy
// and only visible ASCII; every session gets its own; 2026-07-28
// requests never get one.
func TestSessionIDIssued(t *testing.T) {
	n := newNode(t, nil)
	seen := map[string]bool{}
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			for range 3 {
				c := session(t, n.url, v, nil)
				id := c.Session
				for _, r := range id {
					if r < 0x21 || r > 0x7e {
						t.Fatalf("session id %q has %q outside visible ASCII", id, r)
					}
				}
				// The ids are base64url; 128 bits take at least 22
				// characters.
				raw, err := base64.RawURLEncoding.DecodeString(id)
				if err != nil || len(raw)*8 < 128 {
					t.Fatalf("session id %q: %d bits (%v), want >= 128 bits of base64url", id, len(raw)*8, err)
				}
				if seen[id] {
					t.Fatalf("session id %q issued twice", id)
				}
				seen[id] = true
			}
		})
	}
	t.Run(mcp.Version20260728, func(t *testing.T) {
		c := mcptest.New(t, n.url)
		resp := postModern(t, c, n.url, "server/discover", map[string]any{}, nil)
		resp.Result(t, nil)
		if got := resp.Header.Get("Mcp-Session-Id"); got != "" {
			t.Fatalf("a 2026-07-28 response carries Mcp-Session-Id %q", got)
		}
	})
}

// Without Mcp-Session-Id a legacy request is refused with 400; with an
// unknown one, 404; both carry a JSON-RPC error.
func TestSessionRequiredAndUnknown(t *testing.T) {
	n := newNode(t, nil)
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			c := session(t, n.url, v, nil)
			ping := []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
			for _, tc := range []struct {
				name, sid string
				status    int
			}{
				{"missing", "", http.StatusBadRequest},
				{"unknown", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", http.StatusNotFound},
			} {
				for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
					var body []byte
					if method == http.MethodPost {
						body = ping
					}
					resp, err := c.Raw(context.Background(), method, n.url, body, header("Mcp-Session-Id", tc.sid))
					if err != nil {
						t.Fatal(err)
					}
					t.Run(tc.name+"/"+method, func(t *testing.T) {
						wantRPCError(t, resp, tc.status, jsonrpc.CodeInvalidRequest)
					})
				}
			}
			// The real session still works.
			post(t, c, n.url, "ping", nil, nil).Result(t, nil)
		})
	}
}

// DELETE ends a session: its GET stream closes, its running requests are
// cancelled, and later requests get 404; other sessions go on.
func TestSessionDelete(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := session(t, n.url, v, nil)
			other := session(t, n.url, v, nil)
			st, err := c.Get(n.url, "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			b, _ := encodeRequest(t, c, "tools/call", toolCall("block", nil, false))
			running := make(chan *mcptest.Response, 1)
			go func() {
				resp, _ := c.PostRaw(context.Background(), n.url, b, nil, nil)
				running <- resp
			}()
			n.probe.waitStarted(t)

			if got := c.Delete(n.url); got != http.StatusNoContent {
				t.Fatalf("DELETE: got %d, want 204", got)
			}
			select {
			case <-st.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the GET stream stayed open after DELETE")
			}
			n.probe.waitCancelled(t, 5*time.Second)
			<-running

			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				var body []byte
				if method == http.MethodPost {
					body = []byte(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
				}
				resp, err := c.Raw(context.Background(), method, n.url, body, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Run("after/"+method, func(t *testing.T) {
					wantRPCError(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest)
				})
			}
			post(t, other, n.url, "ping", nil, nil).Result(t, nil)
		})
	}
}

// Past MaxSessions, initialize gets 503 with a JSON-RPC error; ending a
// session makes room again. One caller gets at most half of MaxSessions
// (429 past it), so it takes two callers (client addresses behind a
// trusted proxy) to fill the cap.
func TestSessionMaxSessions(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxSessions: 4, TrustedProxies: []string{"127.0.0.1"}}})
			from := func(addr string) *mcptest.Client {
				c := mcptest.New(t, n.url)
				c.Header.Set("X-Forwarded-For", addr)
				return c
			}
			initialize := func(c *mcptest.Client) *mcptest.Response {
				resp, err := c.PostRaw(context.Background(), n.url, initializeBody(v), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			var a *mcptest.Client
			for i, addr := range []string{"203.0.113.1", "203.0.113.1", "203.0.113.2"} {
				c := from(addr)
				c.Initialize(v, nil)
				if i == 0 {
					a = c
				}
			}
			resp := initialize(from("203.0.113.1"))
			wantRPCError(t, resp, http.StatusTooManyRequests, jsonrpc.CodeUnavailable)
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatal("a refused initialize issued a session id")
			}
			from("203.0.113.2").Initialize(v, nil)
			resp = initialize(from("203.0.113.3"))
			wantRPCError(t, resp, http.StatusServiceUnavailable, jsonrpc.CodeUnavailable)
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatal("a refused initialize issued a session id")
			}
			if got := a.Delete(n.url); got != http.StatusNoContent {
				t.Fatalf("DELETE: got %d", got)
			}
			from("203.0.113.3").Initialize(v, nil)
		})
	}
}

// A session idle for longer than SessionTTL expires: its requests get
// 404.
func TestSessionIdleExpiry(t *testing.T) {
	const ttl = 800 * time.Millisecond
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{SessionTTL: ttl, SessionCacheTTL: time.Millisecond}})
	clients := map[string]*mcptest.Client{}
	for _, v := range mcp.LegacyVersions {
		c := session(t, n.url, v, nil)
		post(t, c, n.url, "ping", nil, nil).Result(t, nil)
		clients[v] = c
	}
	// Being idle is the scenario: nothing may touch the sessions now.
	time.Sleep(5 * ttl / 2)
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			wantRPCError(t, post(t, clients[v], n.url, "ping", nil, nil), http.StatusNotFound, jsonrpc.CodeInvalidRequest)
		})
	}
}

// A client listening on its GET stream is not idle: the stream slides
// the session's timeout, so the session outlives several TTLs.
func TestSessionKeptAliveByGetStream(t *testing.T) {
	const ttl = 400 * time.Millisecond
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{SessionTTL: ttl}})
	listening := session(t, n.url, mcp.Version20251125, nil)
	idle := session(t, n.url, mcp.Version20251125, nil)
	st, err := listening.Get(n.url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Being idle is the scenario: only the GET stream runs meanwhile.
	time.Sleep(3 * ttl)
	post(t, listening, n.url, "ping", nil, nil).Result(t, nil)
	wantRPCError(t, post(t, idle, n.url, "ping", nil, nil), http.StatusNotFound, jsonrpc.CodeInvalidRequest)
}
