package auth

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// JSON-RPC error codes of authorization failures (implementation
// defined, outside the range the spec reserves). The HTTP status and the
// WWW-Authenticate header carry the OAuth meaning; the body is there so
// every refusal is a JSON-RPC error.
const (
	CodeUnauthorized = -31401
	CodeForbidden    = mcp.CodeInsufficientScope
)

var (
	errNoToken   = errors.New("no bearer token")
	errMalformed = errors.New("malformed Authorization header")
)

// maxHeaderToken bounds the token a request may present, before any
// verifier looks at it.
const maxHeaderToken = 16 << 10

// BearerToken extracts the token of an "Authorization: Bearer <token>"
// header (RFC 6750 §2.1). It returns errNoToken when there is no
// Authorization header and errMalformed for anything else that is not
// exactly one bearer credential with b64token syntax.
func BearerToken(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	switch len(vals) {
	case 0:
		return "", errNoToken
	case 1:
	default:
		return "", errMalformed
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errMalformed
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || len(tok) > maxHeaderToken || !isB64Token(tok) {
		return "", errMalformed
	}
	return tok, nil
}

// isB64Token checks RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// Middleware returns HTTP middleware that admits only requests with a
// valid bearer token carrying r.Scopes, and puts the verified Principal
// in the request context (PrincipalFrom). It answers:
//
//   - 401 with a Bearer challenge naming the metadata URL and the scopes
//     when the token is missing or invalid;
//   - 400 (invalid_request) for a malformed Authorization header or a
//     token in the query string;
//   - 403 insufficient_scope naming the scopes needed (step-up);
//   - 503 when the authorization server cannot be reached.
//
// Every refusal has a JSON-RPC error body. The token goes nowhere but
// the verifier; the Authorization header is removed from the request
// before next sees it, so nothing downstream can pass it on.
func (r *Resource) Middleware(v TokenVerifier, log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Query().Has("access_token") {
				r.challenge(w, http.StatusBadRequest, "invalid_request", "tokens are accepted in the Authorization header only", nil)
				return
			}
			tok, err := BearerToken(req.Header)
			switch {
			case errors.Is(err, errNoToken):
				r.challenge(w, http.StatusUnauthorized, "", "authorization required", nil)
				return
			case err != nil:
				r.challenge(w, http.StatusBadRequest, "invalid_request", err.Error(), nil)
				return
			}
			p, err := v.Verify(req.Context(), tok)
			switch {
			case errors.Is(err, ErrInvalidToken):
				log.Debug().Err(err).Str("remote", req.RemoteAddr).Msg("bearer token refused")
				r.challenge(w, http.StatusUnauthorized, "invalid_token", "the access token is not valid", nil)
				return
			case err != nil:
				log.Warn().Err(err).Msg("token verification failed")
				writeRPCError(w, http.StatusServiceUnavailable, jsonrpc.CodeUnavailable, "authorization server unavailable")
				return
			}
			if miss := p.Missing(r.Scopes...); len(miss) > 0 {
				r.InsufficientScope(w, p, r.Scopes...)
				return
			}
			ctx := mcp.WithScopeChallenge(WithPrincipal(req.Context(), p), r.scopeChallenge)
			req = req.Clone(ctx)
			req.Header.Del("Authorization")
			next.ServeHTTP(w, req)
		})
	}
}

// InsufficientScope answers 403 with an insufficient_scope challenge
// for an operation that needs the scopes in need. The challenge names
// every scope the operation needs together with the resource's base
// scopes, in one go (no drip-feeding).
//
// Inside the MCP handler there is no need to call it: a tool, prompt or
// resource with RequiredScopes the caller lacks, or a handler or method
// middleware returning an mcp.InsufficientScopeError, gets the same 403
// through the challenge Middleware puts in the request's context
// (mcp.WithScopeChallenge).
func (r *Resource) InsufficientScope(w http.ResponseWriter, p *Principal, need ...string) {
	r.challenge(w, http.StatusForbidden, "insufficient_scope", insufficientScopeDesc, r.withBase(need))
}

const insufficientScopeDesc = "the access token lacks a required scope"

// scopeChallenge is the WWW-Authenticate value of a step-up for need.
func (r *Resource) scopeChallenge(need []string) string {
	return r.challengeHeader("insufficient_scope", insufficientScopeDesc, r.withBase(need))
}

// withBase returns the resource's base scopes followed by those of need
// not among them.
func (r *Resource) withBase(need []string) []string {
	all := slices.Clone(r.Scopes)
	for _, s := range need {
		if !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	return all
}

// challenge writes the status with a Bearer WWW-Authenticate header
// (RFC 6750 §3, RFC 9728 §5.1) and a JSON-RPC error body. scopes nil
// means the resource's base scopes.
func (r *Resource) challenge(w http.ResponseWriter, status int, code, desc string, scopes []string) {
	w.Header().Set("WWW-Authenticate", r.challengeHeader(code, desc, scopes))
	rpc := CodeUnauthorized
	if status == http.StatusForbidden {
		rpc = CodeForbidden
	}
	writeRPCError(w, status, int64(rpc), desc)
}

// challengeHeader builds a Bearer challenge; scopes nil means the
// resource's base scopes.
func (r *Resource) challengeHeader(code, desc string, scopes []string) string {
	if scopes == nil {
		scopes = r.Scopes
	}
	var b strings.Builder
	b.WriteString("Bearer ")
	if code != "" {
		b.WriteString(`error="` + code + `", `)
	}
	if s := withoutOffline(scopes); len(s) > 0 {
		b.WriteString(`scope="` + quote(strings.Join(s, " ")) + `", `)
	}
	b.WriteString(`resource_metadata="` + quote(r.MetadataURL()) + `"`)
	if code != "" {
		b.WriteString(`, error_description="` + quote(desc) + `"`)
	}
	return b.String()
}

// quote escapes s for a quoted-string (RFC 9110 §5.6.4).
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

func writeRPCError(w http.ResponseWriter, status int, code int64, msg string) {
	b, _ := jsonrpc.Encode(jsonrpc.ErrorResponse(jsonrpc.ID{}, jsonrpc.NewError(code, msg, nil)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
