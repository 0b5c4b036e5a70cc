package backendtest

import (
	"errors"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// testAppendBatch: a batch opens its stream when asked, takes seqs
// without a gap, reaches followers (once they read) in order, and ends
// the stream with a final last event.
func (s *suite) testAppendBatch(t *testing.T) {
	t.Run("AppendBatch", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("a")}, false, nil, lim); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("batch to an unknown stream: %v, want ErrNotFound", err)
		}
		got := make(chan cluster.Event, 16)
		cancel, err := b.Events.Follow(ctx, x, func(ev cluster.Event) { got <- ev })
		must(t, "Follow", err)
		defer cancel()
		meta := cluster.StreamMeta{Session: sess, Owner: "node-b", Request: "n:9"}
		first, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{nil, []byte("one")}, false, &meta, lim)
		if err != nil || first != 1 {
			t.Fatalf("opening batch: %d, %v; want 1", first, err)
		}
		if evs, _, err := b.Events.Read(ctx, sess, x, 0); err != nil || len(evs) != 2 {
			t.Fatalf("Read after the opening batch: %v, %v; want 2 events", evs, err)
		}
		first, err = b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("two"), []byte("three"), []byte("end")}, true, &meta, lim)
		if err != nil || first != 3 {
			t.Fatalf("final batch: %d, %v; want 3", first, err)
		}
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		want := []string{"", "one", "two", "three", "end"}
		if len(evs) != len(want) || info.Last != 5 || !info.Done || info.StreamMeta != meta {
			t.Fatalf("history %v, %+v; want 5 events, done, meta %+v", evs, info, meta)
		}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) || string(ev.Data) != want[i] || ev.Final != (i == 4) || (i == 0) != (ev.Data == nil) {
				t.Errorf("event %d: %+v, want seq %d data %q", i, ev, i+1, want[i])
			}
		}
		// The events of the batch before the Read may reach the
		// follower or not; those after it do, in order.
		for i := 2; i < len(want); i++ {
			ev := <-got
			for ev.Seq <= 2 {
				ev = <-got
			}
			if ev.Seq != uint64(i+1) || string(ev.Data) != want[i] || ev.Final != (i == 4) {
				t.Fatalf("followed event %d: %+v, want seq %d data %q", i, ev, i+1, want[i])
			}
		}
		if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("late")}, false, nil, lim); err == nil {
			t.Error("a batch after the final event was appended")
		}
		other := cluster.StreamMeta{Session: uniq("s")}
		if _, err := b.Events.AppendBatch(ctx, other.Session, x, [][]byte{[]byte("x")}, false, &other, lim); !errors.Is(err, cluster.ErrForbidden) {
			t.Errorf("another session's opening batch: %v, want ErrForbidden", err)
		}
	})
}
