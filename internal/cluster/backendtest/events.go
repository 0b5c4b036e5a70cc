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

// lim is a roomy default for tests that do not exercise the bounds.
var lim = cluster.Limits{MaxEvents: 1000, MaxStreams: 100, TTL: time.Minute}

// appendN appends n events "<prefix><i>" and fails on any error.
func appendN(t *testing.T, b *cluster.Backend, session, stream string, n int, l cluster.Limits) {
	t.Helper()
	for i := range n {
		if _, err := b.Events.Append(t.Context(), session, stream, fmt.Appendf(nil, "e%d", i), false, l); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

func seqs(evs []cluster.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func (s *suite) testEvents(t *testing.T) {
	t.Run("OpenAppendRead", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		meta := cluster.StreamMeta{Session: sess, Owner: "node-b", Request: `n:7`}
		must(t, "Open", b.Events.Open(ctx, x, meta, lim))
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		must(t, "Read of an empty stream", err)
		if len(evs) != 0 || info.Last != 0 || info.Done || info.StreamMeta != meta {
			t.Fatalf("Read of an empty stream: got %v, %+v", evs, info)
		}
		seq, err := b.Events.Append(ctx, sess, x, nil, false, lim) // priming event
		if err != nil || seq != 1 {
			t.Fatalf("Append priming: got %d, %v, want 1", seq, err)
		}
		seq, err = b.Events.Append(ctx, sess, x, []byte(`{"jsonrpc":"2.0"}`), false, lim)
		if err != nil || seq != 2 {
			t.Fatalf("Append: got %d, %v, want 2", seq, err)
		}
		seq, err = b.Events.Append(ctx, sess, x, []byte("bin\x00\xff:1:"), true, lim)
		if err != nil || seq != 3 {
			t.Fatalf("Append final: got %d, %v, want 3", seq, err)
		}
		evs, info, err = b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		want := []cluster.Event{
			{Seq: 1, Data: nil},
			{Seq: 2, Data: []byte(`{"jsonrpc":"2.0"}`)},
			{Seq: 3, Data: []byte("bin\x00\xff:1:"), Final: true},
		}
		if len(evs) != len(want) {
			t.Fatalf("Read: got %d events, want %d", len(evs), len(want))
		}
		for i := range want {
			if evs[i].Seq != want[i].Seq || string(evs[i].Data) != string(want[i].Data) || evs[i].Final != want[i].Final {
				t.Fatalf("Read event %d: got %+v, want %+v", i, evs[i], want[i])
			}
		}
		if info.Last != 3 || !info.Done || info.StreamMeta != meta {
			t.Fatalf("Read info: got %+v", info)
		}
		evs, _, err = b.Events.Read(ctx, sess, x, 2)
		if err != nil || !slices.Equal(seqs(evs), []uint64{3}) {
			t.Fatalf("Read after 2: got %v, %v", seqs(evs), err)
		}
		evs, _, err = b.Events.Read(ctx, sess, x, 3)
		if err != nil || len(evs) != 0 {
			t.Fatalf("Read after last: got %v, %v", seqs(evs), err)
		}
		evs, _, err = b.Events.Read(ctx, sess, x, 99)
		if err != nil || len(evs) != 0 {
			t.Fatalf("Read after a cursor past last: got %v, %v", seqs(evs), err)
		}
		if _, err := b.Events.Append(ctx, sess, x, []byte("late"), false, lim); err == nil {
			t.Fatalf("Append after final: got nil error")
		}
	})

	t.Run("Ownership", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, other, x := uniq("s"), uniq("other"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		must(t, "Open again", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		appendN(t, b, sess, x, 2, lim)
		wantErr(t, "Open by another session", b.Events.Open(ctx, x, cluster.StreamMeta{Session: other}, lim), cluster.ErrForbidden)
		_, _, err := b.Events.Read(ctx, other, x, 0)
		wantErr(t, "Read by another session", err, cluster.ErrForbidden)
		_, err = b.Events.Append(ctx, other, x, []byte("x"), false, lim)
		wantErr(t, "Append by another session", err, cluster.ErrForbidden)
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		if err != nil || len(evs) != 2 || info.Last != 2 {
			t.Fatalf("Read by owner after foreign attempts: got %v, %+v, %v", seqs(evs), info, err)
		}
		_, _, err = b.Events.Read(ctx, sess, uniq("unknown"), 0)
		wantErr(t, "Read of unknown stream", err, cluster.ErrNotFound)
		_, err = b.Events.Append(ctx, sess, uniq("unknown"), nil, false, lim)
		wantErr(t, "Append to unknown stream", err, cluster.ErrNotFound)
	})

	t.Run("TrimMaxEvents", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 5, MaxStreams: 10, TTL: time.Minute}
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
		appendN(t, b, sess, x, 12, l)
		for _, after := range []uint64{0, 1, 6} {
			_, _, err := b.Events.Read(ctx, sess, x, after)
			wantErr(t, fmt.Sprintf("Read after %d", after), err, cluster.ErrEvicted)
		}
		evs, info, err := b.Events.Read(ctx, sess, x, 7)
		if err != nil || !slices.Equal(seqs(evs), span(8, 12)) || info.Last != 12 {
			t.Fatalf("Read after 7: got %v, %+v, %v, want 8..12", seqs(evs), info, err)
		}
		if string(evs[0].Data) != "e7" {
			t.Fatalf("Read after 7: first data %q, want e7", evs[0].Data)
		}
		evs, _, err = b.Events.Read(ctx, sess, x, 10)
		if err != nil || !slices.Equal(seqs(evs), span(11, 12)) {
			t.Fatalf("Read after 10: got %v, %v", seqs(evs), err)
		}
		evs, _, err = b.Events.Read(ctx, sess, x, 12)
		if err != nil || len(evs) != 0 {
			t.Fatalf("Read after last of a trimmed stream: got %v, %v", seqs(evs), err)
		}
	})

	t.Run("LRUStreams", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 2, TTL: time.Minute}
		sess, other := uniq("s"), uniq("other")
		x1, x2, x3, x4 := uniq("x1"), uniq("x2"), uniq("x3"), uniq("x4")
		o1 := uniq("o1")
		// ended opens x and appends its final event.
		ended := func(x string) {
			t.Helper()
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
			if _, err := b.Events.Append(ctx, sess, x, []byte("final"), true, l); err != nil {
				t.Fatalf("final Append: %v", err)
			}
			time.Sleep(2 * time.Millisecond) // distinct use times for backends that score by clock
		}
		must(t, "Open", b.Events.Open(ctx, o1, cluster.StreamMeta{Session: other}, l))
		ended(x1)
		ended(x2)
		ended(x3)
		_, _, err := b.Events.Read(ctx, sess, x1, 0)
		wantErr(t, "Read of the LRU-evicted stream", err, cluster.ErrNotFound)
		for _, x := range []string{x2, x3} {
			if _, _, err := b.Events.Read(ctx, sess, x, 0); err != nil {
				t.Fatalf("Read of a kept stream: %v", err)
			}
		}
		ended(x4)
		_, _, err = b.Events.Read(ctx, sess, x2, 0)
		wantErr(t, "Read of the next LRU-evicted stream", err, cluster.ErrNotFound)
		evs, _, err := b.Events.Read(ctx, sess, x3, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Read of kept x3: got %v, %v", seqs(evs), err)
		}
		if _, _, err := b.Events.Read(ctx, other, o1, 0); err != nil {
			t.Fatalf("another session's stream was evicted: %v", err)
		}
	})

	// A stream that has not ended may have a live connection: the LRU
	// bound never takes it, however many streams the session uses after
	// it; once it ends it is evicted like any other.
	t.Run("LRUKeepsOpenStreams", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 3, TTL: time.Minute}
		sess := uniq("s")
		get, post := uniq("get"), uniq("post")
		must(t, "Open", b.Events.Open(ctx, get, cluster.StreamMeta{Session: sess}, l))
		appendN(t, b, sess, get, 1, l)
		must(t, "Open", b.Events.Open(ctx, post, cluster.StreamMeta{Session: sess, Owner: "n", Request: "1"}, l))
		appendN(t, b, sess, post, 1, l)
		var done []string
		for i := range 4 * l.MaxStreams {
			x := uniq(fmt.Sprintf("x%d", i))
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess, Owner: "n", Request: "2"}, l))
			if _, err := b.Events.Append(ctx, sess, x, []byte("final"), true, l); err != nil {
				t.Fatalf("final Append: %v", err)
			}
			done = append(done, x)
			time.Sleep(time.Millisecond)
		}
		for _, x := range []string{get, post} {
			if _, err := b.Events.Append(ctx, sess, x, []byte("live"), false, l); err != nil {
				t.Fatalf("Append to an open stream after %d others ended: %v", len(done), err)
			}
			evs, _, err := b.Events.Read(ctx, sess, x, 0)
			if err != nil || len(evs) != 2 {
				t.Fatalf("Read of an open stream: %v, %v; want 2 events", seqs(evs), err)
			}
		}
		kept := 0
		for _, x := range done {
			if _, _, err := b.Events.Read(ctx, sess, x, 0); err == nil {
				kept++
			}
		}
		if kept > l.MaxStreams {
			t.Errorf("%d ended streams kept, want at most MaxStreams = %d", kept, l.MaxStreams)
		}
		// Once ended, the POST stream is an ordinary LRU entry.
		if _, err := b.Events.Append(ctx, sess, post, []byte("final"), true, l); err != nil {
			t.Fatal(err)
		}
		for i := range l.MaxStreams + 1 {
			x := uniq(fmt.Sprintf("y%d", i))
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
			if _, err := b.Events.Append(ctx, sess, x, nil, true, l); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		_, _, err := b.Events.Read(ctx, sess, post, 0)
		wantErr(t, "Read of the ended, least recently used stream", err, cluster.ErrNotFound)
		if _, _, err := b.Events.Read(ctx, sess, get, 0); err != nil {
			t.Fatalf("the GET stream was evicted: %v", err)
		}
	})

	// A stream that ends is the most recently used, however long ago it
	// was opened: a client that lost a long call's connection can still
	// resume it after many short calls ran and ended during it.
	t.Run("LRUEndedLast", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 3, TTL: time.Minute}
		sess, long := uniq("s"), uniq("long")
		end := func(x string, open bool) {
			t.Helper()
			var meta *cluster.StreamMeta
			if open {
				meta = &cluster.StreamMeta{Session: sess, Owner: "n", Request: x}
			}
			if _, err := b.Events.AppendBatch(ctx, sess, x, [][]byte{[]byte("final")}, true, cluster.Batch{Open: meta}, l); err != nil {
				t.Fatalf("final AppendBatch: %v", err)
			}
			time.Sleep(2 * time.Millisecond) // distinct use times for backends that score by clock
		}
		if _, err := b.Events.AppendBatch(ctx, sess, long, [][]byte{[]byte("a")}, false, cluster.Batch{Open: &cluster.StreamMeta{Session: sess, Owner: "n", Request: "long"}}, l); err != nil {
			t.Fatal(err)
		}
		var short []string
		for i := range l.MaxStreams {
			short = append(short, uniq(fmt.Sprint("short", i)))
			end(short[i], true)
		}
		end(long, false)
		end(uniq("next"), true)
		if _, _, err := b.Events.Read(ctx, sess, long, 0); err != nil {
			t.Fatalf("the stream that ended last was evicted: %v", err)
		}
		_, _, err := b.Events.Read(ctx, sess, short[0], 0)
		wantErr(t, "Read of the stream that ended first", err, cluster.ErrNotFound)
	})

	t.Run("StreamTTL", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 10, TTL: time.Second}
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
		for range 6 { // appends slide the TTL
			time.Sleep(l.TTL / 5)
			appendN(t, b, sess, x, 1, l)
		}
		waitFor(t, 10*time.Second, "the stream to expire", func() bool {
			_, _, err := b.Events.Read(ctx, sess, x, 0)
			return errors.Is(err, cluster.ErrNotFound)
		})
		_, err := b.Events.Append(ctx, sess, x, nil, false, l)
		wantErr(t, "Append to an expired stream", err, cluster.ErrNotFound)
	})

	// SlideMany keeps idle streams' histories (and their events) alive
	// with no append, skips streams that do not exist (it creates
	// nothing), and once it stops the streams expire within their TTL.
	t.Run("SlideMany", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 10, TTL: time.Second}
		sess, other := uniq("s"), uniq("other")
		xs := []string{uniq("x"), uniq("x"), uniq("x")}
		refs := []cluster.StreamRef{{Session: sess, Stream: uniq("never")}}
		for _, x := range xs {
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
			appendN(t, b, sess, x, 2, l)
			refs = append(refs, cluster.StreamRef{Session: sess, Stream: x})
		}
		// Another session naming a stream slides nothing of it.
		must(t, "Open", b.Events.Open(ctx, "o"+xs[0], cluster.StreamMeta{Session: other}, l))
		refs = append(refs, cluster.StreamRef{Session: sess, Stream: "o" + xs[0]})
		for range 12 { // 3 TTLs
			time.Sleep(l.TTL / 4)
			must(t, "SlideMany", b.Events.SlideMany(ctx, refs, l.TTL))
		}
		for _, x := range xs {
			evs, info, err := b.Events.Read(ctx, sess, x, 0)
			if err != nil || info.Last != 2 || !slices.Equal(seqs(evs), span(1, 2)) {
				t.Fatalf("Read of a slid stream after 3 TTLs: %v, last %d, %v", seqs(evs), info.Last, err)
			}
		}
		_, _, err := b.Events.Read(ctx, sess, refs[0].Stream, 0)
		wantErr(t, "Read of a stream SlideMany named but nobody opened", err, cluster.ErrNotFound)
		_, _, err = b.Events.Read(ctx, other, "o"+xs[0], 0)
		wantErr(t, "Read of another session's stream after 3 TTLs", err, cluster.ErrNotFound)
		must(t, "SlideMany of nothing", b.Events.SlideMany(ctx, nil, l.TTL))
		start := time.Now()
		waitFor(t, 10*time.Second, "the streams to expire once no longer slid", func() bool {
			_, _, err := b.Events.Read(ctx, sess, xs[2], 0)
			return errors.Is(err, cluster.ErrNotFound)
		})
		if d := time.Since(start); d > l.TTL+500*time.Millisecond {
			t.Fatalf("a stream no longer slid lived %v, TTL %v", d, l.TTL)
		}
	})

	// Appends slide the stream's ownership with its history: a stream
	// older than its TTL, appended to meanwhile, is still refused to
	// another session (on Redis Cluster the owner record lives in
	// another slot than the stream).
	t.Run("OwnershipSlidesWithAppends", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		l := cluster.Limits{MaxEvents: 10, MaxStreams: 10, TTL: 800 * time.Millisecond}
		sess, other, x := uniq("s"), uniq("other"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, l))
		for range 12 {
			time.Sleep(l.TTL / 6)
			appendN(t, b, sess, x, 1, l)
		}
		_, _, err := b.Events.Read(ctx, other, x, 0)
		wantErr(t, "Read by another session after 2 TTLs of appends", err, cluster.ErrForbidden)
		wantErr(t, "Open by another session after 2 TTLs of appends", b.Events.Open(ctx, x, cluster.StreamMeta{Session: other}, l), cluster.ErrForbidden)
		if _, info, err := b.Events.Read(ctx, sess, x, 12); err != nil || info.Last != 12 {
			t.Fatalf("Read by the owner: last %d, %v", info.Last, err)
		}
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		const workers, each = 8, 40
		var mu sync.Mutex
		var got []uint64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					seq, err := b.Events.Append(ctx, sess, x, fmt.Appendf(nil, "%d/%d", w, i), false, lim)
					if err != nil {
						t.Errorf("Append: %v", err)
						return
					}
					mu.Lock()
					got = append(got, seq)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(got)
		if !slices.Equal(got, span(1, workers*each)) {
			t.Fatalf("seqs are not 1..%d without gaps or duplicates: %v", workers*each, got)
		}
		evs, info, err := b.Events.Read(ctx, sess, x, 0)
		if err != nil || !slices.Equal(seqs(evs), span(1, workers*each)) || info.Last != workers*each {
			t.Fatalf("Read: got %d events, %+v, %v", len(evs), info, err)
		}
	})

	t.Run("Follow", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		got := make(chan cluster.Event, 100)
		// Following a stream before it is opened is allowed.
		cancel, err := b.Events.Follow(ctx, sess, x, func(ev cluster.Event) {
			if ev.Seq != 0 { // Seq 0 is a re-read hint
				got <- ev
			}
		})
		must(t, "Follow", err)
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		// A follower reads after it follows (Tail does): from then on
		// every append reaches it.
		_, _, err = b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		appendN(t, b, sess, x, 5, lim)
		if _, err := b.Events.Append(ctx, sess, x, []byte("end"), true, lim); err != nil {
			t.Fatal(err)
		}
		for want := uint64(1); want <= 6; want++ {
			select {
			case ev := <-got:
				if ev.Seq != want {
					t.Fatalf("followed: got seq %d, want %d", ev.Seq, want)
				}
				if want == 6 && (!ev.Final || string(ev.Data) != "end") {
					t.Fatalf("followed final: got %+v", ev)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("timed out waiting for seq %d", want)
			}
		}
		cancel()
		cancel() // idempotent

		// After cancel, and after the follow context ends, nothing arrives.
		y := uniq("y")
		must(t, "Open", b.Events.Open(ctx, y, cluster.StreamMeta{Session: sess}, lim))
		fctx, fcancel := context.WithCancel(ctx)
		late := make(chan cluster.Event, 100)
		_, err = b.Events.Follow(fctx, sess, y, func(ev cluster.Event) { late <- ev })
		must(t, "Follow", err)
		stop2, err := b.Events.Follow(ctx, sess, y, func(ev cluster.Event) { late <- ev })
		must(t, "Follow", err)
		_, _, err = b.Events.Read(ctx, sess, y, 0)
		must(t, "Read", err)
		stop2()
		fcancel()
		time.Sleep(50 * time.Millisecond)
		appendN(t, b, sess, y, 3, lim)
		time.Sleep(100 * time.Millisecond)
		for len(late) > 0 {
			if ev := <-late; ev.Seq != 0 {
				t.Fatalf("event delivered after cancel: %+v", ev)
			}
		}
	})

	t.Run("FollowMany", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		sess, x := uniq("s"), uniq("x")
		must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: sess}, lim))
		const followers = 20
		var wg sync.WaitGroup
		counts := make([]chan uint64, followers)
		for i := range followers {
			counts[i] = make(chan uint64, 100)
			cancel, err := b.Events.Follow(ctx, sess, x, func(ev cluster.Event) {
				if ev.Seq != 0 {
					counts[i] <- ev.Seq
				}
			})
			must(t, "Follow", err)
			defer cancel()
		}
		_, _, err := b.Events.Read(ctx, sess, x, 0)
		must(t, "Read", err)
		appendN(t, b, sess, x, 10, lim)
		for i := range followers {
			wg.Go(func() {
				for want := uint64(1); want <= 10; want++ {
					select {
					case seq := <-counts[i]:
						if seq != want {
							t.Errorf("follower %d: got seq %d, want %d", i, seq, want)
							return
						}
					case <-time.After(5 * time.Second):
						t.Errorf("follower %d: timed out at seq %d", i, want)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}
