// Package auth is the OAuth 2.1 resource server of an MCP node: it
// publishes Protected Resource Metadata (RFC 9728), checks the bearer
// token of every request, and hands the verified caller on as a
// Principal in the request context.
//
// Two verifiers implement TokenVerifier:
//
//   - JWTVerifier checks JWT access tokens (RFC 9068) against the
//     issuer's JWKS. The JWKS URL comes from the issuer's RFC 8414 or
//     OpenID Connect discovery document (or is configured). Keys are
//     cached in a bounded set, an unknown key id triggers one refresh of
//     the set (rate-limited, so a flood of forged key ids cannot turn into
//     a flood of fetches), only an allow-list of asymmetric algorithms is
//     accepted (never "none", never HMAC), exp and nbf are checked with a
//     bounded clock skew, the issuer must match, and the audience must
//     name this resource's canonical URI (RFC 8707).
//   - IntrospectionVerifier asks the authorization server about opaque
//     tokens (RFC 7662), authenticating as a client with client
//     credentials, and caches answers in a bounded cache for a bounded
//     time (never beyond the token's own expiry).
//
// Resource.Middleware also puts a step-up challenge in the request
// context (mcp.WithScopeChallenge): a request the MCP handler refuses
// with an mcp.InsufficientScopeError (a tool, prompt or resource whose
// RequiredScopes the token lacks, or a method middleware's own check) is
// answered 403 with a WWW-Authenticate insufficient_scope challenge
// naming the resource's base scopes and those the operation needs, and
// the resource metadata URL, so the client can step up.
//
// Tokens are never passed through: a verifier sends a token only to the
// issuer's own introspection endpoint, and nothing in this package
// stores or forwards it.
//
// # Library choice
//
// JOSE parsing and signature checks use github.com/go-jose/go-jose/v4.
// It is the maintained successor of square/go-jose, it is small, it has
// no transitive dependencies, and its v4 API makes the caller name the
// accepted algorithms when parsing (ParseSigned takes the allow-list), so
// "none" and algorithm confusion are excluded by construction. It is also
// what github.com/coreos/go-oidc/v3 and github.com/zitadel/oidc/v3 build
// on, so the module graph gains no second JOSE stack.
//
// github.com/coreos/go-oidc/v3 was not taken: it verifies OpenID
// Connect ID tokens, not OAuth access tokens. It only knows OIDC
// discovery (not RFC 8414), it checks the audience against a client id,
// its clock leeway is fixed, and its remote key set refetches on every
// unknown key id without a rate limit. github.com/lestrrat-go/jwx/v3 is
// capable, but it is a much larger surface (JWE, JWK caches with their
// own goroutines, many algorithms) than a resource server needs. The
// pieces a resource server must get right (discovery, the bounded key
// cache and its refresh policy, audience and skew rules) are therefore
// written here, on top of go-jose's primitives.
package auth
