package backendtest

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func newTask(owner string, ttl time.Duration) cluster.Task {
	return cluster.Task{
		ID: uniq("task"), Owner: owner, OwnerKey: owner, Status: cluster.TaskWorking,
		TTL: ttl, PollInterval: 250 * time.Millisecond,
		Method: "tools/call", Params: []byte(`{"name":"x"}`), Meta: []byte(`{"v":1}`),
		Runner: "node-a.1", Attempt: 1, Idempotent: true,
	}
}

func (s *suite) testTasks(t *testing.T) {
	t.Run("CreateGet", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		_, err := b.Tasks.Get(ctx, in.ID)
		wantErr(t, "Get before Create", err, cluster.ErrNotFound)
		before := time.Now().Add(-time.Second)
		created, err := b.Tasks.Create(ctx, in, 0, nil)
		must(t, "Create", err)
		got, err := b.Tasks.Get(ctx, in.ID)
		must(t, "Get", err)
		if !reflect.DeepEqual(created, got) {
			t.Fatalf("Create returned %+v, Get read %+v", created, got)
		}
		if got.ID != in.ID || got.Owner != in.Owner || got.OwnerKey != in.OwnerKey || got.Status != cluster.TaskWorking ||
			got.TTL != in.TTL || got.PollInterval != in.PollInterval || got.Method != in.Method ||
			string(got.Params) != string(in.Params) || string(got.Meta) != string(in.Meta) ||
			got.Runner != in.Runner || got.Attempt != 1 || !got.Idempotent {
			t.Fatalf("Get: got %+v, want the created %+v", got, in)
		}
		if got.Created.Before(before) || got.Created.After(time.Now().Add(time.Second)) || !got.Updated.Equal(got.Created) {
			t.Fatalf("Get: created %v updated %v, want now and equal", got.Created, got.Updated)
		}
		if _, err := b.Tasks.Create(ctx, in, 0, nil); err == nil {
			t.Fatalf("Create of an existing id: got nil error")
		}
		must(t, "Delete", b.Tasks.Delete(ctx, in.ID))
		_, err = b.Tasks.Get(ctx, in.ID)
		wantErr(t, "Get after Delete", err, cluster.ErrNotFound)
		must(t, "Delete of an unknown id", b.Tasks.Delete(ctx, in.ID))
	})

	t.Run("ClaimReleaseAnnounce", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic, got := announcements(t, b)
		holder := func(key string) string {
			t.Helper()
			h, err := b.Claims.Holder(ctx, key)
			must(t, "Holder", err)
			return h
		}
		owner := uniq("owner")
		in := newTask(owner, time.Minute)
		claim := &cluster.TaskClaim{Key: uniq("produce:task"), Owner: uniq("holder"), TTL: time.Minute}
		_, err := b.Tasks.Create(ctx, in, 1, claim)
		must(t, "Create with a claim", err)
		if h := holder(claim.Key); h != claim.Owner {
			t.Fatalf("claim after Create: held by %q, want %q", h, claim.Owner)
		}
		// Refused creations take no claim.
		other := &cluster.TaskClaim{Key: uniq("produce:task"), Owner: uniq("holder"), TTL: time.Minute}
		if _, err := b.Tasks.Create(ctx, in, 0, other); err == nil {
			t.Fatal("Create of an existing id: got nil error")
		}
		_, err = b.Tasks.Create(ctx, newTask(owner, time.Minute), 1, other)
		wantErr(t, "Create past the owner's bound", err, cluster.ErrLimit)
		if h := holder(other.Key); h != "" {
			t.Fatalf("claim of a refused Create: held by %q, want none", h)
		}
		// Another holder's release leaves the claim; an update that fails
		// neither releases nor announces.
		notice := func(m string) *cluster.Notice { return &cluster.Notice{Topic: topic, Msg: []byte(m)} }
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Message: "m", Release: other, Announce: notice("first")})
		must(t, "Update releasing another's claim", err)
		if h := holder(claim.Key); h != claim.Owner {
			t.Fatalf("claim after another holder's release: held by %q, want %q", h, claim.Owner)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: "someone else", Status: cluster.TaskCompleted, Release: claim, Announce: notice("refused")})
		wantErr(t, "Update of another runner", err, cluster.ErrTaskRunner)
		if h := holder(claim.Key); h != claim.Owner {
			t.Fatalf("claim after a refused update: held by %q, want %q", h, claim.Owner)
		}
		rec, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: in.Runner, Status: cluster.TaskCompleted, Result: []byte(`{}`), Release: claim, Announce: notice("completed")})
		must(t, "Update releasing the claim", err)
		if rec.Status != cluster.TaskCompleted {
			t.Fatalf("status %q, want completed", rec.Status)
		}
		if h := holder(claim.Key); h != "" {
			t.Fatalf("claim after its release: held by %q, want none", h)
		}
		wantAnnounced(t, got, "first", "completed")
	})

	t.Run("Transitions", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, in, 0))
		got, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskInputRequired, Message: "waiting"})
		must(t, "to input_required", err)
		if got.Status != cluster.TaskInputRequired || got.Message != "waiting" {
			t.Fatalf("status %q message %q, want input_required waiting", got.Status, got.Message)
		}
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskWorking})
		must(t, "back to working", err)
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskCompleted, Result: []byte(`{"ok":1}`)})
		must(t, "to completed", err)
		if got.Status != cluster.TaskCompleted || string(got.Result) != `{"ok":1}` {
			t.Fatalf("completed: got %q %s", got.Status, got.Result)
		}
		for _, to := range []string{cluster.TaskWorking, cluster.TaskFailed, cluster.TaskCancelled, cluster.TaskCompleted, cluster.TaskInputRequired} {
			_, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: to})
			wantErr(t, "terminal to "+to, err, cluster.ErrTaskFinal)
		}
		r := "node-b.1"
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{SetRunner: &r, NextAttempt: true})
		wantErr(t, "a new run of a terminal task", err, cluster.ErrTaskFinal)
		got, err = b.Tasks.Get(ctx, in.ID)
		must(t, "Get", err)
		if got.Status != cluster.TaskCompleted || string(got.Result) != `{"ok":1}` || got.Attempt != 1 {
			t.Fatalf("after refused changes: got %q %s attempt %d", got.Status, got.Result, got.Attempt)
		}

		failed := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, failed, 0))
		got, err = b.Tasks.Update(ctx, failed.ID, cluster.TaskUpdate{Status: cluster.TaskFailed, Message: "boom", Error: []byte(`{"code":-32603}`)})
		must(t, "to failed", err)
		if got.Status != cluster.TaskFailed || string(got.Error) != `{"code":-32603}` || len(got.Result) != 0 {
			t.Fatalf("failed: got %q error %s result %s", got.Status, got.Error, got.Result)
		}
	})

	t.Run("Runner", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, in, 0))
		_, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: "node-z.9", Status: cluster.TaskFailed})
		wantErr(t, "IfRunner of another runner", err, cluster.ErrTaskRunner)
		next := "node-b.2"
		got, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: in.Runner, SetRunner: &next, NextAttempt: true})
		must(t, "take over", err)
		if got.Runner != next || got.Attempt != 2 || got.Status != cluster.TaskWorking {
			t.Fatalf("take over: runner %q attempt %d status %q", got.Runner, got.Attempt, got.Status)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: in.Runner, SetRunner: &next, NextAttempt: true})
		wantErr(t, "a second take-over from the old runner", err, cluster.ErrTaskRunner)
		// A new run drops the pending requests of the old one, whose keys
		// stay used.
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"old": []byte(`{}`)}})
		must(t, "AddInputs", err)
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{IfRunner: next, ClearInputs: true, Status: cluster.TaskWorking})
		must(t, "ClearInputs", err)
		if got.Status != cluster.TaskWorking || len(got.Inputs) != 0 {
			t.Fatalf("after ClearInputs: status %q inputs %v", got.Status, got.Inputs)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"old": []byte(`{}`)}})
		wantErr(t, "a cleared key asked again", err, cluster.ErrTaskKey)
	})

	t.Run("Inputs", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, in, 0))
		got, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"a": []byte(`{"method":"elicitation/create"}`), "b": []byte(`{}`)}})
		must(t, "AddInputs", err)
		if got.Status != cluster.TaskInputRequired || len(got.Inputs) != 2 {
			t.Fatalf("after AddInputs: status %q inputs %v", got.Status, got.Inputs)
		}
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Respond: map[string][]byte{"a": []byte(`{"action":"accept"}`), "zz": []byte(`{}`)}})
		must(t, "Respond a", err)
		if got.Status != cluster.TaskInputRequired || !slices.Equal(sorted(slices.Collect(maps.Keys(got.Inputs))), []string{"b"}) ||
			string(got.Responses["a"]) != `{"action":"accept"}` || len(got.Responses) != 1 {
			t.Fatalf("after a partial response: status %q inputs %v responses %v", got.Status, got.Inputs, got.Responses)
		}
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Respond: map[string][]byte{"b": []byte(`{"action":"decline"}`)}})
		must(t, "Respond b", err)
		if got.Status != cluster.TaskWorking || len(got.Inputs) != 0 || len(got.Responses) != 2 {
			t.Fatalf("after every response: status %q inputs %v responses %v", got.Status, got.Inputs, got.Responses)
		}
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Consume: []string{"a", "b"}})
		must(t, "Consume", err)
		if len(got.Responses) != 0 {
			t.Fatalf("after Consume: responses %v", got.Responses)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"a": []byte(`{}`)}})
		wantErr(t, "a key used before", err, cluster.ErrTaskKey)
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"c": []byte(`{}`)}})
		must(t, "AddInputs c", err)
		got, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskCancelled})
		must(t, "cancel", err)
		if got.Status != cluster.TaskCancelled || len(got.Inputs) != 0 {
			t.Fatalf("cancelled: status %q inputs %v", got.Status, got.Inputs)
		}
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{AddInputs: map[string][]byte{"d": []byte(`{}`)}})
		wantErr(t, "AddInputs to a terminal task", err, cluster.ErrTaskFinal)
	})

	t.Run("OwnerBound", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		owner := uniq("owner")
		for range 2 {
			must(t, "Create", create(ctx, b, newTask(owner, 300*time.Millisecond), 2))
		}
		_, err := b.Tasks.Create(ctx, newTask(owner, time.Minute), 2, nil)
		wantErr(t, "Create past the owner's bound", err, cluster.ErrLimit)
		must(t, "another owner", create(ctx, b, newTask(uniq("other"), time.Minute), 2))
		waitFor(t, 5*time.Second, "the owner's tasks to expire", func() bool {
			return create(ctx, b, newTask(owner, time.Minute), 2) == nil
		})
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), 150*time.Millisecond)
		must(t, "Create", create(ctx, b, in, 0))
		// Updates do not slide the TTL: it counts from creation.
		_, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskCompleted, Result: []byte(`{}`)})
		must(t, "complete", err)
		waitFor(t, 5*time.Second, "the task to expire", func() bool {
			_, err := b.Tasks.Get(ctx, in.ID)
			return errors.Is(err, cluster.ErrNotFound)
		})
		_, err = b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskFailed})
		wantErr(t, "Update of an expired task", err, cluster.ErrNotFound)
	})
}

