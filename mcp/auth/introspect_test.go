package auth

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func (v *IntrospectionVerifier) callCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

func TestIntrospectionVerifierRealProvider(t *testing.T) {
	p := startProvider(t)
	ctx := t.Context()
	clk := newClock()
	v, err := NewIntrospectionVerifier(IntrospectionOptions{
		Issuer: p.Issuer, Audience: testResource, ClientID: "rs", ClientSecret: "rs-secret",
		CacheTTL: 30 * time.Second, NegativeTTL: 5 * time.Second, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	token := func(client, secret, resource string) string {
		tok, err := p.ClientCredentials(ctx, client, secret, resource, "mcp:read")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	opaque := token("opaque", "opaque-secret", testResource)
	tests := []struct {
		name    string
		token   string
		wantSub string
		wantErr error
	}{
		{"opaque token", opaque, "opaque", nil},
		{"JWT token introspected", token("svc", "svc-secret", testResource), "svc", nil},
		{"opaque token for another resource", token("opaque", "opaque-secret", otherService), "", ErrInvalidToken},
		{"unknown token", "bm90LWEtdG9rZW4", "", ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(ctx, tt.token)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Subject != tt.wantSub || !slices.Equal(got.Scopes, []string{"mcp:read"}) || got.Issuer != p.Issuer {
				t.Errorf("got %q %v %q, want %q [mcp:read] %q", got.Subject, got.Scopes, got.Issuer, tt.wantSub, p.Issuer)
			}
		})
	}

	// Cached: positive answers for CacheTTL, negative ones for NegativeTTL.
	calls := v.callCount()
	if _, err := v.Verify(ctx, opaque); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, "bm90LWEtdG9rZW4"); !errors.Is(err, ErrInvalidToken) {
		t.Fatal(err)
	}
	if got := v.callCount(); got != calls {
		t.Fatalf("got %d introspection calls, want %d (both cached)", got, calls)
	}
	clk.Advance(6 * time.Second)
	_, _ = v.Verify(ctx, opaque)
	_, _ = v.Verify(ctx, "bm90LWEtdG9rZW4")
	if got := v.callCount(); got != calls+1 {
		t.Fatalf("after NegativeTTL: got %d calls, want %d (only the negative answer expired)", got, calls+1)
	}
	clk.Advance(30 * time.Second)
	if _, err := v.Verify(ctx, opaque); err != nil {
		t.Fatal(err)
	}
	if got := v.callCount(); got != calls+2 {
		t.Fatalf("after CacheTTL: got %d calls, want %d", got, calls+2)
	}
}

func TestIntrospectionCacheBounded(t *testing.T) {
	p := startProvider(t)
	ctx := t.Context()
	v, err := NewIntrospectionVerifier(IntrospectionOptions{
		Issuer: p.Issuer, Audience: testResource, ClientID: "rs", ClientSecret: "rs-secret", MaxEntries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for range 3 {
		tok, err := p.ClientCredentials(ctx, "opaque", "opaque-secret", testResource, "mcp:read")
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	v.mu.Lock()
	n := v.lru.Len()
	v.mu.Unlock()
	if n != 2 {
		t.Fatalf("got %d cache entries, want 2", n)
	}
	calls := v.callCount()
	_, _ = v.Verify(ctx, toks[2]) // cached
	_, _ = v.Verify(ctx, toks[0]) // evicted: introspected again
	if got := v.callCount(); got != calls+1 {
		t.Fatalf("got %d calls, want %d (the oldest entry was evicted)", got, calls+1)
	}
}

func TestIntrospectionBadClientCredentials(t *testing.T) {
	p := startProvider(t)
	v, err := NewIntrospectionVerifier(IntrospectionOptions{
		Issuer: p.Issuer, Audience: testResource, ClientID: "rs", ClientSecret: "wrong",
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.ClientCredentials(t.Context(), "opaque", "opaque-secret", testResource, "mcp:read")
	if err != nil {
		t.Fatal(err)
	}
	// A misconfigured resource server is not the caller's fault: the
	// error must not read as an invalid token (401), and must not be cached.
	for range 2 {
		if _, err := v.Verify(t.Context(), tok); err == nil || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("got %v, want a non-token error", err)
		}
	}
	if got := v.callCount(); got != 2 {
		t.Fatalf("got %d calls, want 2 (errors are not cached)", got)
	}
}

func TestIntrospectionAnswerChecks(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v, err := NewIntrospectionVerifier(IntrospectionOptions{
		Issuer: "https://as.example", Audience: testResource, ClientID: "rs", ClientSecret: "x",
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	base := func() map[string]any {
		return map[string]any{"active": true, "sub": "dave", "aud": []any{testResource}, "scope": "a b",
			"exp": float64(now.Unix() + 60), "iss": "https://as.example"}
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
		ok     bool
	}{
		{"valid", func(map[string]any) {}, true},
		{"audience as string", func(m map[string]any) { m["aud"] = testResource }, true},
		{"no iss", func(m map[string]any) { delete(m, "iss") }, true},
		{"inactive", func(m map[string]any) { m["active"] = false }, false},
		{"active not a bool", func(m map[string]any) { m["active"] = "true" }, false},
		{"expired", func(m map[string]any) { m["exp"] = float64(now.Unix()) }, false},
		{"not valid yet", func(m map[string]any) { m["nbf"] = float64(now.Unix() + 10) }, false},
		{"other issuer", func(m map[string]any) { m["iss"] = "https://evil.example" }, false},
		{"other audience", func(m map[string]any) { m["aud"] = otherService }, false},
		{"no audience", func(m map[string]any) { delete(m, "aud") }, false},
		{"no subject", func(m map[string]any) { delete(m, "sub") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.change(m)
			p, err := v.principal(m)
			if tt.ok {
				if err != nil || p.Subject != "dave" || !slices.Equal(p.Scopes, []string{"a", "b"}) {
					t.Fatalf("got %+v, %v", p, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("got %v, want ErrInvalidToken", err)
			}
		})
	}
}
