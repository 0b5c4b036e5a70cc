package mcp

import (
	"context"
	"slices"
	"time"
)

// Principal is a verified caller: who the access token names, what it
// may do, and until when. It carries no token. The bearer middleware of
// package mcp/auth (or any other authentication layer in front of the
// handler) puts it in the request context with WithPrincipal; every
// request handled on that context sees it through Request.Principal.
type Principal struct {
	// Subject is the token's "sub" claim.
	Subject string
	// Issuer is the authorization server that issued the token.
	Issuer string
	// ClientID is the OAuth client the token was issued to, when known.
	ClientID string
	// Scopes are the granted scopes, in the order the token lists them.
	Scopes []string
	// Expiry is when the token stops being valid (zero if unknown).
	Expiry time.Time
	// Claims are all claims of a JWT, or all members of an
	// introspection response. Callers must treat it as read-only.
	Claims map[string]any
}

// ID names the principal across the deployment: issuer and subject
// together, since a subject is only unique within its issuer. It is ""
// for a nil principal (no authentication). Sessions, streams and every
// other piece of state are bound to it.
func (p *Principal) ID() string {
	if p == nil {
		return ""
	}
	return p.Issuer + "#" + p.Subject
}

// HasScopes reports whether every scope in want was granted.
func (p *Principal) HasScopes(want ...string) bool {
	return len(p.Missing(want...)) == 0
}

// Missing returns the scopes of want that were not granted.
func (p *Principal) Missing(want ...string) []string {
	var miss []string
	for _, s := range want {
		if p == nil || !slices.Contains(p.Scopes, s) {
			miss = append(miss, s)
		}
	}
	return miss
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFromContext returns the principal put in ctx by
// WithPrincipal, or nil.
func PrincipalFromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
