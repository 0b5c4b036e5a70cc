package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// testSessionLeases checks the Limiter lease a session takes as it is
// created and gives back as it is ended (CreateOptions.Lease,
// EndOptions.Lease): both happen or neither, whichever bound refuses.
func (s *suite) testSessionLeases(t *testing.T) {
	// wantHeld fails unless set key holds want unexpired members, which
	// it counts by probing the set with a member of its own.
	wantHeld := func(t *testing.T, l cluster.Limiter, key string, want int, when string) {
		t.Helper()
		n := 0
		for ; n <= want; n++ {
			ok, _, err := l.Acquire(t.Context(), key, "probe", time.Minute, n+1)
			must(t, "Acquire probe", err)
			if ok {
				must(t, "Release probe", l.Release(t.Context(), key, "probe"))
				break
			}
		}
		if n != want {
			t.Fatalf("%s: %d leases held, want %d", when, n, want)
		}
	}
	lease := func(key string, max int) cluster.CreateOptions {
		return cluster.CreateOptions{Lease: &cluster.SessionLease{Key: key, TTL: time.Minute, Max: max}}
	}

	t.Run("CreateTakesEndReleases", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx, key := t.Context(), uniq("callers")
		a, c := uniq("s"), uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, a, map[string]string{"p": "ada"}, time.Minute, 0, lease(key, 2)))
		must(t, "Create", b.Sessions.Create(ctx, c, map[string]string{"p": "ada"}, time.Minute, 0, lease(key, 2)))
		wantHeld(t, b.Limiter, key, 2, "after two creates")
		// Not ended (another's), not released.
		if live, err := b.Sessions.End(ctx, a, cluster.EndOptions{Match: map[string]string{"p": "eve"}, Lease: key}); err != nil || live {
			t.Fatalf("End of another's: live=%v err=%v", live, err)
		}
		wantHeld(t, b.Limiter, key, 2, "after an End that did not end")
		if live, err := b.Sessions.End(ctx, a, cluster.EndOptions{Match: map[string]string{"p": "ada"}, Lease: key}); err != nil || !live {
			t.Fatalf("End: live=%v err=%v", live, err)
		}
		wantHeld(t, b.Limiter, key, 1, "after End")
		// An End that finds no live session releases nothing.
		ok, _, err := b.Limiter.Acquire(ctx, key, "gone", time.Minute, 0)
		must(t, "Acquire", err)
		if !ok {
			t.Fatalf("Acquire without a cap: refused")
		}
		if live, err := b.Sessions.End(ctx, "gone", cluster.EndOptions{Lease: key}); err != nil || live {
			t.Fatalf("End of an unknown session: live=%v err=%v", live, err)
		}
		wantHeld(t, b.Limiter, key, 2, "after End of an unknown session")
	})

	t.Run("RefusedLeaseCreatesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx, key := t.Context(), uniq("callers")
		must(t, "Create", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 0, lease(key, 1)))
		id := uniq("s")
		err := b.Sessions.Create(ctx, id, nil, time.Minute, 0, lease(key, 1))
		var lr *cluster.LeaseRefused
		if !errors.As(err, &lr) || lr.Wait < 50*time.Second || lr.Wait > time.Minute {
			t.Fatalf("Create past the lease cap: got %v, want a *LeaseRefused waiting about a minute", err)
		}
		_, err = b.Sessions.Load(ctx, id, time.Minute, "")
		wantErr(t, "Load of the refused session", err, cluster.ErrNotFound)
		if n, err := b.Sessions.Count(ctx); err != nil || n != 1 {
			t.Fatalf("Count: got %d %v, want 1", n, err)
		}
		wantHeld(t, b.Limiter, key, 1, "after a refused create")
	})

	t.Run("CappedCreateLeavesNoLease", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx, key := t.Context(), uniq("callers")
		must(t, "Create", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 1, cluster.CreateOptions{}))
		wantErr(t, "Create past the cap", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 1, lease(key, 5)), cluster.ErrLimit)
		wantHeld(t, b.Limiter, key, 0, "after a create refused at the cap")
	})

	t.Run("ExistingIDKeepsItsLease", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx, key := t.Context(), uniq("callers")
		id := uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, id, nil, time.Minute, 0, lease(key, 5)))
		if err := b.Sessions.Create(ctx, id, nil, time.Minute, 0, lease(key, 5)); err == nil {
			t.Fatalf("Create of an existing id: got nil error")
		}
		wantHeld(t, b.Limiter, key, 1, "after a duplicate create")
		if err := b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 0, cluster.CreateOptions{Lease: &cluster.SessionLease{Key: key}}); err == nil {
			t.Fatalf("Create with a lease of no TTL: got nil error")
		}
	})
}
