package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
)

var lim = cluster.Limits{MaxEvents: 10000, MaxStreams: 10, TTL: time.Minute}

// lossy returns a memory backend whose follow deliveries are dropped with
// probability p (a flaky bus), plus a switch to drop all of them.
func lossy(t *testing.T, p float64) (*cluster.Backend, *atomic.Bool) {
	var all atomic.Bool
	b := memory.New(memory.Options{Fault: func(op string) error {
		if op == "Events.deliver" && (all.Load() || rand.Float64() < p) {
			return errors.New("dropped")
		}
		return nil
	}})
	t.Cleanup(func() { _ = b.Close() })
	return b, &all
}

func collect(ctx context.Context, log cluster.EventLog, sess, x string, after uint64, opts cluster.TailOptions, slow time.Duration) ([]uint64, error) {
	var got []uint64
	_, err := cluster.TailWith(ctx, log, sess, x, after, opts, func(ev cluster.Event) error {
		got = append(got, ev.Seq)
		if slow > 0 {
			time.Sleep(slow)
		}
		return nil
	})
	return got, err
}

func upTo(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func TestTailLossyFollow(t *testing.T) {
	b, _ := lossy(t, 0.3)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim))
	done := make(chan []uint64, 1)
	errc := make(chan error, 1)
	go func() {
		got, err := collect(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Poll: 20 * time.Millisecond}, 0)
		done <- got
		errc <- err
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if _, err := b.Events.Append(ctx, "s", "x", fmt.Appendf(nil, "%d/%d", w, i), false, lim); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	last, err := b.Events.Append(ctx, "s", "x", nil, true, lim)
	must(err)
	select {
	case got := <-done:
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, upTo(last)) {
			t.Fatalf("got %d events, want exactly 1..%d in order", len(got), last)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Tail stalled on a lossy follow")
	}
}

