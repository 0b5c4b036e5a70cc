package auth

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// fetchTimeout bounds one discovery and JWKS fetch.
const fetchTimeout = 10 * time.Second

// keySet is a bounded cache of an issuer's signing keys. It fetches the
// JWKS lazily, again once it is older than maxAge, and once more when a
// token names a key id it does not hold, but never more often than
// minRefresh: a stream of tokens with made-up key ids costs at most one
// fetch per minRefresh. When a fetch fails the last good keys stay in
// use.
type keySet struct {
	client     *http.Client
	url        func(ctx context.Context) (string, error) // resolves the JWKS URL (discovery)
	maxKeys    int
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	fetchMu sync.Mutex // one fetch at a time; held across the HTTP call

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt, successful or not
	fetches int       // successful and failed attempts, for tests
}

// candidates returns the cached keys a token with key id kid may be
// signed with: the key with that id, or every key when kid is empty.
func (k *keySet) candidates(kid string) (keys []jose.JSONWebKey, fresh, known bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range k.keys {
		if kid == "" || key.KeyID == kid {
			keys = append(keys, key)
		}
	}
	return keys, !k.fetched.IsZero() && k.now().Sub(k.fetched) < k.maxAge, len(keys) > 0
}

// lookup returns the keys to try for kid, refreshing the set when it is
// stale or kid is unknown and the rate limit allows.
func (k *keySet) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	keys, fresh, known := k.candidates(kid)
	if known && fresh {
		return keys, nil
	}
	err := k.refresh(ctx)
	keys, _, known = k.candidates(kid)
	if known {
		return keys, nil // possibly stale keys when the refresh failed: better than none
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: no signing key with id %q", ErrInvalidToken, kid)
}

// refresh fetches the JWKS unless another fetch happened within
// minRefresh. It returns the fetch error, or nil when rate-limited.
func (k *keySet) refresh(ctx context.Context) error {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	limited := !k.tried.IsZero() && k.now().Sub(k.tried) < k.minRefresh
	if !limited {
		k.tried = k.now()
		k.fetches++
	}
	hadKeys := !k.fetched.IsZero()
	k.mu.Unlock()
	if limited {
		if !hadKeys {
			return fmt.Errorf("%w: signing keys not loaded yet", ErrUnavailable)
		}
		return nil
	}
	// The fetch serves every request that waits for the keys, not only
	// this one: a caller that goes away must not make it fail, and count
	// as the attempt that rate-limits the next ones.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	u, err := k.url(ctx)
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, k.client, u, &set); err != nil {
		return err
	}
	keys := make([]jose.JSONWebKey, 0, min(len(set.Keys), k.maxKeys))
	for _, key := range set.Keys {
		if len(keys) == k.maxKeys {
			break
		}
		if key.Use != "" && key.Use != "sig" || !key.IsPublic() || !key.Valid() {
			continue
		}
		keys = append(keys, key)
	}
	k.mu.Lock()
	k.keys, k.fetched = keys, k.now()
	k.mu.Unlock()
	return nil
}
