package auth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// rpcError decodes a JSON-RPC error body.
func rpcError(t *testing.T, body []byte) (code int64, msg string) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != "null" {
		t.Fatalf("body %q is not a JSON-RPC error response (%v)", body, err)
	}
	return m.Error.Code, m.Error.Message
}

func TestMiddleware(t *testing.T) {
	p := startProvider(t)
	ctx := t.Context()
	res := &Resource{URI: testResource, AuthorizationServers: []string{p.Issuer}, Scopes: []string{"mcp:read"}}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	v, err := NewJWTVerifier(JWTOptions{Issuer: p.Issuer, Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	down, err := NewJWTVerifier(JWTOptions{Issuer: "http://127.0.0.1:1", Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	var seen *Principal
	var seenAuth string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, seenAuth = PrincipalFrom(r.Context()), r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNoContent)
	})
	log := zerolog.New(zerolog.NewTestWriter(t))
	good, err := p.ClientCredentials(ctx, "svc", "svc-secret", testResource, "mcp:read")
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := p.ClientCredentials(ctx, "svc", "svc-secret", testResource, "mcp:write")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := p.ClientCredentials(ctx, "svc", "svc-secret", otherService, "mcp:read")
	if err != nil {
		t.Fatal(err)
	}
	meta := `resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`
	tests := []struct {
		name       string
		verifier   TokenVerifier
		header     []string // Authorization values
		query      string
		wantStatus int
		wantCode   int64
		wantChall  []string // substrings of WWW-Authenticate
	}{
		{"valid token", v, []string{"Bearer " + good}, "", http.StatusNoContent, 0, nil},
		{"scheme in lower case", v, []string{"bearer " + good}, "", http.StatusNoContent, 0, nil},
		{"no token", v, nil, "", http.StatusUnauthorized, CodeUnauthorized, []string{`Bearer scope="mcp:read", ` + meta}},
		{"invalid token", v, []string{"Bearer abc.def.ghi"}, "", http.StatusUnauthorized, CodeUnauthorized, []string{`error="invalid_token"`, meta, `scope="mcp:read"`}},
		{"token for another resource", v, []string{"Bearer " + foreign}, "", http.StatusUnauthorized, CodeUnauthorized, []string{`error="invalid_token"`}},
		{"missing scope", v, []string{"Bearer " + narrow}, "", http.StatusForbidden, CodeForbidden, []string{`error="insufficient_scope"`, `scope="mcp:read"`, meta}},
		{"basic scheme", v, []string{"Basic dXNlcjpwYXNz"}, "", http.StatusBadRequest, CodeUnauthorized, []string{`error="invalid_request"`}},
		{"two headers", v, []string{"Bearer " + good, "Bearer " + good}, "", http.StatusBadRequest, CodeUnauthorized, []string{`error="invalid_request"`}},
		{"bad characters", v, []string{"Bearer a,b"}, "", http.StatusBadRequest, CodeUnauthorized, nil},
		{"token in the query", v, []string{"Bearer " + good}, "access_token=" + good, http.StatusBadRequest, CodeUnauthorized, []string{`error="invalid_request"`}},
		{"issuer unreachable", down, []string{"Bearer " + good}, "", http.StatusServiceUnavailable, -31000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, seenAuth = nil, ""
			req := httptest.NewRequest(http.MethodPost, "/mcp?"+tt.query, strings.NewReader(`{}`))
			for _, h := range tt.header {
				req.Header.Add("Authorization", h)
			}
			rec := httptest.NewRecorder()
			res.Middleware(tt.verifier, log)(next).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("got status %d, want %d (body %s)", rec.Code, tt.wantStatus, rec.Body)
			}
			chall := rec.Header().Get("WWW-Authenticate")
			for _, s := range tt.wantChall {
				if !strings.Contains(chall, s) {
					t.Errorf("WWW-Authenticate %q lacks %q", chall, s)
				}
			}
			if tt.wantStatus == http.StatusNoContent {
				if seen == nil || seen.Subject != "svc" || seenAuth != "" {
					t.Errorf("handler saw principal %+v and Authorization %q; want svc and no header", seen, seenAuth)
				}
				return
			}
			if seen != nil {
				t.Errorf("handler ran for a refused request")
			}
			if code, _ := rpcError(t, rec.Body.Bytes()); code != tt.wantCode {
				t.Errorf("got JSON-RPC code %d, want %d", code, tt.wantCode)
			}
			if strings.Contains(rec.Body.String(), good) || strings.Contains(chall, good) {
				t.Errorf("the token is echoed back")
			}
		})
	}
}

