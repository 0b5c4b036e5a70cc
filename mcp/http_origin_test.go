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
			for _, v := range mcp.SupportedVersions {
				modern := v == mcp.Version20260728
				// open is the first request of the revision: initialize,
				// or a 2026-07-28 request.
				open := func(origin string) *mcptest.Response {
					c := mcptest.New(t, n.url)
					mod := header("Origin", origin)
					if modern {
						return postModern(t, c, n.url, "tools/list", map[string]any{}, mod)
					}
					resp, err := c.PostRaw(context.Background(), n.url, initializeBody(v), mod, nil)
					if err != nil {
						t.Fatal(err)
					}
					return resp
				}
				for _, origin := range cfg.ok {
					if resp := open(origin); resp.Status != http.StatusOK {
						t.Errorf("%s, Origin %q: got %d, want 200 (body %q)", v, origin, resp.Status, resp.Body)
					}
				}
				for _, origin := range cfg.bad {
					t.Run(v+"/"+origin, func(t *testing.T) {
						e := wantRPCError(t, open(origin), http.StatusForbidden, 0)
						if e.Code == 0 {
							t.Fatal("error without a code")
						}
						if modern {
							return
						}
						// GET, DELETE and POST on an existing session are
						// refused too, and the session is not ended.
						c := session(t, n.url, v, nil)
						for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
							var body []byte
							if method == http.MethodPost {
								body = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
							}
							resp, err := c.Raw(context.Background(), method, n.url, body, header("Origin", origin))
							if err != nil {
								t.Fatal(err)
							}
							if f := wantRPCError(t, resp, http.StatusForbidden, 0); f.Code != jsonrpc.CodeInvalidRequest {
								t.Fatalf("%s: got code %d", method, f.Code)
							}
						}
						post(t, c, n.url, "ping", nil, nil).Result(t, nil)
					})
				}
			}
		})
	}
}
