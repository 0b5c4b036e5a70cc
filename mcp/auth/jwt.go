package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults and bounds of JWTOptions.
const (
	DefaultClockSkew     = time.Minute
	MaxClockSkew         = 5 * time.Minute
	DefaultMaxKeys       = 16
	DefaultMinRefresh    = 30 * time.Second
	DefaultMaxKeyAge     = time.Hour
	DefaultMaxTokenBytes = 8 << 10
)

// asymmetric lists the algorithms a JWT verifier may be configured with.
// HMAC algorithms are absent on purpose (a resource server must not
// share a secret with the issuer), and so is "none".
var asymmetric = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// JWTOptions configures a JWTVerifier. Zero values mean the documented
// defaults; Issuer and Audience are required.
type JWTOptions struct {
	// Issuer is the authorization server's issuer identifier; the "iss"
	// claim must equal it exactly.
	Issuer string
	// Audience is this resource's canonical URI (RFC 8707); the "aud"
	// claim must contain it.
	Audience string
	// JWKSURL is where the signing keys are. Empty means: discover it
	// from the issuer's RFC 8414 or OpenID Connect metadata.
	JWKSURL string
	// Algorithms is the allow-list of signature algorithms. Empty means
	// all asymmetric ones (RS*, PS*, ES*, EdDSA). HS* and none are refused.
	Algorithms []string
	// ClockSkew is the tolerance on exp, nbf and iat; at most MaxClockSkew.
	ClockSkew time.Duration
	// MaxKeys bounds the cached signing keys (DefaultMaxKeys).
	MaxKeys int
	// MinRefresh is the least time between two JWKS fetches (DefaultMinRefresh).
	MinRefresh time.Duration
	// MaxKeyAge is when a fetched JWKS is fetched again (DefaultMaxKeyAge).
	MaxKeyAge time.Duration
	// MaxTokenBytes bounds the token length (DefaultMaxTokenBytes).
	MaxTokenBytes int
	// HTTPClient makes the discovery and JWKS requests; nil means a client
	// with a 10s timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// JWTVerifier verifies JWT access tokens against the issuer's JWKS.
type JWTVerifier struct {
	opts     JWTOptions
	audience string
	algs     []jose.SignatureAlgorithm
	keys     *keySet
}

var _ TokenVerifier = (*JWTVerifier)(nil)

// NewJWTVerifier checks opts and returns a verifier. It does no I/O:
// discovery and the first key fetch happen on the first Verify.
func NewJWTVerifier(opts JWTOptions) (*JWTVerifier, error) {
	if opts.Issuer == "" {
		return nil, errors.New("auth: issuer is required")
	}
	if _, err := discoveryURLs(opts.Issuer); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	aud, err := CanonicalURI(opts.Audience)
	if err != nil {
		return nil, fmt.Errorf("auth: audience: %w", err)
	}
	algs, err := allowedAlgorithms(opts.Algorithms)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.ClockSkew < 0 || opts.ClockSkew > MaxClockSkew:
		return nil, fmt.Errorf("auth: clock skew %v outside [0, %v]", opts.ClockSkew, MaxClockSkew)
	case opts.ClockSkew == 0:
		opts.ClockSkew = DefaultClockSkew
	}
	opts.MaxKeys = positive(opts.MaxKeys, DefaultMaxKeys)
	opts.MinRefresh = positive(opts.MinRefresh, DefaultMinRefresh)
	opts.MaxKeyAge = positive(opts.MaxKeyAge, DefaultMaxKeyAge)
	opts.MaxTokenBytes = positive(opts.MaxTokenBytes, DefaultMaxTokenBytes)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	client := httpClient(opts.HTTPClient)
	jwks := &endpoint{client: client, issuer: opts.Issuer, member: "jwks_uri", url: opts.JWKSURL,
		pick: func(d *discovery) string { return d.JWKSURI }}
	v := &JWTVerifier{opts: opts, audience: aud, algs: algs}
	v.keys = &keySet{
		client:     client,
		url:        jwks.get,
		maxKeys:    opts.MaxKeys,
		minRefresh: opts.MinRefresh,
		maxAge:     opts.MaxKeyAge,
		now:        opts.Now,
	}
	return v, nil
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func allowedAlgorithms(names []string) ([]jose.SignatureAlgorithm, error) {
	if len(names) == 0 {
		return slices.Clone(asymmetric), nil
	}
	out := make([]jose.SignatureAlgorithm, 0, len(names))
	for _, n := range names {
		a := jose.SignatureAlgorithm(n)
		if !slices.Contains(asymmetric, a) {
			return nil, fmt.Errorf("auth: signature algorithm %q is not allowed (allowed: asymmetric RS*, PS*, ES*, EdDSA)", n)
		}
		out = append(out, a)
	}
	return out, nil
}

// Verify checks the token's signature, issuer, audience and validity
// window, and returns its principal.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if len(token) > v.opts.MaxTokenBytes {
		return nil, fmt.Errorf("%w: token longer than %d bytes", ErrInvalidToken, v.opts.MaxTokenBytes)
	}
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: want one signature", ErrInvalidToken)
	}
	hdr := tok.Headers[0]
	keys, err := v.keys.lookup(ctx, hdr.KeyID)
	if err != nil {
		return nil, err
	}
	var (
		std      jwt.Claims
		all      map[string]any
		verified bool
	)
	for _, key := range keys {
		if key.Algorithm != "" && key.Algorithm != hdr.Algorithm {
			continue
		}
		if err := tok.Claims(key.Key, &std, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: signature does not verify with key %q", ErrInvalidToken, hdr.KeyID)
	}
	if err := v.checkClaims(&std); err != nil {
		return nil, err
	}
	return &Principal{
		Subject:  std.Subject,
		Issuer:   std.Issuer,
		ClientID: firstNonEmpty(claimString(all, "client_id"), claimString(all, "azp")),
		Scopes:   claimScopes(all),
		Expiry:   std.Expiry.Time(),
		Claims:   all,
	}, nil
}

