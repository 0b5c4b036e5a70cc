package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// limiter implements cluster.Limiter. Buckets and sets together are
// bounded by MaxKeys (a budget of their own, apart from claims and once
// tokens); a full bucket and an empty set are dropped, by the sweep and
// when the bound is reached.
type limiter store

var _ cluster.Limiter = (*limiter)(nil)

// bucket is a token bucket's balance at a time.
type bucket struct {
	tokens float64
	at     time.Time
	rate   float64
	burst  int
}

// full reports whether the bucket has refilled by now (it is then the
// same as no bucket).
func (b *bucket) full(now time.Time) bool {
	return b.tokens+now.Sub(b.at).Seconds()*b.rate >= float64(b.burst)
}

func (m *limiter) Take(ctx context.Context, debits []cluster.Debit) ([]cluster.Taken, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Limiter.Take"); err != nil {
		return nil, err
	}
	for _, d := range debits {
		if d.Rate <= 0 || d.Burst <= 0 || d.N < 0 {
			return nil, fmt.Errorf("limiter %q: rate and burst must be positive, n not negative", d.Key)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	taken := make([]cluster.Taken, len(debits))
	bs := make([]*bucket, len(debits))
	for i, d := range debits {
		b, ok := s.buckets[d.Key]
		if !ok {
			if err := s.limiterRoomLocked(now); err != nil {
				return nil, err
			}
			b = &bucket{tokens: float64(d.Burst), at: now}
			s.buckets[d.Key] = b
		}
		b.rate, b.burst = d.Rate, d.Burst
		b.tokens, _ = cluster.Refill(b.tokens, now.Sub(b.at), d.N, d.Rate, d.Burst)
		b.at = now
		bs[i] = b
	}
	// Each debit gets its bucket's state after the whole call (a key
	// given twice, after both).
	for i, b := range bs {
		taken[i].Balance, taken[i].Wait = cluster.Refill(b.tokens, 0, 0, b.rate, b.burst)
	}
	return taken, nil
}

func (m *limiter) Acquire(ctx context.Context, key, member string, ttl time.Duration, max int) (bool, time.Duration, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Limiter.Acquire"); err != nil {
		return false, 0, err
	}
	if ttl <= 0 {
		return false, 0, fmt.Errorf("limiter %q: ttl must be positive", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquireLocked(key, member, ttl, max, s.now())
}

func (s *store) acquireLocked(key, member string, ttl time.Duration, max int, now time.Time) (bool, time.Duration, error) {
	set := s.pruneSetLocked(key, now)
	if _, ok := set[member]; !ok && max > 0 && len(set) >= max {
		first := time.Time{}
		for _, exp := range set {
			if first.IsZero() || exp.Before(first) {
				first = exp
			}
		}
		return false, first.Sub(now), nil
	}
	if set == nil {
		if err := s.limiterRoomLocked(now); err != nil {
			return false, 0, err
		}
		set = map[string]time.Time{}
		s.sets[key] = set
	}
	set[member] = now.Add(ttl)
	return true, 0, nil
}

func (m *limiter) Renew(ctx context.Context, leases []cluster.Lease) error {
	s := (*store)(m)
	if err := s.check(ctx, "Limiter.Renew"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, l := range leases {
		if set := s.pruneSetLocked(l.Key, now); set != nil {
			if _, ok := set[l.Member]; ok && l.TTL > 0 {
				set[l.Member] = now.Add(l.TTL)
			}
		}
	}
	return nil
}

func (m *limiter) Release(ctx context.Context, key, member string) error {
	s := (*store)(m)
	if err := s.check(ctx, "Limiter.Release"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(key, member)
	return nil
}

func (s *store) releaseLocked(key, member string) {
	if set := s.sets[key]; set != nil {
		delete(set, member)
		if len(set) == 0 {
			delete(s.sets, key)
		}
	}
}

// pruneSetLocked drops the expired members of set key (and the set when
// it is left empty) and returns what remains, nil for none.
func (s *store) pruneSetLocked(key string, now time.Time) map[string]time.Time {
	return pruneExpired(s.sets, key, now)
}

// pruneExpired drops the members of sets[key] whose expiry has passed,
// and sets[key] itself once it is empty; it returns what remains, nil
// for none.
func pruneExpired(sets map[string]map[string]time.Time, key string, now time.Time) map[string]time.Time {
	set := sets[key]
	for m, exp := range set {
		if expired(exp, now) {
			delete(set, m)
		}
	}
	if len(set) == 0 {
		delete(sets, key)
		return nil
	}
	return set
}

// pruneLimiterLocked drops full buckets and expired set members.
func (s *store) pruneLimiterLocked(now time.Time) {
	for k, b := range s.buckets {
		if b.full(now) {
			delete(s.buckets, k)
		}
	}
	for k := range s.sets {
		s.pruneSetLocked(k, now)
	}
}

// limiterRoomLocked makes room for one more limiter key within MaxKeys, or
// returns ErrLimit.
func (s *store) limiterRoomLocked(now time.Time) error {
	if s.limiterKeys() < s.opts.MaxKeys {
		return nil
	}
	s.pruneLimiterLocked(now)
	if s.limiterKeys() < s.opts.MaxKeys {
		return nil
	}
	return fmt.Errorf("limiter keys at the cap of %d: %w", s.opts.MaxKeys, cluster.ErrLimit)
}

func (s *store) limiterKeys() int { return len(s.buckets) + len(s.sets) }
