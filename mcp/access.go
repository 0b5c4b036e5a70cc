package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Who may see and use which feature.
//
// A tool, prompt, resource or resource template is visible to the caller
// of a request when it is enabled (SetEnabled), the server's
// FeatureFilter admits it, and the caller's principal carries every scope
// of its RequiredScopes. A feature that is not visible is left out of
// tools/list, prompts/list, resources/list and resources/templates/list
// (pagination runs over what is visible), and a call, get or read of it is
// answered exactly as one of a feature that does not exist, so nothing
// can be probed.
//
// One exception is made for step-up: a feature the filter admits whose
// required scopes an authenticated caller lacks is answered with an
// InsufficientScopeError naming its scopes. Behind the bearer middleware
// of mcp/auth that is an HTTP 403 with a
// `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`
// challenge, so the client can get a token with more scope and retry. The
// caller learns that the name exists, which is what step-up is for; a
// feature the filter hides gives nothing away.

// CodeInsufficientScope is the JSON-RPC error code of a request refused
// because the caller's token lacks scopes (InsufficientScopeError). It is
// implementation defined, outside the range the spec reserves.
const CodeInsufficientScope = -31403

// InsufficientScopeError refuses a request whose caller's token lacks
// scopes it needs. Dispatch returns it for a feature with RequiredScopes;
// a handler or a method middleware may return it (possibly wrapped) for
// its own finer checks. It reaches the client as JSON-RPC error
// CodeInsufficientScope with data.scopes; over HTTP behind the bearer
// middleware of mcp/auth, a request answered with it before any stream
// was opened also gets HTTP 403 and an insufficient_scope challenge
// naming the scopes (the step-up of the MCP authorization spec).
type InsufficientScopeError struct {
	// Scopes are all the scopes the operation needs, granted or not: a
	// client asks for them in one go.
	Scopes []string
}

func (e *InsufficientScopeError) Error() string {
	return "insufficient scope: the access token needs " + strings.Join(e.Scopes, " ")
}

// As makes the error a protocol error (*Error) for errors.As, so every
// transport answers it as a JSON-RPC error and a typed tool passes it on
// instead of turning it into an isError result.
func (e *InsufficientScopeError) As(target any) bool {
	p, ok := target.(**jsonrpc.Error)
	if ok {
		*p = jsonrpc.NewError(CodeInsufficientScope, "insufficient scope: the access token lacks a scope this request needs", map[string]any{"scopes": e.Scopes})
	}
	return ok
}

type challengeKey struct{}

// WithScopeChallenge returns ctx carrying challenge, which turns the
// scopes of an InsufficientScopeError into the value of a
// WWW-Authenticate header. The HTTP handler answers a request refused with
// that error with 403 and the header when the HTTP request's context
// carries a challenge (the bearer middleware of mcp/auth installs one that
// names the resource metadata URL); without one the refusal is only the
// JSON-RPC error.
func WithScopeChallenge(ctx context.Context, challenge func(scopes []string) string) context.Context {
	return context.WithValue(ctx, challengeKey{}, challenge)
}

// writeScopeChallenge answers a request refused for scope with 403 and
// the challenge conn carries, and reports whether it did.
func writeScopeChallenge(w http.ResponseWriter, conn context.Context, id jsonrpc.ID, err error) bool {
	var ise *InsufficientScopeError
	challenge, _ := conn.Value(challengeKey{}).(func([]string) string)
	if challenge == nil || !errors.As(err, &ise) {
		return false
	}
	w.Header().Set("WWW-Authenticate", challenge(ise.Scopes))
	writeError(w, http.StatusForbidden, id, err)
	return true
}

// errHidden: the feature is not visible; the caller answers as for one
// that does not exist.
var errHidden = errors.New("mcp: feature not visible")

// admitted reports whether the FeatureFilter lets the caller of req see
// the feature.
func (s *Server) admitted(ctx context.Context, req *Request, kind, name string) bool {
	f := s.opts.FeatureFilter
	return f == nil || f(ctx, req, kind, name)
}

// listable reports whether a feature goes into the caller's list.
func (s *Server) listable(ctx context.Context, req *Request, kind, name string, scopes []string) bool {
	return req.principal.HasScopes(scopes...) && s.admitted(ctx, req, kind, name)
}

// access decides whether the caller may use a registered, enabled
// feature: nil, errHidden, or an InsufficientScopeError for step-up.
func (s *Server) access(ctx context.Context, req *Request, kind, name string, scopes []string) error {
	if !s.admitted(ctx, req, kind, name) {
		return errHidden
	}
	if req.principal.HasScopes(scopes...) {
		return nil
	}
	if req.principal == nil {
		return errHidden // nobody to step up: as if it did not exist
	}
	return &InsufficientScopeError{Scopes: scopes}
}

// listVisible answers a list request: the page of the entries of m (in
// key order, enabled under kind) that the caller may see. The filter runs
// outside s.mu, and only until the page and the key after it are found;
// the cursor names the next visible key, so pages are the same on every
// node that has the same registrations and filter.
func listVisible[E any](ctx context.Context, s *Server, req *Request, kind string, m map[string]E, scopes func(E) []string) ([]E, string, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, "", err
	}
	s.mu.RLock()
	keys := s.enabledKeys(kind, sortedKeys(m))
	entries := make([]E, len(keys))
	for i, k := range keys {
		entries[i] = m[k]
	}
	s.mu.RUnlock()
	start, err := cursorStart(keys, p.Cursor)
	if err != nil {
		return nil, "", err
	}
	size := s.opts.pageSize()
	var out []E
	for i := start; i < len(keys); i++ {
		if !s.listable(ctx, req, kind, keys[i], scopes(entries[i])) {
			continue
		}
		if len(out) == size {
			return out, encodeCursor(keys[i]), nil
		}
		out = append(out, entries[i])
	}
	return out, "", nil
}

// checkScopes panics on a registration whose RequiredScopes are not
// scope tokens (RFC 6749 §3.3): they go into WWW-Authenticate challenges.
func checkScopes(what string, scopes []string) {
	for _, sc := range scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\") {
			panic(fmt.Sprintf("mcp: %s: %q is not a valid scope token", what, sc))
		}
		for _, c := range sc {
			if c < 0x21 || c > 0x7e {
				panic(fmt.Sprintf("mcp: %s: %q is not a valid scope token", what, sc))
			}
		}
	}
}
