package mcp

import (
	"context"
	"time"
)

// workerIdle is how long a handler goroutine waits for its next handler
// before it ends.
const workerIdle = time.Second

// workers runs the handlers of legacy requests, which outlive their HTTP
// request when the server detaches it, on goroutines kept for a while
// after their handler returns. A new goroutine starts with a small
// stack and grows it, copying, through the decoding and dispatch of
// every request (8% of a node's CPU on tools/call of echo); a kept one
// has grown already. There are never more workers than handlers running
// at once (bounded by admission) plus those idle for under workerIdle.
type workers struct {
	ctx  context.Context // idle workers end with it
	work chan func()     // unbuffered: a send succeeds only to an idle worker
}

func newWorkers(ctx context.Context) *workers {
	return &workers{ctx: ctx, work: make(chan func())}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		f = nil
		t.Reset(workerIdle)
		select {
		case f = <-w.work:
		case <-t.C:
			return
		case <-w.ctx.Done():
			return
		}
	}
}
