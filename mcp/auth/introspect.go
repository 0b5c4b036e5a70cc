package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults of IntrospectionOptions.
const (
	DefaultIntrospectionTTL = time.Minute
	DefaultNegativeTTL      = 5 * time.Second
	DefaultMaxCacheEntries  = 10000
)

// IntrospectionOptions configures an IntrospectionVerifier. Issuer,
// Audience and the client credentials are required.
type IntrospectionOptions struct {
	// Issuer is the authorization server. Its metadata names the
	// introspection endpoint when Endpoint is empty, and an "iss" member
	// in a response must equal it.
	Issuer string
	// Audience is this resource's canonical URI; the response's "aud"
	// must contain it.
	Audience string
	// Endpoint is the RFC 7662 introspection endpoint; empty means
	// discover it.
	Endpoint string
	// ClientID and ClientSecret authenticate this resource server to the
	// introspection endpoint (HTTP Basic, RFC 6749 §2.3.1).
	ClientID     string
	ClientSecret string
	// CacheTTL bounds how long an active answer is reused (never beyond
	// the token's exp). Default DefaultIntrospectionTTL.
	CacheTTL time.Duration
	// NegativeTTL is how long an inactive answer is reused, so a replayed
	// bad token does not reach the server each time. Default
	// DefaultNegativeTTL.
	NegativeTTL time.Duration
	// MaxEntries bounds the cache (DefaultMaxCacheEntries); the least
	// recently used entry goes first.
	MaxEntries int
	// MaxTokenBytes bounds the token length (DefaultMaxTokenBytes).
	MaxTokenBytes int
	// HTTPClient and Now as in JWTOptions.
	HTTPClient *http.Client
	Now        func() time.Time
}

// IntrospectionVerifier verifies opaque tokens by RFC 7662 introspection.
type IntrospectionVerifier struct {
	opts     IntrospectionOptions
	audience string
	client   *http.Client

	endpoint *endpoint

	mu    sync.Mutex
	cache map[[32]byte]*list.Element
	lru   *list.List // of *cached, most recent at the front
	calls int        // introspection requests made, for tests
}

var _ TokenVerifier = (*IntrospectionVerifier)(nil)

type cached struct {
	key   [32]byte
	p     *Principal
	err   error
	until time.Time
}

// NewIntrospectionVerifier checks opts and returns a verifier; it does
// no I/O.
func NewIntrospectionVerifier(opts IntrospectionOptions) (*IntrospectionVerifier, error) {
	if opts.Issuer == "" || opts.ClientID == "" || opts.ClientSecret == "" {
		return nil, errors.New("auth: introspection needs an issuer, a client id and a client secret")
	}
	if _, err := discoveryURLs(opts.Issuer); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	aud, err := CanonicalURI(opts.Audience)
	if err != nil {
		return nil, fmt.Errorf("auth: audience: %w", err)
	}
	opts.CacheTTL = positive(opts.CacheTTL, DefaultIntrospectionTTL)
	opts.NegativeTTL = positive(opts.NegativeTTL, DefaultNegativeTTL)
	opts.MaxEntries = positive(opts.MaxEntries, DefaultMaxCacheEntries)
	opts.MaxTokenBytes = positive(opts.MaxTokenBytes, DefaultMaxTokenBytes)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	client := httpClient(opts.HTTPClient)
	return &IntrospectionVerifier{
		opts:     opts,
		audience: aud,
		client:   client,
		endpoint: &endpoint{client: client, issuer: opts.Issuer, member: "introspection_endpoint", url: opts.Endpoint,
			pick: func(d *discovery) string { return d.IntrospectionEndpoint }},
		cache: map[[32]byte]*list.Element{},
		lru:   list.New(),
	}, nil
}

