package cluster

import (
	"context"
	"time"
)

// Limiter keeps per-caller budgets that every node shares: token buckets
// for request rates, and sets of leased members (a caller's live sessions,
// its open streams) counted against a cap. Keys are opaque to the store
// and each operation on one key is atomic; nothing is left behind: a full
// bucket and an empty set are the same as no key, and backends drop them.
type Limiter interface {
	// Take debits every bucket of debits in one batch (one round trip
	// where the backend allows) and returns, per debit, its bucket's
	// state after it: how long until the bucket holds a whole token
	// again and its balance.
	//
	// A bucket holds at most Burst tokens and gains Rate tokens a
	// second; an unknown bucket is full. A debit always applies: it
	// records work already admitted, so the balance may fall below zero,
	// down to -Burst, and the debt is paid back by the wait. Debits of
	// one Key in one call apply together (their N summed), and each of
	// them gets the bucket's state after all of them. A retried call
	// never debits twice.
	Take(ctx context.Context, debits []Debit) ([]Taken, error)
	// Acquire leases member of set key for ttl, unless the set holds max
	// unexpired members already: then ok is false and wait is how long
	// until the earliest of them expires. A member already in the set is
	// renewed and never refused, so a retried Acquire is harmless.
	Acquire(ctx context.Context, key, member string, ttl time.Duration, max int) (ok bool, wait time.Duration, err error)
	// Renew extends each lease that is still held to its TTL from now, in
	// one batch; a member released, or expired, is not added back.
	Renew(ctx context.Context, leases []Lease) error
	// Release ends member's lease. An unknown member is not an error.
	Release(ctx context.Context, key, member string) error
}

// Debit takes N tokens from the bucket Key, which holds at most Burst
// tokens and gains Rate tokens a second.
type Debit struct {
	Key   string
	N     int
	Rate  float64
	Burst int
}

// Taken is a bucket's state after a Take.
type Taken struct {
	// Wait is how long until the bucket holds a whole token again (0
	// when it holds one now).
	Wait time.Duration
	// Balance is the bucket's tokens: at most Burst, below zero (down to
	// -Burst) while it is in debt.
	Balance float64
}

// Lease names a member of a Limiter set and how long its lease lasts
// once renewed.
type Lease struct {
	Key, Member string
	TTL         time.Duration
}

// Refill returns the balance of a bucket of rate and burst that held
// tokens elapsed ago, then debited by n (never below -burst), and the
// wait until it holds a whole token again. rate must be positive. Backends share it so that
// they agree to the token.
func Refill(tokens float64, elapsed time.Duration, n int, rate float64, burst int) (float64, time.Duration) {
	if elapsed > 0 {
		tokens += elapsed.Seconds() * rate
	}
	tokens = min(tokens, float64(burst)) - float64(n)
	tokens = max(tokens, -float64(burst))
	if tokens >= 1 {
		return tokens, 0
	}
	return tokens, time.Duration((1 - tokens) / rate * float64(time.Second))
}
