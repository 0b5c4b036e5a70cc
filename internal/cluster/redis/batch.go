package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// The node's script calls share round trips. A call made while fewer
// than Options.Pipelines round trips are in flight goes at once, on its
// own, as go-redis would send it; one made while that many are in
// flight waits, and every call that waited goes in the next round trip
// as one pipeline (at most Options.MaxPipelineCalls calls), sent the
// moment a round trip in flight returns. With one stream busy nothing
// waits and nothing changes; with N streams busy a round trip carries
// many of them, so the node and Redis spend one write, one read and one
// wake-up where they spent N. The calls of one stream never travel
// together (its producer waits for each append's answer before the
// next), so a pipeline never reorders what one stream writes.
//
// A pipeline is retried whole by go-redis when its connection fails:
// every script in it is safe to run twice (an append carries its batch
// token and the sequence it starts at, a session's creation its token),
// as when go-redis retries one script call.
//
// An append of notifications only (cluster.Batch.LingerUntil, set by the
// node's producer when Options.AppendLinger is) that finds nothing to
// share a round trip with waits until its LingerUntil for company
// instead of going alone: a paced event (a progress notification every
// few hundred ms) is otherwise one lone request, and a lone request
// costs Redis several times a pipelined one (Redis woken for it;
// docs/BENCHMARKS.md, "What an appended event costs Redis"). The first
// call that does not linger, the MaxPipelineCalls-th lingering call, the
// earliest LingerUntil or a round trip returning sends every waiting
// call at once. The producer's own wait for more of its stream's events
// and this one end at the same LingerUntil, so a notification waits at
// most the linger before it is recorded and written; the order of one
// stream's writes is kept as before (its producer waits for each
// answer).
//
// With Options.WaitReplicas one WAIT ends the pipeline and covers every
// durable write in it (WAIT counts the writes of its connection).
//
// Why not go-redis's autopipeliner (Client.AutoPipeline, 9.23): it
// sends WAIT on another connection than the batch it would have to
// cover, its API is marked experimental, and it is not faster on the
// write path measured alone (BenchmarkSharedTripsAgainstAutoPipeline,
// docs/bench/autopipeline-bench.txt): with stream lives that pause 1 ms
// between batches, as a handler does between its events, this batcher
// took 1.14, 1.26 and 1.14 times less time per life with Redis 1 ms
// away at 4, 16 and 64 in flight, and the same on loopback within the
// noise. The autopipeliner is ahead (1.17 to 1.24 times at 16 and 64)
// only when every caller writes again the instant its answer returns,
// and in every case it sends 3 to 10 times fewer round trips: it holds a
// flush while it expects the callers of the batch in flight back, and
// keeps one batch in flight. Fewer round trips cost Redis less CPU per
// call; that is what to take from it, not its sender.

const (
	// DefaultPipelines is Options.Pipelines' default: the round trips
	// of script calls in flight at once before calls wait to share one.
	// With Redis 0.5 ms away, streamed calls on one node ran fastest
	// with 8 of 0 (every call alone), 2 and 8 (docs/BENCHMARKS.md,
	// "Shared round trips against concurrency"); with fewer in flight,
	// a call goes at once, as it would without sharing.
	DefaultPipelines = 8
	// DefaultMaxPipelineCalls is Options.MaxPipelineCalls' default.
	DefaultMaxPipelineCalls = 128
)

// batcher gathers the script calls that wait for a round trip.
type batcher struct {
	b        *backend
	limit    int // round trips in flight at once; < 0: every call alone
	maxCalls int
	alone    goredis.Scripter // sends a call that goes alone (the client)

	mu       sync.Mutex
	inflight int
	queue    []*scriptCall
	armed    bool      // a linger window is open (its timer runs)
	until    time.Time // when it ends

	// trips and calls count round trips sent and the calls they carried.
	trips, calls atomic.Uint64
}

// scriptCall is one script call, its answer in cmd once done is closed.
type scriptCall struct {
	ctx     context.Context
	s       *goredis.Script
	keys    []string
	args    []any
	durable bool
	until   time.Time       // may wait until then for company (Batch.LingerUntil)
	hurry   <-chan struct{} // ends that wait (Batch.Hurry)
	cmd     *goredis.Cmd
	done    chan struct{}
}

func newBatcher(b *backend) *batcher {
	q := &batcher{b: b, limit: b.opts.Pipelines, maxCalls: b.opts.MaxPipelineCalls, alone: b.client}
	if q.limit == 0 {
		q.limit = DefaultPipelines
	}
	if q.maxCalls <= 0 {
		q.maxCalls = DefaultMaxPipelineCalls
	}
	return q
}

// script runs s, sharing a round trip with other calls when the node is
// busy.
func (b *backend) script(ctx context.Context, s *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	return b.batch.run(ctx, &scriptCall{ctx: ctx, s: s, keys: keys, args: args})
}

// runDurable runs s and, when the writes must reach replicas
// (Options.WaitReplicas), waits for them (see wait.go).
func (b *backend) runDurable(ctx context.Context, s *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	return b.batch.run(ctx, &scriptCall{ctx: ctx, s: s, keys: keys, args: args, durable: b.durable()})
}

// runAppend is runDurable for an append, which may wait for company
// until bt.LingerUntil (zero: it does not) or bt.Hurry.
func (b *backend) runAppend(ctx context.Context, bt cluster.Batch, s *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	return b.batch.run(ctx, &scriptCall{ctx: ctx, s: s, keys: keys, args: args, durable: b.durable(), until: bt.LingerUntil, hurry: bt.Hurry})
}

