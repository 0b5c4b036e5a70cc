package mcp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Origin protects against DNS rebinding: a request whose Origin is not
// allowed gets 403 with a JSON-RPC error, on every method and revision;
// requests without Origin, loopback origins (with AllowLoopbackOrigins)
// and listed origins are served.
func TestOrigin(t *testing.T) {
	configs := []struct {
		name string
		opts mcp.HTTPOptions
		ok   []string
		bad  []string
	}{
		{
			name: "default",
			ok:   []string{""},
			bad:  []string{"http://evil.example", "http://localhost:3000", "http://127.0.0.1", "null"},
		},
		{
			name: "loopback",
			opts: mcp.HTTPOptions{AllowLoopbackOrigins: true},
			ok:   []string{"", "http://localhost:3000", "http://localhost", "https://127.0.0.1:8443", "http://127.0.0.2", "http://[::1]:9000"},
			bad:  []string{"http://localhost.evil.example", "http://127.0.0.1.evil.example", "http://10.0.0.1", "file://localhost", "null", "http://evil.example"},
		},
		{
			name: "listed",
			opts: mcp.HTTPOptions{AllowedOrigins: []string{"https://app.example"}},
			ok:   []string{"", "https://app.example"},
			bad:  []string{"http://app.example", "https://app.example:444", "https://app.example.evil", "http://localhost:3000"},
		},
		{
			name: "any",
			opts: mcp.HTTPOptions{AllowedOrigins: []string{"*"}},
			ok:   []string{"", "http://evil.example", "null"},
		},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: cfg.opts})
			checkGuard(t, n, "Origin", cfg.ok, cfg.bad, func(origin string) func(*http.Request) { return header("Origin", origin) })
		})
	}
}

// checkGuard checks a request guard of node n on every revision: the
// first request of a revision (initialize, or a 2026-07-28 request) is
// served with each ok value of the guarded header and refused with 403
// and a JSON-RPC invalid-request error with each bad one; on a session,
// GET, DELETE and POST with a bad value are refused too and the session
// is not ended. set returns the request change that sets a value.
func checkGuard(t *testing.T, n *node, what string, ok, bad []string, set func(string) func(*http.Request)) {
	t.Helper()
	for _, v := range mcp.SupportedVersions {
		modern := v == mcp.Version20260728
		open := func(value string) *mcptest.Response {
			c := mcptest.New(t, n.url)
			if modern {
				return postModern(t, c, n.url, "tools/list", map[string]any{}, set(value))
			}
			resp, err := c.PostRaw(context.Background(), n.url, initializeBody(v), set(value), nil)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		for _, value := range ok {
			if resp := open(value); resp.Status != http.StatusOK {
				t.Errorf("%s, %s %q: got %d, want 200 (body %q)", v, what, value, resp.Status, resp.Body)
			}
		}
		for _, value := range bad {
			t.Run(v+"/"+value, func(t *testing.T) {
				wantRPCError(t, open(value), http.StatusForbidden, jsonrpc.CodeInvalidRequest)
				if modern {
					return
				}
				c := session(t, n.url, v, nil)
				for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
					var body []byte
					if method == http.MethodPost {
						body = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
					}
					resp, err := c.Raw(context.Background(), method, n.url, body, set(value))
					if err != nil {
						t.Fatal(err)
					}
					wantRPCError(t, resp, http.StatusForbidden, jsonrpc.CodeInvalidRequest)
				}
				post(t, c, n.url, "ping", nil, nil).Result(t, nil)
			})
		}
	}
}
