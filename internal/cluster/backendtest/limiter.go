package backendtest

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func (s *suite) testLimiter(t *testing.T) {
	t.Run("BucketStartsFullAndRefuses", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("b")
		d := []cluster.Debit{{Key: key, N: 1, Rate: 1, Burst: 3}}
		for i := range 2 {
			w, err := l.Take(t.Context(), d)
			must(t, "Take", err)
			if w[0] != 0 {
				t.Fatalf("take %d of a burst of 3: got wait %v, want 0", i+1, w[0])
			}
		}
		w, err := l.Take(t.Context(), d)
		must(t, "Take", err)
		// 0 tokens left at rate 1/s: a whole token in about a second.
		if w[0] < 800*time.Millisecond || w[0] > time.Second {
			t.Fatalf("third take: got wait %v, want about 1s", w[0])
		}
		// Debt: the balance goes below zero, and the wait grows.
		w2, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 2, Rate: 1, Burst: 3}})
		must(t, "Take", err)
		if w2[0] < 2500*time.Millisecond || w2[0] > 3*time.Second {
			t.Fatalf("take into debt: got wait %v, want about 3s", w2[0])
		}
		// The debt is bounded by the burst.
		w3, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 100, Rate: 1, Burst: 3}})
		must(t, "Take", err)
		if w3[0] > 4*time.Second {
			t.Fatalf("debt past -burst: got wait %v, want at most 4s", w3[0])
		}
	})

	t.Run("BucketRefills", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("b")
		w, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 2, Rate: 20, Burst: 2}})
		must(t, "Take", err)
		if w[0] < 30*time.Millisecond || w[0] > 50*time.Millisecond {
			t.Fatalf("emptied bucket at 20/s: got wait %v, want about 50ms", w[0])
		}
		time.Sleep(w[0] + 20*time.Millisecond)
		w, err = l.Take(t.Context(), []cluster.Debit{{Key: key, N: 1, Rate: 20, Burst: 2}})
		must(t, "Take", err)
		if w[0] == 0 {
			// It held one token and spent it; the next needs a refill.
			t.Fatalf("take after one refill: got wait 0, want a wait")
		}
	})

	t.Run("BatchIsPerBucket", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		a, b := uniq("a"), uniq("b")
		w, err := l.Take(t.Context(), []cluster.Debit{
			{Key: a, N: 5, Rate: 1, Burst: 5}, {Key: b, N: 1, Rate: 1, Burst: 5},
		})
		must(t, "Take", err)
		if w[0] == 0 || w[1] != 0 {
			t.Fatalf("batch: got waits %v, want [>0 0]", w)
		}
		if _, err := l.Take(t.Context(), []cluster.Debit{{Key: a, N: 1, Rate: 0, Burst: 1}}); err == nil {
			t.Fatalf("Take with rate 0: got nil error")
		}
	})

	t.Run("ConcurrentTakesAreCounted", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("b")
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := 0
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 1, Rate: 0.001, Burst: 10}})
				if err == nil && w[0] == 0 {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// Ten tokens: the takes that left at least one whole token are
		// the first nine.
		if admitted != 9 {
			t.Fatalf("concurrent takes leaving a token: got %d, want 9", admitted)
		}
	})

	t.Run("SetCapsMembers", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("set")
		for _, m := range []string{"a", "b"} {
			ok, _, err := l.Acquire(t.Context(), key, m, time.Minute, 2)
			must(t, "Acquire", err)
			if !ok {
				t.Fatalf("Acquire %s under the cap: refused", m)
			}
		}
		ok, wait, err := l.Acquire(t.Context(), key, "c", time.Minute, 2)
		must(t, "Acquire", err)
		if ok || wait < 50*time.Second || wait > time.Minute {
			t.Fatalf("Acquire past the cap: got ok=%v wait=%v, want refused with about a minute", ok, wait)
		}
		// A member held is renewed, never refused (a retry is harmless).
		ok, _, err = l.Acquire(t.Context(), key, "a", time.Minute, 2)
		must(t, "Acquire", err)
		if !ok {
			t.Fatalf("Acquire of a held member: refused")
		}
		must(t, "Release", l.Release(t.Context(), key, "b"))
		must(t, "Release unknown", l.Release(t.Context(), key, "zz"))
		ok, _, err = l.Acquire(t.Context(), key, "c", time.Minute, 2)
		must(t, "Acquire", err)
		if !ok {
			t.Fatalf("Acquire after a release: refused")
		}
	})

	t.Run("LeasesExpireUnlessRenewed", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("set")
		ttl := 300 * time.Millisecond
		for _, m := range []string{"kept", "left"} {
			if ok, _, err := l.Acquire(t.Context(), key, m, ttl, 2); err != nil || !ok {
				t.Fatalf("Acquire %s: ok=%v err=%v", m, ok, err)
			}
		}
		// Renewing "kept" (and a member never acquired, which must not be
		// added) while "left" runs out.
		deadline := time.Now().Add(2 * ttl)
		for time.Now().Before(deadline) {
			must(t, "Renew", l.Renew(t.Context(), []cluster.Lease{{Key: key, Member: "kept", TTL: ttl}, {Key: key, Member: "ghost", TTL: ttl}}))
			time.Sleep(ttl / 6)
		}
		ok, _, err := l.Acquire(t.Context(), key, "new", ttl, 2)
		must(t, "Acquire", err)
		if !ok {
			t.Fatalf("Acquire after a lease expired: refused")
		}
		ok, _, err = l.Acquire(t.Context(), key, "third", ttl, 2)
		must(t, "Acquire", err)
		if ok {
			t.Fatalf("Acquire with kept and new held: admitted a third (renewed lease lost, or a ghost counted as free)")
		}
	})
}
