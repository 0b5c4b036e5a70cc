package memory_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/backendtest"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
)

func TestContract(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) *cluster.Backend {
		return newBackend(t, memory.Options{SweepInterval: 5 * time.Millisecond})
	})
}

// clock is a manual clock for expiry tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newBackend(t *testing.T, opts memory.Options) *cluster.Backend {
	t.Helper()
	b := memory.New(opts)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestSessionSlidingExpiryWithClock(t *testing.T) {
	clk := newClock()
	b := newBackend(t, memory.Options{Now: clk.Now, SweepInterval: -1})
	ctx := t.Context()
	if err := b.Sessions.Create(ctx, "s1", map[string]string{"a": "1"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(50 * time.Second)
	if _, err := b.Sessions.Load(ctx, "s1", time.Minute, ""); err != nil {
		t.Fatalf("Load before expiry: %v", err)
	}
	clk.Advance(50 * time.Second) // 100s after create, 50s after the slide
	if err := b.Sessions.Touch(ctx, "s1", time.Minute); err != nil {
		t.Fatalf("Touch after slide: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := b.Sessions.Load(ctx, "s1", time.Minute, ""); !errors.Is(err, cluster.ErrNotFound) {
		t.Fatalf("Load after expiry: got %v, want ErrNotFound", err)
	}
	if n, _ := b.Sessions.Count(ctx); n != 0 {
		t.Fatalf("Count: got %d, want 0", n)
	}
}

func TestSweepReclaimsExpired(t *testing.T) {
	clk := newClock()
	b := newBackend(t, memory.Options{Now: clk.Now, SweepInterval: time.Millisecond})
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		if err := b.Sessions.Create(ctx, id, nil, time.Second, 3, cluster.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sessions.Create(ctx, "d", nil, time.Second, 3, cluster.CreateOptions{}); !errors.Is(err, cluster.ErrLimit) {
		t.Fatalf("Create past cap: got %v, want ErrLimit", err)
	}
	clk.Advance(2 * time.Second)
	time.Sleep(20 * time.Millisecond) // let the sweeper run a few times
	if err := b.Sessions.Create(ctx, "d", nil, time.Second, 3, cluster.CreateOptions{}); err != nil {
		t.Fatalf("Create after expiry: %v", err)
	}
}

func TestFaultHook(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	failing := ""
	b := newBackend(t, memory.Options{Fault: func(op string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == failing {
			return boom
		}
		return nil
	}})
	ctx := t.Context()
	mu.Lock()
	failing = "Sessions.Create"
	mu.Unlock()
	if err := b.Sessions.Create(ctx, "s", nil, time.Minute, 0, cluster.CreateOptions{}); !errors.Is(err, boom) {
		t.Fatalf("Create: got %v, want injected fault", err)
	}
	mu.Lock()
	failing = ""
	mu.Unlock()
	if err := b.Sessions.Create(ctx, "s", nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A view shares the backend's state and adds a fault hook of its own:
// it fails the view's operations and drops the deliveries to the
// subscribers and followers made through it, and nothing else.
func TestViewFaultHook(t *testing.T) {
	boom := errors.New("boom")
	var down atomic.Bool
	b := newBackend(t, memory.Options{})
	v, ok := memory.View(b, func(string) error {
		if down.Load() {
			return boom
		}
		return nil
	})
	if !ok {
		t.Fatal("View of a memory backend: not ok")
	}
	if _, ok := memory.View(&cluster.Backend{}, nil); ok {
		t.Fatal("View of another backend: ok")
	}
	chained, _ := memory.View(v, nil)
	ctx := t.Context()
	lim := cluster.Limits{TTL: time.Minute}
	if err := b.Sessions.Create(ctx, "s", map[string]string{"a": "1"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Sessions.Load(ctx, "s", time.Minute, ""); err != nil || got["a"] != "1" {
		t.Fatalf("Load through the view: %v, %v", got, err)
	}
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	viaB, viaV := make(chan uint64, 4), make(chan uint64, 4)
	for be, ch := range map[*cluster.Backend]chan uint64{b: viaB, v: viaV} {
		stop, err := be.Events.Follow(ctx, "s", "x", func(ev cluster.Event) { ch <- ev.Seq })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		stop, err = be.Bus.Subscribe(ctx, "topic", func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	if n, err := b.Bus.Publish(ctx, "topic", []byte("m")); err != nil || n != 2 {
		t.Fatalf("Publish: %d receivers, %v; want 2", n, err)
	}
	if _, err := b.Events.Append(ctx, "s", "x", []byte("1"), false, lim); err != nil {
		t.Fatal(err)
	}
	if <-viaB != 1 || <-viaV != 1 {
		t.Fatal("event 1 not followed through both")
	}

	down.Store(true)
	for name, be := range map[string]*cluster.Backend{"view": v, "view of the view": chained} {
		if _, err := be.Sessions.Load(ctx, "s", time.Minute, ""); !errors.Is(err, boom) {
			t.Fatalf("Load through the %s: got %v, want the view's fault", name, err)
		}
		if _, err := be.Tasks.Get(ctx, "t"); !errors.Is(err, boom) {
			t.Fatalf("Tasks.Get through the %s: got %v, want the view's fault", name, err)
		}
		if err := be.Ping(ctx); !errors.Is(err, boom) {
			t.Fatalf("Ping through the %s: got %v, want the view's fault", name, err)
		}
	}
	if _, err := b.Sessions.Load(ctx, "s", time.Minute, ""); err != nil {
		t.Fatalf("Load through the backend: %v", err)
	}
	if n, err := b.Bus.Publish(ctx, "topic", []byte("m")); err != nil || n != 1 {
		t.Fatalf("Publish with the view down: %d receivers, %v; want 1", n, err)
	}
	if _, err := b.Events.Append(ctx, "s", "x", []byte("2"), false, lim); err != nil {
		t.Fatal(err)
	}
	if <-viaB != 2 {
		t.Fatal("event 2 not followed through the backend")
	}
	select {
	case seq := <-viaV: // the drop is decided as Append queues the event
		t.Fatalf("event %d followed through the view that is down", seq)
	default:
	}

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping after the view closed: %v", err)
	}
	_ = b.Close()
	down.Store(false)
	if err := v.Ping(ctx); !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("view of a closed backend: got %v, want ErrUnavailable", err)
	}
}

func TestClosedBackendUnavailable(t *testing.T) {
	b := memory.New(memory.Options{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(t.Context()); !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("Ping after Close: got %v, want ErrUnavailable", err)
	}
}

func TestEventsBasic(t *testing.T) {
	b := newBackend(t, memory.Options{})
	ctx := t.Context()
	lim := cluster.Limits{MaxEvents: 3, MaxStreams: 2, TTL: time.Minute}
	if err := b.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	got := make(chan cluster.Event, 10)
	cancel, err := b.Events.Follow(ctx, "s", "x", func(ev cluster.Event) { got <- ev })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for i := 1; i <= 5; i++ {
		seq, err := b.Events.Append(ctx, "s", "x", []byte{byte('0' + i)}, i == 5, lim)
		if err != nil || seq != uint64(i) {
			t.Fatalf("Append %d: got %d, %v", i, seq, err)
		}
	}
	for i := 1; i <= 5; i++ {
		if ev := <-got; ev.Seq != uint64(i) {
			t.Fatalf("followed: got seq %d, want %d", ev.Seq, i)
		}
	}
	if _, _, err := b.Events.Read(ctx, "s", "x", 0); !errors.Is(err, cluster.ErrEvicted) {
		t.Fatalf("Read(0): got %v, want ErrEvicted", err)
	}
	evs, info, err := b.Events.Read(ctx, "s", "x", 2)
	if err != nil || len(evs) != 3 || !info.Done || info.Last != 5 || !evs[2].Final {
		t.Fatalf("Read(2): got %v %+v %v", evs, info, err)
	}
	if _, _, err := b.Events.Read(ctx, "other", "x", 2); !errors.Is(err, cluster.ErrForbidden) {
		t.Fatalf("Read by other session: got %v, want ErrForbidden", err)
	}
}

// TestCloseStopsGoroutines checks that idle followers and subscribers
// hold no goroutine (one delivers only while events are queued), and
// that Close ends the sweeper and the deliveries.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	b := memory.New(memory.Options{SweepInterval: time.Millisecond})
	ctx := t.Context()
	for i := range 50 {
		if _, err := b.Events.Follow(ctx, "s", fmt.Sprint("x", i), func(cluster.Event) {}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Bus.Subscribe(ctx, fmt.Sprint("t", i), func([]byte) {}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan struct{}, 1)
	if _, err := b.Events.Follow(ctx, "s", "y", func(cluster.Event) { got <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	lim := cluster.Limits{MaxEvents: 10, MaxStreams: 10, TTL: time.Minute}
	if err := b.Events.Open(ctx, "y", cluster.StreamMeta{Session: "s"}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.Append(ctx, "s", "y", []byte("e"), false, lim); err != nil {
		t.Fatal(err)
	}
	<-got
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 { // the sweeper
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with 101 idle listeners, want 1 (the sweeper)", runtime.NumGoroutine()-before)
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Close", runtime.NumGoroutine()-before)
		}
		time.Sleep(time.Millisecond)
	}
}

// The limiter's buckets and sets are bounded by MaxKeys; a bucket that
// refilled and a set whose leases ended make room again.
func TestLimiterKeysBounded(t *testing.T) {
	clk := newClock()
	b := newBackend(t, memory.Options{Now: clk.Now, MaxKeys: 2, SweepInterval: -1})
	ctx := t.Context()
	if _, err := b.Limiter.Take(ctx, []cluster.Debit{{Key: "a", N: 1, Rate: 1, Burst: 1}}); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := b.Limiter.Acquire(ctx, "set", "m", time.Second, 1); err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	if _, err := b.Limiter.Take(ctx, []cluster.Debit{{Key: "b", N: 1, Rate: 1, Burst: 1}}); !errors.Is(err, cluster.ErrLimit) {
		t.Fatalf("a third key past MaxKeys 2: got %v, want ErrLimit", err)
	}
	clk.Advance(2 * time.Second) // "a" is full again, the lease of "m" ended
	for _, k := range []string{"b", "c"} {
		if _, err := b.Limiter.Take(ctx, []cluster.Debit{{Key: k, N: 1, Rate: 1, Burst: 1}}); err != nil {
			t.Fatalf("Take %s after the others expired: %v", k, err)
		}
	}
}
