package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// Principal is a verified caller: who the token names, what it may do,
// and until when. It carries no token.
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
// together, since a subject is only unique within its issuer.
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

// TokenVerifier turns a bearer token into a Principal. Verify returns an
// error wrapping ErrInvalidToken when the token is not acceptable (the
// caller answers 401), and any other error when the verifier could not
// decide (the authorization server is unreachable: the caller answers
// 503). Implementations are safe for concurrent use.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*Principal, error)
}

// ErrInvalidToken marks a token that is malformed, expired, not yet
// valid, badly signed, or issued by or for someone else.
var ErrInvalidToken = errors.New("invalid token")

// ErrUnavailable marks a verifier that could not reach the
// authorization server (discovery, JWKS or introspection).
var ErrUnavailable = errors.New("authorization server unavailable")

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the middleware put in ctx, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// parseScopes splits a space-delimited scope string (RFC 6749 §3.3),
// dropping empty and repeated entries.
func parseScopes(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
