package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// A producer's events go to a slow store in group commits: each is
// delivered once its batch is recorded (the history holds it when
// deliver runs), in order, with seqs that follow on; the stream's start
// is delivered once the stream is open; far fewer appends than events
// reach the store; and the flush runs once per batch, after its
// deliveries and before its waiters go on.
func TestProducerGroupCommits(t *testing.T) {
	var appends atomic.Int64
	be := memory.New(memory.Options{Fault: func(op string) error {
		if op == "Events.Append" {
			appends.Add(1)
			time.Sleep(2 * time.Millisecond) // a store some way off
		}
		return nil
	}})
	t.Cleanup(func() { _ = be.Close() })
	node := coordinator.NewNode(coordinator.Config{
		Backend: be, Waiters: coordinator.New("a", "inc", be.Bus, 0),
		Sessions: session.NewStore(be.Sessions, session.Options{TTL: time.Minute}),
		LeaseTTL: 3 * time.Second, HistoryTTL: time.Minute,
		Log: zerolog.Nop(), Metrics: telemetry.NewMetrics("a"),
	})
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close(errors.New("closed")); node.Leave() })

	ctx := t.Context()
	const sess, stream, events = "S1", "x1", 300
	var unflushed, flushes atomic.Int64
	p := node.Produce(sess, stream, "n:1", func() {
		unflushed.Store(0)
		flushes.Add(1)
	})
	errs := make(chan error, events+1)
	p.Start(func(err error) {
		if err == nil {
			_, _, err = be.Events.Read(ctx, sess, stream, 0)
		}
		if err != nil {
			errs <- fmt.Errorf("start: %w", err)
		}
	})
	var next uint64 = 1
	var last <-chan struct{}
	for i := 1; i <= events; i++ {
		data := fmt.Appendf(nil, "e%d", i)
		if got := p.Next(); got != uint64(i) {
			t.Fatalf("Next before event %d: %d", i, got)
		}
		last, _ = p.Add(data, i == events, func(seq uint64, err error) {
			if err != nil || seq != next {
				errs <- fmt.Errorf("event %s: seq %d, %v; want seq %d", data, seq, err, next)
				return
			}
			next++
			unflushed.Add(1)
			evs, _, err := be.Events.Read(ctx, sess, stream, seq-1)
			if err != nil || len(evs) == 0 || string(evs[0].Data) != string(data) {
				errs <- fmt.Errorf("event %s delivered before it was recorded (%v, %v)", data, evs, err)
			}
		})
	}
	select {
	case <-last:
	case <-time.After(10 * time.Second):
		t.Fatal("the last event was not delivered")
	}
	if n := unflushed.Load(); n != 0 {
		t.Errorf("%d events delivered and not flushed when the last was done", n)
	}
	if f, a := flushes.Load(), appends.Load(); f < a || f > a+1 {
		t.Errorf("%d flushes for %d appends (and the stream's open): want one per batch", f, a)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	evs, info, err := be.Events.Read(ctx, sess, stream, 0)
	if err != nil || len(evs) != events || !info.Done || info.Last != events {
		t.Fatalf("history: %d events, %+v, %v; want %d, done", len(evs), info, err, events)
	}
	if n := appends.Load(); n > events/10 {
		t.Errorf("%d appends for %d events: no group commit", n, events)
	}
	t.Logf("%d appends for %d events", appends.Load(), events)
	if _, err := be.Events.AppendBatch(ctx, sess, stream, [][]byte{nil}, false, cluster.Batch{}, cluster.Limits{}); err == nil {
		t.Error("an append after the final event succeeded")
	}
}

// replyLost is an event log whose appends are recorded but answered,
// while fail > 0, with ErrUnavailable: the store ran them and the reply
// was lost on the way back.
type replyLost struct {
	cluster.EventLog
	fail, tries atomic.Int64
}

func (r *replyLost) AppendBatch(ctx context.Context, session, stream string, data [][]byte, final bool, b cluster.Batch, lim cluster.Limits) (uint64, error) {
	r.tries.Add(1)
	first, err := r.EventLog.AppendBatch(ctx, session, stream, data, final, b, lim)
	if err == nil && r.fail.Add(-1) >= 0 {
		return 0, fmt.Errorf("reply lost: %w", cluster.ErrUnavailable)
	}
	return first, err
}