// testTaskList checks List: only the records of one owner under an owner
// key, in pages that neither drop nor repeat, and a failed task that
// keeps its result.
func (s *suite) testTaskList(t *testing.T) {
	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		key := uniq("addr")
		want := map[string]bool{}
		for i := range 7 {
			in := newTask("mine", time.Minute)
			in.OwnerKey = key
			if i%3 == 0 {
				in.Owner = "other"
			} else {
				want[in.ID] = true
			}
			must(t, "Create", create(ctx, b, in, 0))
		}
		got := map[string]bool{}
		cursor, pages := "", 0
		for {
			page, next, err := b.Tasks.List(ctx, key, "mine", cursor, 2)
			must(t, "List", err)
			pages++
			for _, tk := range page {
				if tk.Owner != "mine" || got[tk.ID] {
					t.Fatalf("List page %d: got %s of %q (seen before: %v)", pages, tk.ID, tk.Owner, got[tk.ID])
				}
				got[tk.ID] = true
			}
			if next == "" {
				break
			}
			if pages > 10 {
				t.Fatalf("List: more than 10 pages of 2 for 4 records")
			}
			cursor = next
		}
		if !maps.Equal(got, want) {
			t.Fatalf("List: got %v, want %v", got, want)
		}
		if page, _, err := b.Tasks.List(ctx, key, "nobody", "", 10); err != nil || len(page) != 0 {
			t.Fatalf("List of another owner: got %v, %v; want none", page, err)
		}
		_, _, err := b.Tasks.List(ctx, key, "mine", "garbage", 10)
		wantErr(t, "List with a bad cursor", err, cluster.ErrBadCursor)
	})

	t.Run("FailedKeepsResult", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		in := newTask(uniq("owner"), time.Minute)
		must(t, "Create", create(ctx, b, in, 0))
		got, err := b.Tasks.Update(ctx, in.ID, cluster.TaskUpdate{Status: cluster.TaskFailed, Message: "tool error",
			Result: []byte(`{"isError":true}`), Error: []byte(`{"code":-32603}`)})
		must(t, "to failed", err)
		if got, err = b.Tasks.Get(ctx, in.ID); err != nil || got.Status != cluster.TaskFailed ||
			string(got.Result) != `{"isError":true}` || string(got.Error) != `{"code":-32603}` {
			t.Fatalf("Get: got %+v, %v; want failed with its result and error", got, err)
		}
	})

	t.Run("RunIndex", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		runner, other := uniq("runner"), uniq("runner")
		a, c := newTask(uniq("owner"), time.Minute), newTask(uniq("owner"), time.Minute)
		a.Runner, c.Runner = runner, runner
		must(t, "Create a", create(ctx, b, a, 0))
		must(t, "Create c", create(ctx, b, c, 0))
		ids, err := b.Tasks.RunnerTasks(ctx, runner, 0)
		must(t, "RunnerTasks", err)
		slices.Sort(ids)
		if want := []string{a.ID, c.ID}; !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
			t.Fatalf("RunnerTasks: got %v, want %v", ids, want)
		}
		if ids, err := b.Tasks.RunnerTasks(ctx, runner, 1); err != nil || len(ids) != 1 {
			t.Fatalf("RunnerTasks limit 1: got %v, %v", ids, err)
		}
		rs, err := b.Tasks.Runners(ctx, 0)
		must(t, "Runners", err)
		if !slices.Contains(rs, runner) {
			t.Fatalf("Runners: got %v, want %q among them", rs, runner)
		}
		_, err = b.Tasks.Update(ctx, a.ID, cluster.TaskUpdate{IfRunner: runner, SetRunner: &other, NextAttempt: true})
		must(t, "take over", err)
		if ids, err := b.Tasks.RunnerTasks(ctx, other, 0); err != nil || !slices.Equal(ids, []string{a.ID}) {
			t.Fatalf("RunnerTasks of the new runner: got %v, %v; want [%s]", ids, err, a.ID)
		}
		must(t, "Unindex", b.Tasks.Unindex(ctx, runner, []string{a.ID, c.ID}))
		if ids, err := b.Tasks.RunnerTasks(ctx, runner, 0); err != nil || len(ids) != 0 {
			t.Fatalf("RunnerTasks after Unindex: got %v, %v; want none", ids, err)
		}
		rs, err = b.Tasks.Runners(ctx, 0)
		must(t, "Runners", err)
		if slices.Contains(rs, runner) || !slices.Contains(rs, other) {
			t.Fatalf("Runners after Unindex: got %v, want %q and not %q", rs, other, runner)
		}
	})
}

// create records t and returns Create's error only.
func create(ctx context.Context, b *cluster.Backend, t cluster.Task, max int) error {
	_, err := b.Tasks.Create(ctx, t, max, nil)
	return err
}
