package auth

import (
	"context"
	"errors"
	"strings"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// Principal is a verified caller; it is mcp.Principal, so a handler
// sees the same value through Request.Principal.
type Principal = mcp.Principal

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

// WithPrincipal returns ctx carrying p (mcp.WithPrincipal).
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return mcp.WithPrincipal(ctx, p)
}

// PrincipalFrom returns the principal the middleware put in ctx, or nil
// (mcp.PrincipalFromContext).
func PrincipalFrom(ctx context.Context) *Principal {
	return mcp.PrincipalFromContext(ctx)
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