// producerNode starts a node on be whose producers retry for retry.
func producerNode(t *testing.T, be *cluster.Backend, retry time.Duration) *coordinator.Node {
	return startNode(t, be, func(c *coordinator.Config) { c.RecordRetry = retry })
}

// startNode starts a node on be (a lease of 3 s), with set's changes to
// its configuration; it is closed at the end of the test.
func startNode(t *testing.T, be *cluster.Backend, set func(*coordinator.Config)) *coordinator.Node {
	t.Helper()
	cfg := coordinator.Config{
		Backend: be, Waiters: coordinator.New("a", "inc", be.Bus, 0),
		Sessions: session.NewStore(be.Sessions, session.Options{TTL: time.Minute}),
		LeaseTTL: 3 * time.Second, HistoryTTL: time.Minute,
		Log: zerolog.Nop(), Metrics: telemetry.NewMetrics("a"),
	}
	set(&cfg)
	node := coordinator.NewNode(cfg)
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close(errors.New("closed")); node.Leave() })
	return node
}

// produceAll adds events e1..en (the last final) and returns what each
// deliver got: "seq" or "error", in delivery order.
func produceAll(t *testing.T, p *coordinator.Producer, n int) []string {
	t.Helper()
	var got []string
	var last <-chan struct{}
	for i := 1; i <= n; i++ {
		last, _ = p.Add(fmt.Appendf(nil, "e%d", i), i == n, func(seq uint64, err error) {
			if err != nil {
				got = append(got, "error")
				return
			}
			got = append(got, fmt.Sprint(seq))
		})
	}
	select {
	case <-last:
	case <-time.After(10 * time.Second):
		t.Fatal("the last event was not delivered")
	}
	return got
}

// failing returns a memory backend whose operation op fails with
// ErrUnavailable while the returned switch is on.
func failing(t *testing.T, op string) (*cluster.Backend, *atomic.Bool) {
	down := new(atomic.Bool)
	be := memory.New(memory.Options{Fault: func(name string) error {
		if name == op && down.Load() {
			return fmt.Errorf("down: %w", cluster.ErrUnavailable)
		}
		return nil
	}})
	t.Cleanup(func() { _ = be.Close() })
	return be, down
}

// A batch whose reply was lost is retried under its token: the retry
// finds it recorded, so every event is delivered once, in order, with
// the seq the history has, and the history holds each event once.
func TestProducerRetriesABatchWhoseReplyWasLost(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	lossy := &replyLost{EventLog: mem.Events}
	be := *mem
	be.Events = lossy
	node := producerNode(t, &be, 5*time.Second)
	lossy.fail.Store(3)
	p := node.Produce("S1", "x1", "n:1", nil)
	got := produceAll(t, p, 5)
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("delivered %v, want seqs 1..5", got)
	}
	evs, info, err := mem.Events.Read(t.Context(), "S1", "x1", 0)
	if err != nil || len(evs) != 5 || !info.Done {
		t.Fatalf("history %v %+v %v, want 5 events, done", evs, info, err)
	}
	for i, ev := range evs {
		if string(ev.Data) != fmt.Sprintf("e%d", i+1) {
			t.Errorf("history event %d: %q", i+1, ev.Data)
		}
	}
	if lossy.tries.Load() < 4 {
		t.Errorf("%d tries, want the lost replies retried", lossy.tries.Load())
	}
}

