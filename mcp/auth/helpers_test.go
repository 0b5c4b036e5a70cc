package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is a hand-made token issuer for negative cases: it serves OIDC
// discovery and a JWKS on loopback and signs whatever claims a test
// asks for, so tests can mint tokens no real provider would issue.
type issuer struct {
	url     string
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey // published
	fetches atomic.Int32                 // JWKS requests served
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{keys: map[string]*ecdsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.url, "jwks_uri": is.url + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
		}
		is.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	is.addKey(t, "k1", true)
	return is
}

// addKey makes a key; published keys appear in the JWKS.
func (is *issuer) addKey(t testing.TB, kid string, publish bool) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if publish {
		is.mu.Lock()
		is.keys[kid] = k
		is.mu.Unlock()
	}
	return k
}

func (is *issuer) key(kid string) *ecdsa.PrivateKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[kid]
}

// claims returns valid claims for aud, to be spoiled by a test.
func (is *issuer) claims(aud string, now time.Time) map[string]any {
	return map[string]any{
		"iss":   is.url,
		"sub":   "carol",
		"aud":   aud,
		"exp":   now.Add(5 * time.Minute).Unix(),
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"scope": "mcp:read mcp:write",
	}
}

// sign signs claims with key under kid with ES256.
func sign(t testing.TB, key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// clock is a settable clock for verifiers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