func (v *JWTVerifier) checkClaims(c *jwt.Claims) error {
	now, skew := v.opts.Now(), v.opts.ClockSkew
	switch {
	case c.Issuer != v.opts.Issuer:
		return fmt.Errorf("%w: issuer %q, want %q", ErrInvalidToken, c.Issuer, v.opts.Issuer)
	case c.Subject == "":
		return fmt.Errorf("%w: no subject", ErrInvalidToken)
	case c.Expiry == nil:
		return fmt.Errorf("%w: no expiry", ErrInvalidToken)
	case now.After(c.Expiry.Time().Add(skew)):
		return fmt.Errorf("%w: expired", ErrInvalidToken)
	case c.NotBefore != nil && now.Add(skew).Before(c.NotBefore.Time()):
		return fmt.Errorf("%w: not valid yet", ErrInvalidToken)
	case c.IssuedAt != nil && now.Add(skew).Before(c.IssuedAt.Time()):
		return fmt.Errorf("%w: issued in the future", ErrInvalidToken)
	case !audienceHas(c.Audience, v.audience):
		return fmt.Errorf("%w: audience does not name this resource", ErrInvalidToken)
	}
	return nil
}

// audienceHas reports whether one of aud is the canonical URI want.
func audienceHas(aud []string, want string) bool {
	for _, a := range aud {
		if c, err := CanonicalURI(a); err == nil && c == want {
			return true
		}
	}
	return false
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// claimString returns the string claim name, or "".
func claimString(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// claimScopes reads the granted scopes: "scope" as a space-delimited
// string (RFC 9068, RFC 7662), or as a list, or "scp" as a list.
func claimScopes(claims map[string]any) []string {
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			return parseScopes(v)
		case []any:
			var parts []string
			for _, e := range v {
				if s, ok := e.(string); ok {
					parts = append(parts, s)
				}
			}
			return parseScopes(strings.Join(parts, " "))
		}
	}
	return nil
}
