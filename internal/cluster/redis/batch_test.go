package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// streamLife writes one stream's life as the node's producer does: the
// first batch opens the stream, then batches of events, then the final
// one; each waits for the previous one's answer, and pause.
func streamLife(ctx context.Context, b *cluster.Backend, session, x string, batches int, pause time.Duration) error {
	lim := cluster.Limits{}
	open := &cluster.StreamMeta{Session: session, Owner: "n", Request: "n:" + x}
	next := uint64(1)
	for i := range batches {
		data := [][]byte{[]byte(x + "." + strconv.Itoa(2*i)), []byte(x + "." + strconv.Itoa(2*i+1))}
		bt := cluster.Batch{Next: next, Token: x + "/" + strconv.Itoa(i)}
		if i == 0 {
			bt.Open = open
		}
		if l := b.AppendLinger; l > 0 && i < batches-1 {
			bt.LingerUntil = time.Now().Add(l) // notifications, as a producer's
		}
		first, err := b.Events.AppendBatch(ctx, session, x, data, i == batches-1, bt, lim)
		if err != nil {
			return fmt.Errorf("%s batch %d: %w", x, i, err)
		}
		if first != next {
			return fmt.Errorf("%s batch %d: first seq %d, want %d", x, i, first, next)
		}
		next += 2
		time.Sleep(pause)
	}
	return nil
}

// checkLife checks that a stream holds each of its events once, in
// order, and is done.
func checkLife(ctx context.Context, b *cluster.Backend, session, x string, batches int) error {
	evs, info, err := b.Events.Read(ctx, session, x, 0)
	if err != nil {
		return err
	}
	if len(evs) != 2*batches || info.Last != uint64(2*batches) || !info.Done {
		return fmt.Errorf("%s: %d events (last %d, done %v), want %d once each, done", x, len(evs), info.Last, info.Done, 2*batches)
	}
	for i, ev := range evs {
		if want := x + "." + strconv.Itoa(i); string(ev.Data) != want || ev.Seq != uint64(i+1) {
			return fmt.Errorf("%s: event %d is %q (seq %d), want %q", x, i, ev.Data, ev.Seq, want)
		}
	}
	return nil
}

// TestBatchedAppendsWithLostReplies runs many streams at once with one
// round trip in flight, so their appends share pipelines, and loses the
// replies of several pipelines: go-redis sends each again, and every
// stream still holds each of its events once, in order. The same with
// the default round trips in flight and appends that linger for
// company (Options.AppendLinger).
func TestBatchedAppendsWithLostReplies(t *testing.T) {
	for _, o := range []struct {
		name string
		opts redis.Options
	}{
		{"one in flight", redis.Options{JanitorInterval: -1, Pipelines: 1}},
		{"linger", redis.Options{JanitorInterval: -1, AppendLinger: 2 * time.Millisecond}},
	} {
		t.Run(o.name, func(t *testing.T) { testBatchedAppendsWithLostReplies(t, o.opts) })
	}
}

