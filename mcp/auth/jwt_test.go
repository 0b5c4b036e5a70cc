package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
)

const (
	testResource = "https://mcp.example.test/mcp"
	otherService = "https://other.example.test/api"
	redirectURI  = "http://127.0.0.1:1/callback"
)

// startProvider runs the real OpenID provider with the clients the
// tests use.
func startProvider(t *testing.T) *authtest.Provider {
	t.Helper()
	return authtest.Start(t, authtest.Options{
		DefaultResource: testResource,
		Clients: []*authtest.Client{
			{ID: "svc", Secret: "svc-secret", Scopes: []string{"mcp:read", "mcp:write"}},
			{ID: "app", Redirects: []string{redirectURI}, Scopes: []string{"mcp:read", "mcp:write"}},
			{ID: "opaque", Secret: "opaque-secret", Scopes: []string{"mcp:read"}, Opaque: true},
			{ID: "rs", Secret: "rs-secret"},
		},
	})
}

func TestJWTVerifierRealTokens(t *testing.T) {
	p := startProvider(t)
	v, err := NewJWTVerifier(JWTOptions{Issuer: p.Issuer, Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tests := []struct {
		name       string
		token      func() (string, error)
		wantSub    string
		wantScopes []string
		wantErr    error
	}{
		{
			name:       "client credentials with resource",
			token:      func() (string, error) { return p.ClientCredentials(ctx, "svc", "svc-secret", testResource, "mcp:read") },
			wantSub:    "svc",
			wantScopes: []string{"mcp:read"},
		},
		{
			name: "client credentials, default resource",
			token: func() (string, error) {
				return p.ClientCredentials(ctx, "svc", "svc-secret", "", "mcp:read", "mcp:write")
			},
			wantSub:    "svc",
			wantScopes: []string{"mcp:read", "mcp:write"},
		},
		{
			name: "authorization code with PKCE",
			token: func() (string, error) {
				return p.AuthorizationCode(ctx, "app", redirectURI, testResource, "bob", "mcp:write")
			},
			wantSub:    "bob",
			wantScopes: []string{"mcp:write"},
		},
		{
			name: "resource named with upper-case scheme and host",
			token: func() (string, error) {
				return p.ClientCredentials(ctx, "svc", "svc-secret", "HTTPS://MCP.Example.TEST/mcp", "mcp:read")
			},
			wantSub:    "svc",
			wantScopes: []string{"mcp:read"},
		},
		{
			name:    "token for another resource",
			token:   func() (string, error) { return p.ClientCredentials(ctx, "svc", "svc-secret", otherService, "mcp:read") },
			wantErr: ErrInvalidToken,
		},
		{
			name: "authorization code for another resource",
			token: func() (string, error) {
				return p.AuthorizationCode(ctx, "app", redirectURI, otherService, "bob", "mcp:read")
			},
			wantErr: ErrInvalidToken,
		},
		{
			name: "opaque token is not a JWT",
			token: func() (string, error) {
				return p.ClientCredentials(ctx, "opaque", "opaque-secret", testResource, "mcp:read")
			},
			wantErr: ErrInvalidToken,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.token()
			if err != nil {
				t.Fatalf("getting a token: %v", err)
			}
			got, err := v.Verify(ctx, tok)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify: got err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.Subject != tt.wantSub || got.Issuer != p.Issuer || !slices.Equal(got.Scopes, tt.wantScopes) {
				t.Errorf("got subject %q issuer %q scopes %v, want %q %q %v", got.Subject, got.Issuer, got.Scopes, tt.wantSub, p.Issuer, tt.wantScopes)
			}
			if got.Expiry.Before(time.Now()) || got.Claims["jti"] == nil {
				t.Errorf("got expiry %v claims %v, want a future expiry and all claims", got.Expiry, got.Claims)
			}
		})
	}
}

// TestJWTVerifierKeyRotation: the provider rotates its signing key; a
// token under the new key id makes the verifier fetch the JWKS once more,
// but not more often than MinRefresh.
func TestJWTVerifierKeyRotation(t *testing.T) {
	p := startProvider(t)
	clk := newClock()
	v, err := NewJWTVerifier(JWTOptions{Issuer: p.Issuer, Audience: testResource, MinRefresh: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	get := func() string {
		tok, err := p.ClientCredentials(ctx, "svc", "svc-secret", testResource, "mcp:read")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := v.Verify(ctx, get()); err != nil {
		t.Fatalf("first token: %v", err)
	}
	p.RotateKey(t)
	rotated := get()
	if _, err := v.Verify(ctx, rotated); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("new key id within MinRefresh of the last fetch: got %v, want ErrInvalidToken", err)
	}
	if n := v.keys.fetches; n != 1 {
		t.Fatalf("got %d JWKS fetches, want 1 (refresh rate-limited)", n)
	}
	clk.Advance(time.Minute)
	got, err := v.Verify(ctx, rotated)
	if err != nil {
		t.Fatalf("new key id after MinRefresh: %v", err)
	}
	if got.Subject != "svc" {
		t.Errorf("got subject %q, want svc", got.Subject)
	}
	for range 3 {
		if _, err := v.Verify(ctx, get()); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.keys.fetches; n != 2 {
		t.Errorf("got %d JWKS fetches, want 2 (known keys need no fetch)", n)
	}
}

// noneToken builds an unsigned token ("alg":"none").
func noneToken(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

func TestJWTVerifierRefuses(t *testing.T) {
	is := newIssuer(t)
	clk := newClock()
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource, ClockSkew: 30 * time.Second, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	k1 := is.key("k1")
	unpublished := is.addKey(t, "k9", false)
	spoil := func(f func(c map[string]any)) map[string]any {
		c := is.claims(testResource, now)
		f(c)
		return c
	}
	hs256, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	hsToken, _ := jwt.Signed(hs256).Claims(is.claims(testResource, now)).Serialize()

	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", sign(t, k1, "k1", is.claims(testResource, now)), true},
		{"valid without kid", sign(t, k1, "", is.claims(testResource, now)), true},
		{"audience list naming the resource", sign(t, k1, "k1", spoil(func(c map[string]any) { c["aud"] = []string{otherService, testResource} })), true},
		{"expired within skew", sign(t, k1, "k1", spoil(func(c map[string]any) { c["exp"] = now.Add(-20 * time.Second).Unix() })), true},
		{"wrong audience", sign(t, k1, "k1", spoil(func(c map[string]any) { c["aud"] = otherService })), false},
		{"resource prefix as audience", sign(t, k1, "k1", spoil(func(c map[string]any) { c["aud"] = "https://mcp.example.test" })), false},
		{"no audience", sign(t, k1, "k1", spoil(func(c map[string]any) { delete(c, "aud") })), false},
		{"expired beyond skew", sign(t, k1, "k1", spoil(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), false},
		{"no expiry", sign(t, k1, "k1", spoil(func(c map[string]any) { delete(c, "exp") })), false},
		{"not valid yet", sign(t, k1, "k1", spoil(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })), false},
		{"issued in the future", sign(t, k1, "k1", spoil(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), false},
		{"wrong issuer", sign(t, k1, "k1", spoil(func(c map[string]any) { c["iss"] = "https://evil.example.test" })), false},
		{"no subject", sign(t, k1, "k1", spoil(func(c map[string]any) { delete(c, "sub") })), false},
		{"alg none", noneToken(`{"iss":"` + is.url + `","sub":"x","aud":"` + testResource + `","exp":9999999999}`), false},
		{"HS256 (not on the allow-list)", hsToken, false},
		{"unknown key id", sign(t, unpublished, "k9", is.claims(testResource, now)), false},
		{"known key id, other key", sign(t, unpublished, "k1", is.claims(testResource, now)), false},
		{"tampered payload", tamper(sign(t, k1, "k1", is.claims(testResource, now))), false},
		{"garbage", "not-a-jwt", false},
		{"empty", "", false},
		{"too long", strings.Repeat("a", DefaultMaxTokenBytes+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(t.Context(), tt.token)
			if tt.ok {
				if err != nil || p.Subject != "carol" || !p.HasScopes("mcp:read", "mcp:write") {
					t.Fatalf("got %+v, %v; want carol with mcp:read mcp:write", p, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) || p != nil {
				t.Fatalf("got %+v, %v; want ErrInvalidToken", p, err)
			}
		})
	}
	// All the refusals above cost at most one refresh for the unknown
	// key id: the first fetch plus one.
	if n := is.fetches.Load(); n > 2 {
		t.Errorf("got %d JWKS fetches, want at most 2", n)
	}
}

// tamper changes one claim of a signed token without re-signing it.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	b = []byte(strings.Replace(string(b), `"carol"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// TestJWTVerifierUnknownKidFlood: many tokens with made-up key ids cost
// one JWKS fetch per MinRefresh, not one each.
func TestJWTVerifierUnknownKidFlood(t *testing.T) {
	is := newIssuer(t)
	clk := newClock()
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	forged := is.addKey(t, "x", false)
	for i := range 50 {
		tok := sign(t, forged, "forged-"+string(rune('a'+i%26)), is.claims(testResource, clk.Now()))
		if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("forged kid: got %v, want ErrInvalidToken", err)
		}
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("got %d JWKS fetches for 50 unknown key ids, want 1", n)
	}
	// A key published later is found after MinRefresh.
	k2 := is.addKey(t, "k2", true)
	tok := sign(t, k2, "k2", is.claims(testResource, clk.Now()))
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("new key within MinRefresh: got %v, want ErrInvalidToken", err)
	}
	clk.Advance(DefaultMinRefresh)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("new key after MinRefresh: %v", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("got %d JWKS fetches, want 2", n)
	}
}

func TestJWTVerifierUnreachableIssuer(t *testing.T) {
	v, err := NewJWTVerifier(JWTOptions{Issuer: "http://127.0.0.1:1", Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	is := newIssuer(t)
	tok := sign(t, is.key("k1"), "k1", is.claims(testResource, time.Now()))
	_, err = v.Verify(t.Context(), tok)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("got %v, want ErrUnavailable and not ErrInvalidToken", err)
	}
}

func TestNewJWTVerifierOptions(t *testing.T) {
	tests := []struct {
		name string
		opts JWTOptions
		ok   bool
	}{
		{"minimal", JWTOptions{Issuer: "https://as.example", Audience: testResource}, true},
		{"no issuer", JWTOptions{Audience: testResource}, false},
		{"relative issuer", JWTOptions{Issuer: "as.example", Audience: testResource}, false},
		{"no audience", JWTOptions{Issuer: "https://as.example"}, false},
		{"audience with fragment", JWTOptions{Issuer: "https://as.example", Audience: testResource + "#x"}, false},
		{"alg none", JWTOptions{Issuer: "https://as.example", Audience: testResource, Algorithms: []string{"none"}}, false},
		{"alg HS256", JWTOptions{Issuer: "https://as.example", Audience: testResource, Algorithms: []string{"HS256"}}, false},
		{"alg ES256", JWTOptions{Issuer: "https://as.example", Audience: testResource, Algorithms: []string{"ES256"}}, true},
		{"skew too large", JWTOptions{Issuer: "https://as.example", Audience: testResource, ClockSkew: time.Hour}, false},
		{"negative skew", JWTOptions{Issuer: "https://as.example", Audience: testResource, ClockSkew: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewJWTVerifier(tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("got err %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestJWTVerifierAlgorithmAllowList: a verifier restricted to RS256
// refuses a valid ES256 token from its own issuer.
func TestJWTVerifierAlgorithmAllowList(t *testing.T) {
	is := newIssuer(t)
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource, Algorithms: []string{"RS256"}})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, is.key("k1"), "k1", is.claims(testResource, time.Now()))
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("got %v, want ErrInvalidToken", err)
	}
}

// TestJWTVerifierConcurrent: verifiers are shared by every request of a
// node; concurrent first use does one discovery and one JWKS fetch.
func TestJWTVerifierConcurrent(t *testing.T) {
	is := newIssuer(t)
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	good := sign(t, is.key("k1"), "k1", is.claims(testResource, time.Now()))
	forged := sign(t, is.addKey(t, "zz", false), "zz", is.claims(testResource, time.Now()))
	var wg sync.WaitGroup
	errs := make(chan error, 16*20)
	for g := range 16 {
		wg.Go(func() {
			for range 20 {
				tok, wantOK := good, true
				if g%2 == 1 {
					tok, wantOK = forged, false
				}
				_, err := v.Verify(t.Context(), tok)
				if (err == nil) != wantOK {
					errs <- fmt.Errorf("goroutine %d: got %v, want ok=%v", g, err, wantOK)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("got %d JWKS fetches, want 1", n)
	}
}

// A request that goes away while its token triggers the first key fetch
// does not cancel the fetch: the keys are loaded for the requests that
// follow at once, instead of every token failing as unavailable until
// MinRefresh has passed.
func TestJWTVerifierFetchOutlivesCancelledRequest(t *testing.T) {
	is := newIssuer(t)
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, is.key("k1"), "k1", is.claims(testResource, time.Now()))
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	_, _ = v.Verify(gone, tok)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("the token after a cancelled first request: %v", err)
	}
}