func (b *backend) durable() bool { return b.opts.WaitReplicas > 0 && b.single }

func (q *batcher) run(ctx context.Context, c *scriptCall) *goredis.Cmd {
	if q.limit < 0 {
		q.send([]*scriptCall{c})
		return c.cmd
	}
	linger := !c.until.IsZero() && time.Now().Before(c.until)
	q.mu.Lock()
	if q.inflight < q.limit && (!linger || len(q.queue)+1 >= q.maxCalls) {
		// A slot is free: the call goes now, with the lingering calls
		// that wait (there are some only while a window is open).
		batch := append(q.take(q.maxCalls-1), c)
		q.inflight++
		q.mu.Unlock()
		q.send(batch)
		for _, w := range batch[:len(batch)-1] {
			close(w.done)
		}
		q.next()
		return c.cmd
	}
	c.done = make(chan struct{})
	q.queue = append(q.queue, c)
	if linger && q.inflight < q.limit && (!q.armed || c.until.Before(q.until)) {
		q.armed, q.until = true, c.until
		time.AfterFunc(time.Until(c.until), q.windowEnd)
	}
	q.mu.Unlock()
	hurry := c.hurry
	for {
		select {
		case <-c.done:
			return c.cmd
		case <-hurry:
			hurry = nil
			q.windowEnd()
		case <-ctx.Done():
			// The call may still be sent: as when a caller gives up on a
			// command already written, the script may run.
			cmd := goredis.NewCmd(ctx)
			cmd.SetErr(ctx.Err())
			return cmd
		}
	}
}

// take removes up to n calls from the head of the queue (q.mu held);
// an empty queue closes the linger window.
func (q *batcher) take(n int) []*scriptCall {
	n = min(len(q.queue), n)
	batch := make([]*scriptCall, n, n+1)
	copy(batch, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	if len(q.queue) == 0 {
		q.armed = false
	}
	return batch
}

// next is called by the goroutine whose round trip returned: the calls
// that waited go in the next one, or the slot is freed.
func (q *batcher) next() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.inflight--
		q.mu.Unlock()
		return
	}
	batch := q.take(q.maxCalls)
	q.mu.Unlock()
	go q.carry(batch)
}

// carry sends calls that waited, wakes them, and hands the slot on.
func (q *batcher) carry(batch []*scriptCall) {
	q.send(batch)
	for _, c := range batch {
		close(c.done)
	}
	q.next()
}

// windowEnd ends a linger window: the calls that wait go at once when a
// slot is free (when none is, the next round trip to return takes them).
func (q *batcher) windowEnd() {
	q.mu.Lock()
	if !q.armed || len(q.queue) == 0 || q.inflight >= q.limit {
		q.armed = false
		q.mu.Unlock()
		return
	}
	q.inflight++
	batch := q.take(q.maxCalls)
	q.mu.Unlock()
	q.carry(batch)
}

// send runs the calls in one round trip (a pipeline when there are
// several or a WAIT follows), then again with EVAL those the server did
// not know the script of.
func (q *batcher) send(batch []*scriptCall) {
	q.trips.Add(1)
	q.calls.Add(uint64(len(batch)))
	if c := batch[0]; len(batch) == 1 && !c.durable {
		c.cmd = c.s.Run(c.ctx, q.alone, c.keys, c.args...)
		return
	}
	// The pipeline outlives a caller that gave up: the others wait for
	// it. go-redis's read and write timeouts bound it.
	ctx := context.WithoutCancel(batch[0].ctx)
	if len(batch) == 1 {
		ctx = batch[0].ctx
	}
	if unknown := q.pipeline(ctx, batch, true); len(unknown) > 0 {
		q.trips.Add(1)
		q.pipeline(ctx, unknown, false)
	}
}

// pipeline sends the calls (EVALSHA, or EVAL when sha is false), with a
// WAIT after them when one of them is durable, and fails the durable
// ones whose writes the WAIT did not see replicated. It returns the
// calls the server did not know the script of (EVALSHA only), which the
// WAIT does not judge.
func (q *batcher) pipeline(ctx context.Context, batch []*scriptCall, sha bool) (unknown []*scriptCall) {
	durable := slices.ContainsFunc(batch, func(c *scriptCall) bool { return c.durable })
	var wait *goredis.Cmd
	_, _ = q.b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, c := range batch {
			if sha {
				c.cmd = c.s.EvalSha(ctx, p, c.keys, c.args...)
			} else {
				c.cmd = c.s.Eval(ctx, p, c.keys, c.args...)
			}
		}
		if durable {
			wait = p.Do(ctx, "WAIT", q.b.opts.WaitReplicas, q.b.waitTimeout().Milliseconds())
		}
		return nil
	})
	for _, c := range batch {
		if err := c.cmd.Err(); sha && err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			unknown = append(unknown, c)
		} else if wait != nil {
			q.checkWait(c, wait)
		}
	}
	return unknown
}

// checkWait fails a durable call whose writes the replicas did not
// acknowledge in time.
func (q *batcher) checkWait(c *scriptCall, wait *goredis.Cmd) {
	if !c.durable || c.cmd.Err() != nil {
		return
	}
	if err := wait.Err(); err != nil {
		c.cmd.SetErr(err)
		return
	}
	n := q.b.opts.WaitReplicas
	if got, _ := wait.Int64(); got < int64(n) {
		c.cmd.SetErr(fmt.Errorf("%w: the write reached %d of %d replicas within %v", cluster.ErrUnavailable, got, n, q.b.waitTimeout()))
	}
}
