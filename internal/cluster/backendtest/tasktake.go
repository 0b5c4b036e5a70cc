package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// testTaskTakeOver checks TaskUpdate.Take: of concurrent take-overs of
// one task, the one whose update applies holds the claim and the
// others, refused, leave it to it; a holder other than the one a
// take-over found gone refuses it; a refused take-over holds no claim.
func (s *suite) testTaskTakeOver(t *testing.T) {
	holder := func(t *testing.T, b *cluster.Backend, key string) string {
		t.Helper()
		h, err := b.Claims.Holder(t.Context(), key)
		must(t, "Holder", err)
		return h
	}
	// takeOver is the update a reaper sends when the run's hold of in
	// is gone (held by from, or nobody).
	takeOver := func(in cluster.Task, runner string, claim *cluster.TaskClaim, from string) cluster.TaskUpdate {
		return cluster.TaskUpdate{IfRunner: in.Runner, SetRunner: &runner, NextAttempt: true, ClearInputs: true,
			Status: cluster.TaskWorking, Take: claim, TakeFrom: from}
	}

	t.Run("OneWinner", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		for round := range 5 {
			in := newTask(uniq("owner"), time.Minute)
			dead := &cluster.TaskClaim{Key: uniq("produce:task"), Owner: in.Runner + "/dead", TTL: time.Minute}
			_, err := b.Tasks.Create(ctx, in, 0, dead)
			must(t, "Create with a claim", err)
			const reapers = 8
			var (
				start sync.WaitGroup
				done  sync.WaitGroup
				errs  [reapers]error
				recs  [reapers]cluster.Task
			)
			claims := make([]*cluster.TaskClaim, reapers)
			start.Add(1)
			for i := range reapers {
				claims[i] = &cluster.TaskClaim{Key: dead.Key, Owner: fmt.Sprintf("node-%d.1/%s", i, uniq("c")), TTL: time.Minute}
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					recs[i], errs[i] = b.Tasks.Update(ctx, in.ID, takeOver(in, fmt.Sprintf("node-%d.1", i), claims[i], dead.Owner))
				}()
			}
			start.Done()
			done.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("round %d: reapers %d and %d both took the task over", round, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, cluster.ErrTaskRunner):
					t.Fatalf("round %d: reaper %d: %v, want %v", round, i, err, cluster.ErrTaskRunner)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no reaper took the task over: %v", round, errs)
			}
			if h := holder(t, b, dead.Key); h != claims[winner].Owner {
				t.Fatalf("round %d: claim held by %q after the take-overs, want the winner's %q", round, h, claims[winner].Owner)
			}
			got, err := b.Tasks.Get(ctx, in.ID)
			must(t, "Get", err)
			if want := fmt.Sprintf("node-%d.1", winner); got.Runner != want || got.Attempt != 2 || recs[winner].Runner != want {
				t.Fatalf("round %d: runner %q attempt %d, want %q and 2", round, got.Runner, got.Attempt, want)
			}
		}
	})

	t.Run("Holder", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		live := &cluster.TaskClaim{Key: uniq("produce:task"), Owner: in.Runner + "/live", TTL: time.Minute}
		_, err := b.Tasks.Create(ctx, in, 0, live)
		must(t, "Create with a claim", err)
		// The claim is held by another than the holder found gone: the
		// take-over is refused and leaves the task and the claim.
		mine := &cluster.TaskClaim{Key: live.Key, Owner: "node-b.1/" + uniq("c"), TTL: time.Minute}
		_, err = b.Tasks.Update(ctx, in.ID, takeOver(in, "node-b.1", mine, in.Runner+"/gone"))
		wantErr(t, "a take-over of a claim held by another", err, cluster.ErrTaskRunner)
		if h := holder(t, b, live.Key); h != live.Owner {
			t.Fatalf("claim after a refused take-over: held by %q, want %q", h, live.Owner)
		}
		if got, err := b.Tasks.Get(ctx, in.ID); err != nil || got.Runner != in.Runner || got.Attempt != 1 {
			t.Fatalf("after a refused take-over: %+v, %v; want it unchanged", got, err)
		}
		// Nobody holds it: the take-over applies and holds it.
		must(t, "Release", b.Claims.Release(ctx, live.Key, live.Owner))
		got, err := b.Tasks.Update(ctx, in.ID, takeOver(in, "node-b.1", mine, in.Runner+"/gone"))
		must(t, "a take-over of a claim nobody holds", err)
		if h := holder(t, b, live.Key); h != mine.Owner || got.Runner != "node-b.1" {
			t.Fatalf("after the take-over: claim held by %q, runner %q; want %q, node-b.1", h, got.Runner, mine.Owner)
		}
		// A take-over conditioned on the old runner is refused now and
		// leaves the winner's claim.
		late := &cluster.TaskClaim{Key: live.Key, Owner: "node-c.1/" + uniq("c"), TTL: time.Minute}
		for _, from := range []string{"", in.Runner + "/gone"} {
			_, err = b.Tasks.Update(ctx, in.ID, takeOver(in, "node-c.1", late, from))
			wantErr(t, "a late take-over", err, cluster.ErrTaskRunner)
			if h := holder(t, b, live.Key); h != mine.Owner {
				t.Fatalf("claim after a late take-over (gone %q): held by %q, want %q", from, h, mine.Owner)
			}
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, in, 0))
		key := uniq("produce:task")
		claim := func() *cluster.TaskClaim {
			return &cluster.TaskClaim{Key: key, Owner: "node-b.1/" + uniq("c"), TTL: time.Minute}
		}
		other := in
		other.Runner = "node-z.9"
		_, err := b.Tasks.Update(ctx, in.ID, takeOver(other, "node-b.1", claim(), ""))
		wantErr(t, "a take-over of another runner", err, cluster.ErrTaskRunner)
		if h := holder(t, b, key); h != "" {
			t.Fatalf("claim of a take-over of another runner: held by %q, want none", h)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskCompleted, Result: []byte(`{}`)})
		must(t, "complete", err)
		_, err = b.Tasks.Update(ctx, in.ID, takeOver(in, "node-b.1", claim(), ""))
		wantErr(t, "a take-over of a terminal task", err, cluster.ErrTaskFinal)
		_, err = b.Tasks.Update(ctx, uniq("task"), takeOver(in, "node-b.1", claim(), ""))
		wantErr(t, "a take-over of an unknown task", err, cluster.ErrNotFound)
		if h := holder(t, b, key); h != "" {
			t.Fatalf("claim of refused take-overs: held by %q, want none", h)
		}
		c := claim()
		if _, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Take: c, Release: c}); err == nil {
			t.Fatal("an update that takes and releases a claim: got nil error")
		}
		if _, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Take: &cluster.TaskClaim{Key: key, Owner: "x"}}); err == nil {
			t.Fatal("a take without a ttl: got nil error")
		}
		if h := holder(t, b, key); h != "" {
			t.Fatalf("claim of invalid updates: held by %q, want none", h)
		}
	})
}
