package coordinator_test

import (
	"errors"
	"fmt"
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
	if _, err := be.Events.AppendBatch(ctx, sess, stream, [][]byte{nil}, false, nil, cluster.Limits{}); err == nil {
		t.Error("an append after the final event succeeded")
	}
}
