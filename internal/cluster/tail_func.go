package cluster

import (
	"context"
	"sync"
	"time"
)

// TailMergedFunc is TailMerged without a goroutine that waits for the
// events: it follows and reads the sources on the caller's goroutine and
// returns, and the tail goes on while nothing happens with no goroutine
// at all. Whenever followed events arrive (or Poll passes, or ctx ends)
// a goroutine is started that delivers them to fn; one runs at a time,
// so fn is called as TailMerged calls it, in order, never concurrently.
// end is called once, with what TailMerged would have returned, when the
// tail is over: on the caller's goroutine when it is over before
// TailMergedFunc returns, else on the last delivering goroutine, after
// every fn call.
func TailMergedFunc(ctx context.Context, log EventLog, srcs []TailSource, opts TailOptions, fn func(i int, ev Event) error, end func(error)) {
	a := &funcTail{tailer: newTailer(ctx, mergedTails(srcs, fn), opts), end: end, running: true}
	// Until the set-up is done, the set-up is the running delivery:
	// wake-ups are only noted.
	if over, err := a.open(log, func() { a.wake(false) }); over {
		a.finish(err)
		return
	}
	if a.opts.Poll > 0 {
		a.timer = time.AfterFunc(a.opts.Poll, func() { a.wake(true) })
	}
	a.stopCtx = context.AfterFunc(ctx, func() { a.wake(false) })
	a.mu.Lock()
	if a.woken {
		a.mu.Unlock()
		go a.run()
		return
	}
	a.running = false
	a.mu.Unlock()
}

// funcTail is the state of a TailMergedFunc call.
type funcTail struct {
	*tailer
	end     func(error)
	timer   *time.Timer // the poll, nil without
	stopCtx func() bool

	mu      sync.Mutex
	running bool // a goroutine delivers (or the set-up runs)
	woken   bool // something happened since the delivery last looked
	polled  bool // ... among which the poll
	over    bool
}

// wake notes that something happened, and starts a delivery unless one
// runs (it will look again before it stops).
func (a *funcTail) wake(poll bool) {
	a.mu.Lock()
	if a.over {
		a.mu.Unlock()
		return
	}
	a.woken = true
	a.polled = a.polled || poll
	if a.running {
		a.mu.Unlock()
		return
	}
	a.running = true
	a.mu.Unlock()
	go a.run()
}

// run delivers until nothing more happened, or the tail is over.
func (a *funcTail) run() {
	for {
		a.mu.Lock()
		if !a.woken {
			a.running = false
			a.mu.Unlock()
			return
		}
		polled := a.polled
		a.woken, a.polled = false, false
		a.mu.Unlock()
		if err := a.ctx.Err(); err != nil {
			a.finish(err)
			return
		}
		if over, err := a.step(polled); over {
			a.finish(err)
			return
		}
		if a.timer != nil {
			a.timer.Reset(a.opts.Poll)
		}
	}
}

// finish ends the tail with err: no delivery starts any more.
func (a *funcTail) finish(err error) {
	a.mu.Lock()
	a.over = true
	a.mu.Unlock()
	if a.stopCtx != nil {
		a.stopCtx()
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	a.close()
	a.end(err)
}