// Verify introspects the token, or reuses a cached answer. The cache is
// keyed by a hash of the token; the token itself is not kept.
func (v *IntrospectionVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if len(token) > v.opts.MaxTokenBytes {
		return nil, fmt.Errorf("%w: token longer than %d bytes", ErrInvalidToken, v.opts.MaxTokenBytes)
	}
	key := sha256.Sum256([]byte(token))
	if c := v.lookup(key); c != nil {
		return c.p, c.err
	}
	p, err := v.introspect(ctx, token)
	switch {
	case err == nil:
		until := v.opts.Now().Add(v.opts.CacheTTL)
		if !p.Expiry.IsZero() && p.Expiry.Before(until) {
			until = p.Expiry
		}
		v.store(&cached{key: key, p: p, until: until})
	case errors.Is(err, ErrInvalidToken):
		v.store(&cached{key: key, err: err, until: v.opts.Now().Add(v.opts.NegativeTTL)})
	}
	return p, err
}

// lookup returns the live cache entry for key, or nil.
func (v *IntrospectionVerifier) lookup(key [32]byte) *cached {
	v.mu.Lock()
	defer v.mu.Unlock()
	el, ok := v.cache[key]
	if !ok {
		return nil
	}
	c := el.Value.(*cached)
	if !v.opts.Now().Before(c.until) {
		v.lru.Remove(el)
		delete(v.cache, key)
		return nil
	}
	v.lru.MoveToFront(el)
	return c
}

func (v *IntrospectionVerifier) store(c *cached) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if el, ok := v.cache[c.key]; ok {
		el.Value = c
		v.lru.MoveToFront(el)
		return
	}
	for v.lru.Len() >= v.opts.MaxEntries {
		old := v.lru.Back()
		v.lru.Remove(old)
		delete(v.cache, old.Value.(*cached).key)
	}
	v.cache[c.key] = v.lru.PushFront(c)
}

func (v *IntrospectionVerifier) introspect(ctx context.Context, token string) (*Principal, error) {
	endpoint, err := v.endpoint.get(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(v.opts.ClientID), url.QueryEscape(v.opts.ClientSecret))
	v.mu.Lock()
	v.calls++
	v.mu.Unlock()
	var all map[string]any
	if err := doJSON(v.client, req, &all); err != nil {
		return nil, fmt.Errorf("introspection: %w", err)
	}
	return v.principal(all)
}

// principal checks an introspection answer and turns it into a
// Principal.
func (v *IntrospectionVerifier) principal(all map[string]any) (*Principal, error) {
	if active, _ := all["active"].(bool); !active {
		return nil, fmt.Errorf("%w: token is not active", ErrInvalidToken)
	}
	now := v.opts.Now()
	exp, hasExp := claimTime(all, "exp")
	if hasExp && !now.Before(exp) {
		return nil, fmt.Errorf("%w: expired", ErrInvalidToken)
	}
	if nbf, ok := claimTime(all, "nbf"); ok && now.Before(nbf) {
		return nil, fmt.Errorf("%w: not valid yet", ErrInvalidToken)
	}
	if iss, ok := all["iss"]; ok && iss != v.opts.Issuer {
		return nil, fmt.Errorf("%w: issuer %v, want %q", ErrInvalidToken, iss, v.opts.Issuer)
	}
	if !audienceHas(claimStrings(all, "aud"), v.audience) {
		return nil, fmt.Errorf("%w: audience does not name this resource", ErrInvalidToken)
	}
	sub := claimString(all, "sub")
	if sub == "" {
		return nil, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	p := &Principal{
		Subject:  sub,
		Issuer:   v.opts.Issuer,
		ClientID: claimString(all, "client_id"),
		Scopes:   claimScopes(all),
		Claims:   all,
	}
	if hasExp {
		p.Expiry = exp
	}
	return p, nil
}

// claimTime reads a NumericDate member.
func claimTime(all map[string]any, name string) (time.Time, bool) {
	f, ok := all[name].(float64)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// claimStrings reads a member that is a string or a list of strings.
func claimStrings(all map[string]any, name string) []string {
	switch v := all[name].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