// Once a batch could not be recorded within RecordRetry, the stream
// ends at it: that batch and every later event fail, none is tried, even
// after the store answers again.
func TestProducerEndsAtTheFirstEventNotRecorded(t *testing.T) {
	mem, down := failing(t, "Events.Append")
	node := producerNode(t, mem, 100*time.Millisecond)
	p := node.Produce("S1", "x3", "n:3", nil)
	first, _ := p.Add([]byte("a"), false, func(uint64, error) {})
	<-first
	down.Store(true)
	var got []string
	done, _ := p.Add([]byte("b"), false, func(_ uint64, err error) { got = append(got, fmt.Sprint(err != nil)) })
	<-done
	down.Store(false)
	got = append(got, produceAll(t, p, 2)...)
	if fmt.Sprint(got) != "[true error error]" {
		t.Errorf("after the store failed past RecordRetry: %v, want every event failed", got)
	}
	evs, info, err := mem.Events.Read(t.Context(), "S1", "x3", 0)
	if err != nil || len(evs) != 1 || info.Done {
		t.Errorf("history %v %+v %v, want only the event before the failure", evs, info, err)
	}
}

// A node cut off from the store for longer than its lease was taken for
// gone by the others, which answered replies to it with 410: once its
// heartbeat gets through again, the server→client requests it was
// waiting for fail with ErrLeaseLapsed instead of waiting for a reply
// that was refused. A short hiccup fails nothing.
func TestLeaseLapseFailsPendingWaiters(t *testing.T) {
	be, down := failing(t, "Members.Heartbeat")
	const lease = 300 * time.Millisecond
	node := startNode(t, be, func(c *coordinator.Config) { c.LeaseTTL = lease })

	wait := func(w *coordinator.Waiter, within time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		_, err := w.Wait(ctx)
		return err
	}
	// The waiters' session is live (a vanished one fails its waiters).
	if err := be.Sessions.Create(t.Context(), "S1", map[string]string{"v": "1"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	short, err := node.Waiters.Register("S1", "", node.Waiters.NewID(), "post")
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	time.Sleep(lease / 2) // a missed heartbeat, within the lease
	down.Store(false)
	if err := wait(short, 2*lease); errors.Is(err, coordinator.ErrLeaseLapsed) {
		t.Fatalf("after a hiccup shorter than the lease: %v, want the waiter still waiting (until the wait's timeout)", err)
	}
	short.Cancel()

	w, err := node.Waiters.Register("S1", "", node.Waiters.NewID(), "post")
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	time.Sleep(2 * lease)
	down.Store(false)
	if err := wait(w, 5*time.Second); !errors.Is(err, coordinator.ErrLeaseLapsed) {
		t.Fatalf("after a cut longer than the lease: %v, want ErrLeaseLapsed", err)
	}
}

// A stream's start waits for its first event, so the two take one round
// trip however late the event comes; with no event, Sync opens the
// stream alone.
func TestProducerStartGoesWithTheFirstEvent(t *testing.T) {
	var mu sync.Mutex
	ops := map[string]int{}
	be := memory.New(memory.Options{Fault: func(op string) error {
		mu.Lock()
		ops[op]++
		mu.Unlock()
		return nil
	}})
	t.Cleanup(func() { _ = be.Close() })
	node := coordinator.NewNode(coordinator.Config{
		Backend: be, Waiters: coordinator.New("a", "inc", be.Bus, 0),
		Sessions: session.NewStore(be.Sessions, session.Options{TTL: time.Minute}),
		LeaseTTL: 3 * time.Second, HistoryTTL: time.Minute, Log: zerolog.Nop(),
	})
	count := func(op string) int {
		mu.Lock()
		defer mu.Unlock()
		return ops[op]
	}
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal(what)
		}
	}

	p := node.Produce("S1", "x1", "n:1", nil)
	p.Start(func(error) {})
	time.Sleep(20 * time.Millisecond) // time enough for a batch of the start alone
	done, _ := p.Add([]byte("e1"), true, func(uint64, error) {})
	wait(done, "the event was not delivered")
	if o, a := count("Events.Open"), count("Events.Append"); o != 0 || a != 1 {
		t.Fatalf("the start and the first event took %d opens and %d appends, want one append", o, a)
	}

	q := node.Produce("S1", "x2", "n:2", nil)
	started := make(chan struct{})
	q.Start(func(err error) {
		if err == nil {
			close(started)
		}
	})
	wait(q.Sync(), "Sync did not open the stream")
	wait(started, "the start was not delivered")
	if o := count("Events.Open"); o != 1 {
		t.Fatalf("Sync of a start alone: %d opens, want 1", o)
	}
}
