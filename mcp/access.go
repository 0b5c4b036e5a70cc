package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Who may see and use which feature: see the package documentation.

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
// naming the scopes (the step-up of the MCP authorization spec); a member
// of a 2025-03-26 batch, or a request whose SSE stream is already open,
// gets the JSON-RPC error only.
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

// visibleEntry returns the feature of kind named name in m (read under
// s.mu) that the caller of req may use: nil when it is not registered,
// disabled or hidden, or an InsufficientScopeError.
func visibleEntry[E any](ctx context.Context, s *Server, req *Request, kind, name string, m map[string]*E, scopes func(*E) []string) (*E, error) {
	s.mu.RLock()
	e := m[name]
	if !s.enabledLocked(featureKey(kind, name)) {
		e = nil
	}
	s.mu.RUnlock()
	if e == nil {
		return nil, nil
	}
	if err := s.access(ctx, req, kind, name, scopes(e)); errors.Is(err, errHidden) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return e, nil
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

// RequireScopes sets the RequiredScopes of a registered tool, prompt,
// resource (by URI) or resource template (by URI template), replacing
// those of its registration: for features registered by code that does
// not know the deployment's scopes (a tool pack). No scopes makes the
// feature need none. Like registrations it is node configuration: every
// node of a deployment must make the same calls, at start-up. A change
// sends the kind's list_changed, as what callers may see changed.
func (s *Server) RequireScopes(kind, name string, scopes ...string) error {
	method, ok := listChangedOf[kind]
	if !ok {
		return fmt.Errorf("mcp: unknown feature kind %q", kind)
	}
	checkScopes(kind+" "+name, scopes)
	scopes = slices.Clone(scopes)
	s.mu.Lock()
	var found bool
	switch kind {
	case KindTool:
		found = replaceEntry(s.tools, name, func(e *toolEntry) { e.tool.RequiredScopes = scopes })
	case KindPrompt:
		found = replaceEntry(s.prompts, name, func(e *promptEntry) { e.prompt.RequiredScopes = scopes })
	case KindResource:
		r := replaceEntry(s.resources, name, func(e *resourceEntry) { e.res.RequiredScopes = scopes })
		t := replaceEntry(s.templates, name, func(e *templateEntry) { e.tmpl.RequiredScopes = scopes })
		found = r || t
	case KindSkill:
		found = replaceEntry(s.skills, name, func(e *skillEntry) { e.scopes = scopes })
	}
	s.mu.Unlock()
	if !found {
		return fmt.Errorf("mcp: no %s %q is registered", kind, name)
	}
	s.notifyListChanged(method)
	return nil
}

// replaceEntry replaces the entry of m under name, if any, by a copy
// that set changed, and reports whether there was one. Entries are read
// outside s.mu: they are replaced, never changed.
func replaceEntry[E any](m map[string]*E, name string, set func(*E)) bool {
	e := m[name]
	if e == nil {
		return false
	}
	c := *e
	set(&c)
	m[name] = &c
	return true
}
