package mcp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/mcp"
)

func withHost(host string) func(*http.Request) {
	return func(r *http.Request) { r.Host = host }
}

// DNS-rebinding protection on the Host header: a node reached on a
// loopback address answers 403 with a JSON-RPC error to a request naming
// another host, on every method, and serves loopback names on any port;
// AllowedHosts adds names ("*" any) and then applies on every address.
func TestHostRebinding(t *testing.T) {
	loopback := []string{"localhost", "LOCALHOST:3000", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:9000"}
	configs := []struct {
		name    string
		allowed []string
		ok      []string
		bad     []string
	}{
		{
			name: "default",
			ok:   loopback,
			bad:  []string{"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.1:8080", "[::2]:80"},
		},
		{
			name:    "listed",
			allowed: []string{"mcp.example", "api.example:8443"},
			ok:      append([]string{"mcp.example", "MCP.example:443", "api.example:8443"}, loopback...),
			bad:     []string{"evil.example", "api.example:8444", "api.example", "mcp.example.evil"},
		},
		{
			name:    "any",
			allowed: []string{"*"},
			ok:      append([]string{"evil.example", "evil.example:8080"}, loopback...),
		},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{AllowedHosts: cfg.allowed}})
			checkGuard(t, n, "Host", cfg.ok, cfg.bad, withHost)
		})
	}
}

// Without AllowedHosts, a request that did not arrive on a loopback
// address (a node on 0.0.0.0 reached through its public address) may
// name any host; with AllowedHosts it may not.
func TestHostCheckedOnlyOnLoopbackByDefault(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		want    int
	}{{nil, http.StatusOK}, {[]string{"mcp.example"}, http.StatusForbidden}} {
		srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
		h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{AllowedHosts: tc.allowed})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "http://public.example/mcp", strings.NewReader(string(initializeBody(mcp.Version20251125))))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		h.Close()
		if w.Code != tc.want {
			t.Errorf("AllowedHosts %v, Host public.example on 10.1.2.3: got %d, want %d (body %q)", tc.allowed, w.Code, tc.want, w.Body)
		}
	}
}
