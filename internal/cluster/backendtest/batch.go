package backendtest

import (
	"errors"
	"fmt"
	"strconv"
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
		if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("a")}, false, cluster.Batch{}, lim); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("batch to an unknown stream: %v, want ErrNotFound", err)
		}
		got := make(chan cluster.Event, 16)
		cancel, err := b.Events.Follow(ctx, sess, x, func(ev cluster.Event) { got <- ev })
		must(t, "Follow", err)
		defer cancel()
		meta := cluster.StreamMeta{Session: sess, Owner: "node-b", Request: "n:9"}
		first, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{nil, []byte("one")}, false, cluster.Batch{Open: &meta}, lim)
		if err != nil || first != 1 {
			t.Fatalf("opening batch: %d, %v; want 1", first, err)
		}
		if evs, _, err := b.Events.Read(ctx, sess, x, 0); err != nil || len(evs) != 2 {
			t.Fatalf("Read after the opening batch: %v, %v; want 2 events", evs, err)
		}
		first, err = b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("two"), []byte("three"), []byte("end")}, true, cluster.Batch{Open: &meta}, lim)
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
		if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("late")}, false, cluster.Batch{}, lim); err == nil {
			t.Error("a batch after the final event was appended")
		}
		other := cluster.StreamMeta{Session: uniq("s")}
		if _, err := b.Events.AppendBatch(ctx, other.Session, x, [][]byte{[]byte("x")}, false, cluster.Batch{Open: &other}, lim); !errors.Is(err, cluster.ErrForbidden) {
			t.Errorf("another session's opening batch: %v, want ErrForbidden", err)
		}
	})
}

// testBatchNextToken: a batch that names where it lands (Batch.Next) is
// refused with ErrDiverged anywhere else, and appends nothing; a retry
// of a recorded batch under its Token answers with the seq the first
// try got and appends nothing, even once the stream ended.
func (s *suite) testBatchNextToken(t *testing.T) {
	t.Run("BatchNextToken", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		meta := cluster.StreamMeta{Session: sess, Owner: "node-a", Request: "n:1"}
		if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("one")}, false, cluster.Batch{Open: &meta, Next: 2, Token: "t0"}, lim); !errors.Is(err, cluster.ErrDiverged) {
			t.Fatalf("opening batch at 2: %v, want ErrDiverged", err)
		}
		first, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("one"), []byte("two")}, false, cluster.Batch{Open: &meta, Next: 1, Token: "t1"}, lim)
		if err != nil || first != 1 {
			t.Fatalf("opening batch at 1: %d, %v; want 1", first, err)
		}
		first, err = b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("one"), []byte("two")}, false, cluster.Batch{Open: &meta, Next: 1, Token: "t1"}, lim)
		if err != nil || first != 1 {
			t.Fatalf("retried opening batch: %d, %v; want 1 again", first, err)
		}
		for _, next := range []uint64{2, 4} {
			if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("three")}, false, cluster.Batch{Next: next, Token: "t2"}, lim); !errors.Is(err, cluster.ErrDiverged) {
				t.Errorf("batch at %d after 2 events: %v, want ErrDiverged", next, err)
			}
		}
		first, err = b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("three")}, true, cluster.Batch{Next: 3, Token: "t2"}, lim)
		if err != nil || first != 3 {
			t.Fatalf("final batch at 3: %d, %v; want 3", first, err)
		}
		first, err = b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("three")}, true, cluster.Batch{Next: 3, Token: "t2"}, lim)
		if err != nil || first != 3 {
			t.Errorf("retried final batch: %d, %v; want 3 again", first, err)
		}
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		if len(evs) != 3 || info.Last != 3 || !info.Done {
			t.Errorf("history %v, %+v; want 3 events, done", evs, info)
		}
		if _, err := b.Events.AppendBatch(ctx, sess, uniq("x"), [][]byte{[]byte("a")}, false, cluster.Batch{Next: 1, Token: "t3"}, lim); !errors.Is(err, cluster.ErrNotFound) {
			t.Errorf("batch to an unknown stream: %v, want ErrNotFound", err)
		}
	})
}

// testBatchLateCopies: a copy of a recorded batch that names where it
// lands (a retry whose first try's reply was lost, arriving after later
// batches) appends nothing, however many batches followed it: it gets
// the seq its first try got, or ErrDiverged once the stream has moved
// on and its token is no longer kept. The latest batch's copy always
// gets its seq.
func (s *suite) testBatchLateCopies(t *testing.T) {
	t.Run("BatchLateCopies", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		meta := cluster.StreamMeta{Session: sess, Owner: "node-a", Request: "n:1"}
		const batches = 30
		token := func(i int) string { return fmt.Sprintf("%s#%040d", sess, i) }
		for i := range batches {
			bt := cluster.Batch{Next: uint64(i + 1), Token: token(i)}
			if i == 0 {
				bt.Open = &meta
			}
			if first, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte(strconv.Itoa(i))}, false, bt, lim); err != nil || first != uint64(i+1) {
				t.Fatalf("batch %d: %d, %v", i, first, err)
			}
		}
		for i := range batches {
			bt := cluster.Batch{Next: uint64(i + 1), Token: token(i)}
			first, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte(strconv.Itoa(i))}, false, bt, lim)
			switch {
			case err == nil && first == uint64(i+1):
			case errors.Is(err, cluster.ErrDiverged) && i < batches-1:
			default:
				t.Errorf("late copy of batch %d: %d, %v; want %d or ErrDiverged", i, first, err, i+1)
			}
		}
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		if len(evs) != batches || info.Last != batches {
			t.Errorf("history of %d events, last %d, after the late copies; want %d", len(evs), info.Last, batches)
		}
	})
}