func testBatchedAppendsWithLostReplies(t *testing.T, opts redis.Options) {
	onSingleAndCluster(t, func(t *testing.T, srv *redistest.Server) {
		l := &lostReply{}
		c := lossyClient(t, srv, l)
		b := backend(t, c, opts)
		ctx := t.Context()
		const streams, batches = 24, 16
		for i := range streams {
			if err := b.Sessions.Create(ctx, "s"+strconv.Itoa(i), nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Warm the scripts, so that no lost reply is a NOSCRIPT.
		if err := streamLife(ctx, b, "s0", "warm", 1, 0); err != nil {
			t.Fatal(err)
		}
		trips0, calls0 := redis.ScriptTrips(b)
		// Lose a reply, let its retry through (a read timeout later),
		// then lose another, while the streams run.
		var stop atomic.Bool
		var losses sync.WaitGroup
		losses.Add(1)
		go func() {
			defer losses.Done()
			for !stop.Load() {
				n := l.lost.Load()
				l.armed.Store(true)
				for l.lost.Load() == n && !stop.Load() {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- streamLife(ctx, b, "s"+strconv.Itoa(i), "x"+strconv.Itoa(i), batches, 50*time.Millisecond)
			}()
		}
		wg.Wait()
		stop.Store(true)
		losses.Wait()
		l.armed.Store(false)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		for i := range streams {
			if err := checkLife(ctx, b, "s"+strconv.Itoa(i), "x"+strconv.Itoa(i), batches); err != nil {
				t.Error(err)
			}
		}
		trips, calls := redis.ScriptTrips(b)
		trips, calls = trips-trips0, calls-calls0
		t.Logf("%d appends in %d round trips, %d replies lost", calls, trips, l.lost.Load())
		if l.lost.Load() < 2 {
			t.Errorf("%d replies lost: the test did not exercise retried pipelines", l.lost.Load())
		}
		if trips*2 > calls {
			t.Errorf("%d appends of %d streams at once took %d round trips: they did not share them", calls, streams, trips)
		}
	})
}

// TestAppendLinger: an append of notifications (Batch.LingerUntil) that
// finds nothing to share a round trip with waits for company until then;
// one that may not wait (a final append, a server→client request) goes
// at once and takes the lingering ones with it.
func TestAppendLinger(t *testing.T) {
	srv := redistest.Start(t)
	const linger = 2 * time.Second
	b := backend(t, goredis.NewClient(&goredis.Options{Addr: srv.Addr()}), redis.Options{JanitorInterval: -1, AppendLinger: linger})
	ctx := t.Context()
	lim := cluster.Limits{}
	for _, s := range []string{"a", "b"} {
		if err := b.Sessions.Create(ctx, s, nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	open := func(s string) cluster.Batch {
		return cluster.Batch{Next: 1, Open: &cluster.StreamMeta{Session: s, Owner: "n", Request: "n:" + s}}
	}
	notice := func(bt cluster.Batch) cluster.Batch {
		bt.LingerUntil = time.Now().Add(b.AppendLinger)
		return bt
	}
	if b.AppendLinger != linger {
		t.Fatalf("the backend's AppendLinger is %v, want the option's %v", b.AppendLinger, linger)
	}
	// Warm the script, so that no append below is a NOSCRIPT retry.
	if _, err := b.Events.AppendBatch(ctx, "a", "warm", [][]byte{[]byte("w")}, true, open("a"), lim); err != nil {
		t.Fatal(err)
	}

	// A notification alone waits out the window.
	start := time.Now()
	if _, err := b.Events.AppendBatch(ctx, "a", "x1", [][]byte{[]byte("one")}, false, notice(open("a")), lim); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < linger {
		t.Fatalf("a lone append that does not end its stream took %v, want at least the linger (%v)", d, linger)
	}
	// One that may not wait does not linger.
	start = time.Now()
	if _, err := b.Events.AppendBatch(ctx, "a", "x1", [][]byte{[]byte("request")}, false, cluster.Batch{Next: 2}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.AppendBatch(ctx, "a", "x1", [][]byte{[]byte("final")}, true, cluster.Batch{Next: 3}, lim); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= linger {
		t.Fatalf("two appends without LingerUntil took %v: they lingered", d)
	}
	// A lingering notification goes with the next final append, at
	// once, in one round trip.
	trips0, calls0 := redis.ScriptTrips(b)
	start = time.Now()
	lingered := make(chan error, 1)
	go func() {
		_, err := b.Events.AppendBatch(ctx, "b", "y1", [][]byte{[]byte("one")}, false, notice(open("b")), lim)
		lingered <- err
	}()
	for {
		if trips, calls := redis.ScriptTrips(b); trips != trips0 || calls != calls0 {
			t.Fatalf("the notification went before the final append (%d trips)", trips-trips0)
		}
		if redis.Lingering(b) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Events.AppendBatch(ctx, "a", "x2", [][]byte{[]byte("only")}, true, open("a"), lim); err != nil {
		t.Fatal(err)
	}
	if err := <-lingered; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= linger {
		t.Fatalf("the lingering notification took %v: the final append did not take it", d)
	}
	if trips, calls := redis.ScriptTrips(b); trips-trips0 != 1 || calls-calls0 != 2 {
		t.Fatalf("%d calls in %d round trips, want 2 in 1", calls-calls0, trips-trips0)
	}
	for _, x := range [][2]string{{"a", "x1"}, {"b", "y1"}, {"a", "x2"}} {
		evs, _, err := b.Events.Read(ctx, x[0], x[1], 0)
		if err != nil || len(evs) == 0 {
			t.Fatalf("stream %s: %d events, %v", x[1], len(evs), err)
		}
	}
}

// BenchmarkRoundTripsPerStream writes stream lives (3 batches: open,
// events, final) from 1, 4, 16 and 64 goroutines at once and reports
// the Redis round trips each life took, counted by a go-redis hook on
// the client (every command or pipeline sent is one), with every call
// alone (pipelines=-1) and with 2 and 8 (the default) round trips in
// flight before calls share one.
func BenchmarkRoundTripsPerStream(b *testing.B) {
	srv := redistest.Start(b)
	for _, conc := range []int{1, 4, 16, 64} {
		for _, pipelines := range []int{-1, 2, 8} {
			b.Run(fmt.Sprintf("inflight=%d/pipelines=%d", conc, pipelines), func(b *testing.B) {
				c := client(b, srv, "")
				var trips atomic.Int64
				c.AddHook(tripCounter{&trips})
				be := backend(b, c, redis.Options{JanitorInterval: -1, Pipelines: pipelines})
				benchStreamLives(b, be, &trips, conc, 0)
			})
		}
	}
}

// BenchmarkSharedTripsAgainstAutoPipeline writes the stream lives of
// BenchmarkRoundTripsPerStream through the backend's own batcher (with
// 1 round trip in flight before calls wait, as go-redis's autopipeliner
// does by default, and with 8, the default) and through go-redis's
// autopipeliner (every call sent alone, through it), half duplex (its
// default: one batch in flight) and full duplex; on loopback and with
// Redis 1 ms away in each direction (a toxiproxy latency toxic); each
// stream's next batch written at once or 1 ms after the answer (a
// handler's work between its events).
func BenchmarkSharedTripsAgainstAutoPipeline(b *testing.B) {
	srv := redistest.Start(b)
	far := proxy(b, srv, "far")
	bothWays(b, far, "latency", `{"latency":1}`)
	for _, where := range []string{"loopback", "far"} {
		for _, pause := range []time.Duration{0, time.Millisecond} {
			for _, conc := range []int{1, 4, 16, 64} {
				for _, via := range []string{"batcher-1", "batcher-8", "autopipeline", "autopipeline-fullduplex"} {
					b.Run(fmt.Sprintf("%s/pause=%v/inflight=%d/%s", where, pause, conc, via), func(b *testing.B) {
						url := srv.URL()
						if where == "far" {
							url = "redis://" + far.Listen
						}
						opts, err := redis.ParseURL(url)
						if err != nil {
							b.Fatal(err)
						}
						c := goredis.NewClient(opts.Simple())
						b.Cleanup(func() { _ = c.Close() })
						var trips atomic.Int64
						c.AddHook(tripCounter{&trips})
						if n, ok := strings.CutPrefix(via, "batcher-"); ok {
							pipelines, _ := strconv.Atoi(n)
							benchStreamLives(b, backend(b, c, redis.Options{JanitorInterval: -1, Pipelines: pipelines}), &trips, conc, pause)
							return
						}
						apOpts := goredis.DefaultBlockingAutoPipelineOptions()
						apOpts.FullDuplex = via == "autopipeline-fullduplex"
						ap, err := c.AutoPipelineWithOptions(apOpts)
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { _ = ap.Close() })
						be := backend(b, c, redis.Options{JanitorInterval: -1, Pipelines: -1})
						redis.SendAloneThrough(be, ap)
						benchStreamLives(b, be, &trips, conc, pause)
					})
				}
			}
		}
	}
}

// benchStreamLives writes b.N stream lives on be from conc goroutines,
// pausing between a life's batches, and reports the round trips per life that trips counted meanwhile.
func benchStreamLives(b *testing.B, be *cluster.Backend, trips *atomic.Int64, conc int, pause time.Duration) {
	ctx := context.Background()
	if err := be.Sessions.Create(ctx, "s", nil, time.Hour, 0, cluster.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ResetTimer()
	trips.Store(0)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := streamLife(ctx, be, "s", "x"+strconv.FormatInt(i, 10), 3, pause); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(trips.Load())/float64(b.N), "roundtrips/stream")
}

// tripCounter counts what a client sends: a command or a pipeline each.
type tripCounter struct{ n *atomic.Int64 }

func (tripCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h tripCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h tripCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
