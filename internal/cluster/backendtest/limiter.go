package backendtest

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func (s *suite) testLimiter(t *testing.T) {
	// The waits depend on the time between takes, which a loaded machine
	// stretches: each is checked against the time measured around the
	// takes, never against a sleep assumed to be exact.
	t.Run("BucketStartsFullAndRefuses", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("b")
		d := []cluster.Debit{{Key: key, N: 1, Rate: 1, Burst: 3}}
		start := time.Now()
		for i := range 2 {
			w, err := l.Take(t.Context(), d)
			must(t, "Take", err)
			if w[0].Wait != 0 {
				t.Fatalf("take %d of a burst of 3: got wait %v, want 0", i+1, w[0].Wait)
			}
			wantBalance(t, "take of a burst of 3", w[0].Balance, float64(2-i), time.Since(start), 1)
		}
		w, err := l.Take(t.Context(), d)
		must(t, "Take", err)
		// 0 tokens left at rate 1/s, plus what refilled since the
		// first take: a whole token a second after it.
		wantWait(t, "third take", w[0].Wait, time.Second, time.Since(start))
		wantBalance(t, "third take", w[0].Balance, 0, time.Since(start), 1)
		// Debt: the balance goes below zero, and the wait grows.
		w2, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 2, Rate: 1, Burst: 3}})
		must(t, "Take", err)
		wantWait(t, "take into debt", w2[0].Wait, 3*time.Second, time.Since(start))
		wantBalance(t, "take into debt", w2[0].Balance, -2, time.Since(start), 1)
		// The debt is bounded by the burst.
		w3, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: 100, Rate: 1, Burst: 3}})
		must(t, "Take", err)
		if w3[0].Wait > 4*time.Second || w3[0].Balance != -3 {
			t.Fatalf("debt past -burst: got wait %v and balance %v, want at most 4s and -3", w3[0].Wait, w3[0].Balance)
		}
	})

	t.Run("BucketRefills", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		key := uniq("b")
		debit := func(n int) time.Duration {
			t.Helper()
			w, err := l.Take(t.Context(), []cluster.Debit{{Key: key, N: n, Rate: 20, Burst: 2}})
			must(t, "Take", err)
			return w[0].Wait
		}
		start := time.Now()
		w := debit(2)
		wantWait(t, "emptied bucket at 20/s", w, 50*time.Millisecond, 0)
		slept := w + 20*time.Millisecond
		time.Sleep(slept)
		// It refilled at 20/s for at least slept (1.4 tokens), at most
		// the time since the first take, and spent one: a whole token
		// again 100ms after the first take.
		w = debit(1)
		if w > 100*time.Millisecond-slept+time.Millisecond {
			t.Fatalf("take after %v of refill: got wait %v, want at most %v", slept, w, 100*time.Millisecond-slept)
		}
		wantWait(t, "take after a refill", w, 100*time.Millisecond, time.Since(start))
		// Refilled for longer than the whole burst takes (w to a token,
		// 50ms more to the second), it holds the burst and no more:
		// emptying it leaves it 50ms from a token however long it slept.
		time.Sleep(w + 100*time.Millisecond)
		wantWait(t, "full bucket emptied", debit(2), 50*time.Millisecond, 0)
	})

	t.Run("BatchIsPerBucket", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		a, b := uniq("a"), uniq("b")
		w, err := l.Take(t.Context(), []cluster.Debit{
			{Key: a, N: 5, Rate: 1, Burst: 5}, {Key: b, N: 1, Rate: 1, Burst: 5},
		})
		must(t, "Take", err)
		if w[0].Wait == 0 || w[1].Wait != 0 {
			t.Fatalf("batch: got %v, want waits [>0 0]", w)
		}
		if w[0].Balance > 0.01 || w[1].Balance < 4 || w[1].Balance > 4.01 {
			t.Fatalf("batch: got %v, want balances [0 4]", w)
		}
		if _, err := l.Take(t.Context(), []cluster.Debit{{Key: a, N: 1, Rate: 0, Burst: 1}}); err == nil {
			t.Fatalf("Take with rate 0: got nil error")
		}
	})

	t.Run("LargeBatchAndRepeatedKeys", func(t *testing.T) {
		t.Parallel()
		l := s.newBackend(t).Limiter
		// More buckets than one script of a backend may carry, each
		// debited its own N, and one key given twice: the two apply
		// together and both answers are the bucket's after both.
		const n = 300
		var debits []cluster.Debit
		for i := range n {
			debits = append(debits, cluster.Debit{Key: uniq("k"), N: i % 7, Rate: 0.001, Burst: 10})
		}
		twice := uniq("twice")
		debits = append(debits, cluster.Debit{Key: twice, N: 3, Rate: 0.001, Burst: 10}, cluster.Debit{Key: twice, N: 4, Rate: 0.001, Burst: 10})
		w, err := l.Take(t.Context(), debits)
		must(t, "Take", err)
		if len(w) != len(debits) {
			t.Fatalf("got %d answers for %d debits", len(w), len(debits))
		}
		for i, d := range debits[:n] {
			if want := float64(10 - d.N); w[i].Balance < want || w[i].Balance > want+0.01 || w[i].Wait != 0 {
				t.Fatalf("debit %d of %d: got %+v, want balance %v and no wait", i, d.N, w[i], want)
			}
		}
		for _, got := range w[n:] {
			if got.Balance < 3 || got.Balance > 3.01 {
				t.Fatalf("a key debited 3 and 4 in one call: got %+v, want balance 3 for both", w[n:])
			}
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
				if err == nil && w[0].Wait == 0 {
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
		// "left" runs out after ttl; "kept" would after 10s, but is
		// renewed to a minute, as is "ghost", never acquired, which must
		// not be added. Which leases are held is read off the wait of a
		// refused Acquire, not off how long sleeps took.
		const ttl = 200 * time.Millisecond
		if ok, _, err := l.Acquire(t.Context(), key, "kept", 10*time.Second, 2); err != nil || !ok {
			t.Fatalf("Acquire kept: ok=%v err=%v", ok, err)
		}
		start := time.Now()
		if ok, _, err := l.Acquire(t.Context(), key, "left", ttl, 2); err != nil || !ok {
			t.Fatalf("Acquire left: ok=%v err=%v", ok, err)
		}
		must(t, "Renew", l.Renew(t.Context(), []cluster.Lease{{Key: key, Member: "kept", TTL: time.Minute}, {Key: key, Member: "ghost", TTL: time.Minute}}))
		waitFor(t, 5*time.Second, "left's lease to expire, admitting new (a ghost added by Renew holds the slot)", func() bool {
			ok, _, err := l.Acquire(t.Context(), key, "new", time.Minute, 2)
			must(t, "Acquire", err)
			return ok
		})
		if d := time.Since(start); d < ttl-time.Millisecond {
			t.Fatalf("a lease of %v expired after %v", ttl, d)
		}
		ok, wait, err := l.Acquire(t.Context(), key, "third", ttl, 2)
		must(t, "Acquire", err)
		if ok || wait < 50*time.Second {
			t.Fatalf("Acquire with kept and new held for a minute: got ok=%v wait=%v, want refused for about a minute (a renewed lease lost, or not extended)", ok, wait)
		}
	})
}

// wantWait fails unless a bucket's wait is want, what it would be had no
// time passed since the bucket was last full or empty, less at most
// elapsed: refilling for elapsed at any rate shortens a wait by elapsed,
// and never lengthens it. The slack is the Redis clock's millisecond
// rounding.
func wantWait(t *testing.T, what string, wait, want, elapsed time.Duration) {
	t.Helper()
	const slack = 2 * time.Millisecond
	if wait > want+slack || wait < want-elapsed-slack {
		t.Fatalf("%s: got wait %v, want %v less at most the %v that passed", what, wait, want, elapsed)
	}
}

// wantBalance fails unless a bucket's balance is want, what it would be
// had no time passed since the first take, plus at most what elapsed
// refilled at rate (the Redis clock rounds to the millisecond).
func wantBalance(t *testing.T, what string, got, want float64, elapsed time.Duration, rate float64) {
	t.Helper()
	const slack = 0.01
	if got < want-slack || got > want+elapsed.Seconds()*rate+slack {
		t.Fatalf("%s: got balance %v, want %v plus at most the %v of refill", what, got, want, elapsed)
	}
}