func TestTailPollRecoversLostFinal(t *testing.T) {
	b, all := lossy(t, 0)
	ctx := t.Context()
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	var got []uint64
	go func() {
		var err error
		got, err = collect(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Poll: 30 * time.Millisecond}, 0)
		res <- err
	}()
	time.Sleep(20 * time.Millisecond)
	all.Store(true) // the bus loses everything from now on
	for i := range 3 {
		if _, err := b.Events.Append(ctx, "s", "x", nil, i == 2, lim); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-res:
		if err != nil || !slices.Equal(got, upTo(3)) {
			t.Fatalf("got %v, %v, want 1..3", got, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("poll did not recover the lost events")
	}
}

func TestTailSlowConsumerOverflow(t *testing.T) {
	b, _ := lossy(t, 0)
	ctx := t.Context()
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	var got []uint64
	go func() {
		var err error
		got, err = collect(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Poll: -1, Buffer: 2}, time.Millisecond)
		res <- err
	}()
	for i := range 100 {
		if _, err := b.Events.Append(ctx, "s", "x", nil, i == 99, lim); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-res:
		if err != nil || !slices.Equal(got, upTo(100)) {
			t.Fatalf("got %d events, %v, want 1..100", len(got), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Tail stalled after its buffer overflowed")
	}
}

// scripted is an EventLog whose Follow replays a fixed, misbehaving
// sequence of deliveries (duplicates, reordering, hints) on the first Read.
type scripted struct {
	events  []cluster.Event
	deliver []uint64 // seqs to deliver through Follow; 0 is a hint
	mu      sync.Mutex
	fn      func(cluster.Event)
	reads   int
}

func (s *scripted) Open(context.Context, string, cluster.StreamMeta, cluster.Limits) error {
	return nil
}

func (s *scripted) Append(context.Context, string, string, []byte, bool, cluster.Limits) (uint64, error) {
	return 0, errors.New("not supported")
}

func (s *scripted) SlideMany(context.Context, []cluster.StreamRef, time.Duration) error {
	return errors.New("not supported")
}

func (s *scripted) AppendBatch(context.Context, string, string, [][]byte, bool, cluster.Batch, cluster.Limits) (uint64, error) {
	return 0, errors.New("not supported")
}

// Read exposes the first half of the events on the first call and all of
// them afterwards, while Follow delivers a scrambled copy.
func (s *scripted) Read(_ context.Context, _, _ string, after uint64) ([]cluster.Event, cluster.StreamInfo, error) {
	s.mu.Lock()
	s.reads++
	n := len(s.events)
	if s.reads == 1 {
		n /= 2
		fn := s.fn
		go func() {
			for _, seq := range s.deliver {
				if seq == 0 {
					fn(cluster.Event{})
				} else {
					fn(s.events[seq-1])
				}
			}
		}()
	}
	s.mu.Unlock()
	var out []cluster.Event
	for _, ev := range s.events[:n] {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	info := cluster.StreamInfo{Last: uint64(n), Done: n == len(s.events)}
	return out, info, nil
}

func (s *scripted) Follow(_ context.Context, _, _ string, fn func(cluster.Event)) (func(), error) {
	s.mu.Lock()
	s.fn = fn
	s.mu.Unlock()
	return func() {}, nil
}

func TestTailScrambledDeliveries(t *testing.T) {
	for _, deliver := range [][]uint64{
		{1, 2, 3, 4, 5, 6, 7, 8},    // everything again, overlapping the read
		{5, 5, 6, 8, 7, 6, 8},       // duplicates and reordering
		{8},                         // only the final: a gap
		{0},                         // only a hint
		{6, 0, 7, 7, 2, 8, 8, 8, 8}, // a mix
	} {
		t.Run(fmt.Sprint(deliver), func(t *testing.T) {
			log := &scripted{deliver: deliver}
			for i := range 8 {
				log.events = append(log.events, cluster.Event{Seq: uint64(i + 1), Final: i == 7})
			}
			got, err := collect(t.Context(), log, "s", "x", 0, cluster.TailOptions{Poll: -1}, 0)
			if err != nil || !slices.Equal(got, upTo(8)) {
				t.Fatalf("got %v, %v, want 1..8 exactly once", got, err)
			}
		})
	}
}

// tailMergedFunc is TailMerged through TailMergedFunc.
func tailMergedFunc(ctx context.Context, log cluster.EventLog, srcs []cluster.TailSource, opts cluster.TailOptions, fn func(int, cluster.Event) error) error {
	res := make(chan error, 1)
	var in atomic.Int32
	cluster.TailMergedFunc(ctx, log, srcs, opts, func(i int, ev cluster.Event) error {
		if in.Add(1) != 1 {
			panic("TailMergedFunc called fn concurrently")
		}
		defer in.Add(-1)
		return fn(i, ev)
	}, func(err error) { res <- err })
	return <-res
}

// TailMerged over two streams on a lossy follow delivers each stream's
// events exactly once and in order, and ends after a final event; so
// does TailMergedFunc.
func TestTailMergedLossyFollow(t *testing.T) {
	t.Run("TailMerged", func(t *testing.T) { testTailMergedLossyFollow(t, cluster.TailMerged) })
	t.Run("TailMergedFunc", func(t *testing.T) { testTailMergedLossyFollow(t, tailMergedFunc) })
}

func testTailMergedLossyFollow(t *testing.T, tailMerged func(context.Context, cluster.EventLog, []cluster.TailSource, cluster.TailOptions, func(int, cluster.Event) error) error) {
	b, _ := lossy(t, 0.3)
	ctx := t.Context()
	for _, x := range []string{"x", "y"} {
		if err := b.Events.Open(ctx, x, cluster.StreamMeta{Session: "s"}, lim); err != nil {
			t.Fatal(err)
		}
	}
	// y has history before the tail starts, from after 3 on.
	for range 5 {
		if _, err := b.Events.Append(ctx, "s", "y", []byte("old"), false, lim); err != nil {
			t.Fatal(err)
		}
	}
	got := [2][]uint64{}
	res := make(chan error, 1)
	go func() {
		srcs := []cluster.TailSource{{Session: "s", Stream: "x"}, {Session: "s", Stream: "y", After: 3}}
		res <- tailMerged(ctx, b.Events, srcs, cluster.TailOptions{Poll: 20 * time.Millisecond}, func(i int, ev cluster.Event) error {
			got[i] = append(got[i], ev.Seq)
			return nil
		})
	}()
	var wg sync.WaitGroup
	for _, x := range []string{"x", "y"} {
		wg.Go(func() {
			for i := range 200 {
				if _, err := b.Events.Append(ctx, "s", x, fmt.Appendf(nil, "%d", i), false, lim); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := b.Events.Append(ctx, "s", "y", []byte("more"), false, lim); err != nil {
		t.Fatal(err)
	}
	last, err := b.Events.Append(ctx, "s", "x", nil, true, lim)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TailMerged stalled on a lossy follow")
	}
	if !slices.Equal(got[0], upTo(last)) {
		t.Fatalf("x: got %d events, want exactly 1..%d in order", len(got[0]), last)
	}
	// y's last events may be in flight when x's final ends the tail: the
	// ones delivered are unique and in order from 4.
	wantY := upTo(206)[3:]
	if len(got[1]) > len(wantY) || !slices.Equal(got[1], wantY[:len(got[1])]) {
		t.Fatalf("y: got %v, want a prefix of 4..206", got[1])
	}
}

// A stream lost and opened again under a tail (its last seq went back)
// ends the tail with ErrNotFound instead of hiding the new stream's
// events behind the cursor.
func TestTailEndsWhenTheStreamGoesBack(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	b := memory.New(memory.Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.Events.Append(ctx, "s", "x", []byte("a"), false, lim); err != nil {
			t.Fatal(err)
		}
	}
	res := make(chan error, 1)
	go func() {
		_, err := collect(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Poll: 20 * time.Millisecond}, 0)
		res <- err
	}()
	time.Sleep(50 * time.Millisecond) // the tail has read 1..3
	clock.Add(int64(2 * lim.TTL))
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.Append(ctx, "s", "x", []byte("new"), false, lim); err != nil {
		t.Fatal(err)
	}
	wantEnd(t, res, cluster.ErrNotFound, "the tail of a stream that went back")
}

// wantEnd waits for the error a tail ended with on res, and fails the
// test unless it is want.
func wantEnd(t *testing.T, res <-chan error, want error, what string) {
	t.Helper()
	select {
	case err := <-res:
		if !errors.Is(err, want) {
			t.Fatalf("%s ended with %v, want %v", what, err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// noFollow is an EventLog whose Follow fails.
type noFollow struct{ cluster.EventLog }

func (noFollow) Follow(context.Context, string, string, func(cluster.Event)) (func(), error) {
	return nil, errors.New("no follow")
}

func TestTailHead(t *testing.T) {
	b, _ := lossy(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	appendEv := func(x string, final bool) {
		t.Helper()
		_, err := b.Events.Append(ctx, "s", x, []byte("e"), final, lim)
		must(err)
	}
	headOf := func(x string, after uint64) *cluster.History {
		t.Helper()
		evs, info, err := b.Events.Read(ctx, "s", x, after)
		must(err)
		return &cluster.History{Events: evs, Info: info}
	}

	// The final event lands between the caller's Read and Follow: only
	// the read after following finds it (polling is off).
	must(b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim))
	for range 3 {
		appendEv("x", false)
	}
	head := headOf("x", 1)
	appendEv("x", true)
	got, err := collect(ctx, b.Events, "s", "x", 1, cluster.TailOptions{Poll: -1, Head: head}, 0)
	must(err)
	if !slices.Equal(got, []uint64{2, 3, 4}) {
		t.Fatalf("got %v, want [2 3 4]", got)
	}

	// A head that reaches the final event needs no Follow.
	must(b.Events.Open(ctx, "y", cluster.StreamMeta{Session: "s"}, lim))
	appendEv("y", false)
	appendEv("y", true)
	got, err = collect(ctx, noFollow{b.Events}, "s", "y", 0, cluster.TailOptions{Head: headOf("y", 0)}, 0)
	must(err)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("got %v, want [1 2]", got)
	}
	// Without a head, Follow comes first.
	if _, err := collect(ctx, noFollow{b.Events}, "s", "y", 0, cluster.TailOptions{}, 0); err == nil {
		t.Fatal("Tail without a head did not follow")
	}
}

// TailMergedFunc holds no goroutine of its own between deliveries, and
// ends with the context's error once its context ends; its end is called
// once, after the last fn.
func TestTailMergedFuncIdle(t *testing.T) {
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.Append(ctx, "s", "x", []byte("old"), false, lim); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	var got []uint64
	ended := make(chan error, 2)
	cluster.TailMergedFunc(ctx, b.Events, []cluster.TailSource{{Session: "s", Stream: "x"}}, cluster.TailOptions{}, func(_ int, ev cluster.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev.Seq)
		return nil
	}, func(err error) { ended <- err })
	seqs := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	if !slices.Equal(seqs(), []uint64{1}) {
		t.Fatalf("history delivered before TailMergedFunc returned: %v, want [1]", seqs())
	}
	for range 3 {
		if _, err := b.Events.Append(ctx, "s", "x", []byte("new"), false, lim); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(seqs(), upTo(4)) || runtime.NumGoroutine() > before+memoryFollowGoroutines {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %v, want 1..4; %d goroutines, %d before (the memory follow runs %d)", seqs(), runtime.NumGoroutine(), before, memoryFollowGoroutines)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wantEnd(t, ended, context.Canceled, "TailMergedFunc whose context ended")
	select {
	case err := <-ended:
		t.Fatalf("end called twice (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// memoryFollowGoroutines is the goroutines a Follow of the memory
// backend runs.
const memoryFollowGoroutines = 2

// Flush runs after each round of deliveries: once after a replayed
// history (before the tail follows, or returns at the final event), once
// per batch of followed events; its error ends the tail.
func TestTailFlushRounds(t *testing.T) {
	b, _ := lossy(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim))
	_, err := b.Events.AppendBatch(ctx, "s", "x", [][]byte{[]byte("a"), []byte("b"), []byte("c")}, false, cluster.Batch{}, lim)
	must(err)
	var mu sync.Mutex
	var rounds [][]uint64 // the events of each flush
	var cur []uint64
	flushed := make(chan struct{}, 10)
	opts := cluster.TailOptions{Poll: -1, Flush: func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(cur) > 0 {
			rounds, cur = append(rounds, cur), nil
			flushed <- struct{}{}
		}
		return nil
	}}
	done := make(chan error, 1)
	go func() {
		_, err := cluster.TailWith(ctx, b.Events, "s", "x", 0, opts, func(ev cluster.Event) error {
			mu.Lock()
			defer mu.Unlock()
			cur = append(cur, ev.Seq)
			return nil
		})
		done <- err
	}()
	<-flushed // the history
	_, err = b.Events.AppendBatch(ctx, "s", "x", [][]byte{[]byte("d"), []byte("e")}, true, cluster.Batch{}, lim)
	must(err)
	must(<-done)
	mu.Lock()
	if len(cur) != 0 || len(rounds) < 2 || !slices.Equal(rounds[0], []uint64{1, 2, 3}) || !slices.Equal(slices.Concat(rounds[1:]...), []uint64{4, 5}) {
		t.Fatalf("flushed rounds %v, unflushed %v; want [[1 2 3] [4 5]] (4 and 5 may come apart)", rounds, cur)
	}
	mu.Unlock()

	// A failing flush ends the tail with its error.
	boom := errors.New("broken pipe")
	_, err = cluster.TailWith(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Flush: func() error { return boom }}, func(cluster.Event) error { return nil })
	if !errors.Is(err, boom) {
		t.Fatalf("a failing flush: %v", err)
	}
	_, err = cluster.TailWith(ctx, b.Events, "s", "x", 0, cluster.TailOptions{Head: &cluster.History{}, Flush: func() error { return boom }}, func(cluster.Event) error { return nil })
	if !errors.Is(err, boom) {
		t.Fatalf("a failing flush after a head: %v", err)
	}
}
