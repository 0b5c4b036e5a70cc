package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// tailResult is what a Tail running in the background produced.
type tailResult struct {
	seqs []uint64
	info cluster.StreamInfo
	err  error
}

// startTail runs cluster.TailWith in a goroutine and collects the seqs.
func startTail(ctx context.Context, log cluster.EventLog, sess, x string, after uint64, opts cluster.TailOptions) <-chan tailResult {
	out := make(chan tailResult, 1)
	go func() {
		var r tailResult
		r.info, r.err = cluster.TailWith(ctx, log, sess, x, after, opts, func(ev cluster.Event) error {
			r.seqs = append(r.seqs, ev.Seq)
			return nil
		})
		out <- r
	}()
	return out
}

func waitTail(t *testing.T, ch <-chan tailResult) tailResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("Tail did not return")
		return tailResult{}
	}
}

func (s *suite) testTail(t *testing.T) {
	t.Run("ExactlyOnceUnderConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		const workers, each = 6, 50
		for round := range 3 {
			sess, x := uniq("s"), uniq("x")
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
			// Some history before the tail starts, then appends racing with
			// its Follow and Read, then the final event.
			appendN(t, b, sess, x, 10*round, lim)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range workers {
				wg.Go(func() {
					<-start
					for i := range each {
						if _, err := b.Events.Append(ctx, sess, x, fmt.Appendf(nil, "%d", i), false, lim); err != nil {
							t.Errorf("Append: %v", err)
							return
						}
					}
				})
			}
			close(start)
			res := startTail(ctx, b.Events, sess, x, 0, cluster.TailOptions{})
			wg.Wait()
			last, err := b.Events.Append(ctx, sess, x, []byte("final"), true, lim)
			must(t, "Append final", err)
			r := waitTail(t, res)
			if r.err != nil {
				t.Fatalf("Tail: %v", r.err)
			}
			if !slices.Equal(r.seqs, span(1, last)) {
				t.Fatalf("Tail delivered %d events, not exactly 1..%d in order: %v", len(r.seqs), last, r.seqs)
			}
			if !r.info.Done || r.info.Last != last {
				t.Fatalf("Tail info: got %+v, want Done and Last %d", r.info, last)
			}
		}
	})

	t.Run("Resume", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		appendN(t, b, sess, x, 7, lim)
		res := startTail(ctx, b.Events, sess, x, 4, cluster.TailOptions{})
		appendN(t, b, sess, x, 2, lim)
		if _, err := b.Events.Append(ctx, sess, x, nil, true, lim); err != nil {
			t.Fatal(err)
		}
		r := waitTail(t, res)
		if r.err != nil || !slices.Equal(r.seqs, span(5, 10)) {
			t.Fatalf("Tail after 4: got %v, %v, want 5..10", r.seqs, r.err)
		}
		// A tail from the end of a finished stream returns at once.
		r = waitTail(t, startTail(ctx, b.Events, sess, x, 10, cluster.TailOptions{}))
		if r.err != nil || len(r.seqs) != 0 || !r.info.Done {
			t.Fatalf("Tail of a finished stream: got %v, %+v, %v", r.seqs, r.info, r.err)
		}
	})

	t.Run("StreamGone", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		must(t, "Create", b.Sessions.Create(ctx, sess, nil, time.Minute, 0, cluster.CreateOptions{}))
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		appendN(t, b, sess, x, 3, lim)
		// Poll is long: the tail must notice the End by itself.
		res := startTail(ctx, b.Events, sess, x, 0, cluster.TailOptions{Poll: time.Minute})
		time.Sleep(50 * time.Millisecond)
		began := time.Now()
		if _, err := b.Sessions.End(ctx, sess, cluster.EndOptions{}); err != nil {
			t.Fatal(err)
		}
		r := waitTail(t, res)
		if !errors.Is(r.err, cluster.ErrNotFound) {
			t.Fatalf("Tail of an ended session's stream: got %v, want ErrNotFound", r.err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("Tail took %v to notice the stream was gone", d)
		}
		if !slices.Equal(r.seqs, span(1, 3)) {
			t.Fatalf("Tail delivered %v before the End, want 1..3", r.seqs)
		}
	})

	t.Run("ErrorsAndCancel", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		appendN(t, b, sess, x, 3, lim)

		_, err := cluster.Tail(ctx, b.Events, uniq("other"), x, 0, func(cluster.Event) error { return nil })
		wantErr(t, "Tail by another session", err, cluster.ErrForbidden)
		_, err = cluster.Tail(ctx, b.Events, sess, uniq("none"), 0, func(cluster.Event) error { return nil })
		wantErr(t, "Tail of an unknown stream", err, cluster.ErrNotFound)

		stop := errors.New("client went away")
		var got []uint64
		_, err = cluster.Tail(ctx, b.Events, sess, x, 0, func(ev cluster.Event) error {
			got = append(got, ev.Seq)
			if ev.Seq == 2 {
				return stop
			}
			return nil
		})
		if err != stop || !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("Tail with a failing fn: got %v, %v, want [1 2], the fn's error", got, err)
		}

		tctx, cancel := context.WithCancel(ctx)
		res := startTail(tctx, b.Events, sess, x, 0, cluster.TailOptions{})
		time.Sleep(50 * time.Millisecond)
		cancel()
		r := waitTail(t, res)
		if !errors.Is(r.err, context.Canceled) || !slices.Equal(r.seqs, span(1, 3)) {
			t.Fatalf("Tail canceled: got %v, %v, want 1..3 and context.Canceled", r.seqs, r.err)
		}
	})

	t.Run("Evicted", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 3, MaxStreams: 10, TTL: time.Minute}
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
		appendN(t, b, sess, x, 8, l)
		_, err := cluster.Tail(ctx, b.Events, sess, x, 1, func(cluster.Event) error { return nil })
		wantErr(t, "Tail from a trimmed cursor", err, cluster.ErrEvicted)
	})
}
