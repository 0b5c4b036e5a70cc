package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestConfigNew(t *testing.T) {
	base := Config{Issuer: "https://as.example", Resource: testResource}
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // "jwt", "introspection", or a substring of the error
	}{
		{"jwt", func(*Config) {}, "jwt"},
		{"introspection", func(c *Config) { c.ClientID, c.ClientSecret = "rs", "s3cret-value" }, "introspection"},
		{"no issuer", func(c *Config) { c.Issuer = "" }, "without an issuer"},
		{"no resource", func(c *Config) { c.Resource = "" }, "resource URI"},
		{"id without secret", func(c *Config) { c.ClientID = "rs" }, "both"},
		{"jwks and introspection", func(c *Config) { c.ClientID, c.ClientSecret, c.JWKSURL = "rs", "s", "https://as.example/jwks" }, "not both"},
		{"introspection URL alone", func(c *Config) { c.IntrospectionURL = "https://as.example/i" }, "needs client credentials"},
		{"alg none", func(c *Config) { c.Algorithms = "ES256,none" }, "not allowed"},
		{"bad scope", func(c *Config) { c.Scopes = `a,"b` }, "scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.change(&c)
			res, v, err := c.New(nil)
			switch tt.want {
			case "jwt", "introspection":
				if err != nil {
					t.Fatal(err)
				}
				_, isJWT := v.(*JWTVerifier)
				if (tt.want == "jwt") != isJWT || res.URI != testResource {
					t.Fatalf("got verifier %T, resource %q", v, res.URI)
				}
				if c.ClientSecret != "" && strings.Contains(c.String(), c.ClientSecret) {
					t.Errorf("String() shows the secret: %s", c.String())
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error with %q", err, tt.want)
				}
			}
		})
	}
}

// ExampleResource_Middleware protects an MCP endpoint with tokens of an
// authorization server, and publishes the metadata clients discover it
// from.
func ExampleResource_Middleware() {
	cfg := Config{Issuer: "https://auth.example.com", Resource: "https://mcp.example.com/mcp", Scopes: "mcp:tools"}
	res, verifier, err := cfg.New(nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	for _, p := range res.MetadataPaths() {
		mux.Handle(p, res.MetadataHandler())
	}
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = PrincipalFrom(r.Context()) // the verified caller
	})
	mux.Handle("/mcp", res.Middleware(verifier, zerolog.Nop())(mcp))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/mcp", nil))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
	// Output: 401 Bearer scope="mcp:tools", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
}