func TestInsufficientScopeNamesAllNeeded(t *testing.T) {
	res := &Resource{URI: testResource, AuthorizationServers: []string{"https://as.example"}, Scopes: []string{"mcp:read"}}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	res.InsufficientScope(rec, &Principal{Scopes: []string{"mcp:read"}}, "tools:admin", "mcp:read", "offline_access")
	if rec.Code != http.StatusForbidden {
		t.Fatalf("got %d, want 403", rec.Code)
	}
	want := `Bearer error="insufficient_scope", scope="mcp:read tools:admin", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp", error_description="the access token lacks a required scope"`
	if got := rec.Header().Get("WWW-Authenticate"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestMetadataHandler(t *testing.T) {
	res := &Resource{
		URI:                  "HTTPS://MCP.Example.TEST/mcp/",
		AuthorizationServers: []string{"https://as.example"},
		Scopes:               []string{"mcp:read"},
		ScopesSupported:      []string{"mcp:read", "mcp:write", "offline_access"},
		Name:                 "demo",
	}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := res.MetadataPaths(); !slices.Equal(got, []string{WellKnownPath, WellKnownPath + "/mcp"}) {
		t.Fatalf("got paths %v", got)
	}
	mux := http.NewServeMux()
	for _, p := range res.MetadataPaths() {
		mux.Handle(p, res.MetadataHandler())
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, path := range res.MetadataPaths() {
		t.Run(path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			want := map[string]any{
				"resource":                 "https://mcp.example.test/mcp",
				"authorization_servers":    []any{"https://as.example"},
				"scopes_supported":         []any{"mcp:read", "mcp:write"},
				"bearer_methods_supported": []any{"header"},
				"resource_name":            "demo",
			}
			gotJSON, _ := json.Marshal(m)
			wantJSON, _ := json.Marshal(want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
	resp, err := http.Post(srv.URL+WellKnownPath, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d, want 405", resp.StatusCode)
	}
}

func TestResourceValidate(t *testing.T) {
	tests := []struct {
		name string
		res  Resource
		ok   bool
	}{
		{"ok", Resource{URI: testResource, AuthorizationServers: []string{"https://as.example"}}, true},
		{"no authorization server", Resource{URI: testResource}, false},
		{"relative URI", Resource{URI: "/mcp", AuthorizationServers: []string{"https://as.example"}}, false},
		{"query in URI", Resource{URI: testResource + "?a=b", AuthorizationServers: []string{"https://as.example"}}, false},
		{"scope with a quote", Resource{URI: testResource, AuthorizationServers: []string{"https://as.example"}, Scopes: []string{`a"b`}}, false},
		{"scope with a space", Resource{URI: testResource, AuthorizationServers: []string{"https://as.example"}, Scopes: []string{"a b"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.res.Validate(); (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestCanonicalURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com", "https://mcp.example.com"},
		{"https://mcp.example.com/", "https://mcp.example.com"},
		{"HTTP://0//", "http://0"},
		{"https://mcp.example.com/mcp//", "https://mcp.example.com/mcp"},
		{"http://127.0.0.1:8080/MCP", "http://127.0.0.1:8080/MCP"},
		{"https://mcp.example.com/mcp#frag", ""},
		{"https://mcp.example.com/mcp?x=1", ""},
		{"https://user@mcp.example.com/mcp", ""},
		{"ftp://mcp.example.com/mcp", ""},
		{"mcp.example.com/mcp", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := CanonicalURI(tt.in)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("CanonicalURI(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
