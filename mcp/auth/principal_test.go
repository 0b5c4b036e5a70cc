package auth

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestPrincipal(t *testing.T) {
	p := &Principal{Subject: "alice", Issuer: "https://as.example", Scopes: parseScopes("a b  a c")}
	if !slices.Equal(p.Scopes, []string{"a", "b", "c"}) {
		t.Fatalf("got scopes %v, want [a b c]", p.Scopes)
	}
	if !p.HasScopes("a", "c") || p.HasScopes("a", "d") {
		t.Errorf("HasScopes wrong for %v", p.Scopes)
	}
	if got := p.Missing("d", "a", "e"); !slices.Equal(got, []string{"d", "e"}) {
		t.Errorf("got missing %v, want [d e]", got)
	}
	var none *Principal
	if none.ID() != "" || none.HasScopes("a") || !none.HasScopes() {
		t.Errorf("nil principal: ID %q", none.ID())
	}
	other := &Principal{Subject: "alice", Issuer: "https://other.example"}
	if p.ID() == other.ID() {
		t.Errorf("the same subject of two issuers has one ID %q", p.ID())
	}
	ctx := WithPrincipal(context.Background(), p)
	if PrincipalFrom(ctx) != p || PrincipalFrom(context.Background()) != nil {
		t.Errorf("PrincipalFrom does not return what WithPrincipal stored")
	}
}

// TestKeyCacheBounded: a JWKS with more keys than MaxKeys is cut to
// MaxKeys.
func TestKeyCacheBounded(t *testing.T) {
	is := newIssuer(t)
	for _, kid := range []string{"k2", "k3", "k4", "k5"} {
		is.addKey(t, kid, true)
	}
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource, MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = v.Verify(t.Context(), sign(t, is.key("k1"), "k1", is.claims(testResource, time.Now())))
	v.keys.mu.Lock()
	n := len(v.keys.keys)
	v.keys.mu.Unlock()
	if n != 2 {
		t.Fatalf("got %d cached keys, want 2", n)
	}
}
