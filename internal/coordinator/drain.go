package coordinator

import (
	"context"
	"time"
)

// Flow 9 (docs/ARCHITECTURE.md, "The flows and their files"): on SIGTERM the node's readiness flips, new work is
// refused, open streams are closed (the adapter sends them a retry hint)
// so clients resume elsewhere, and running requests and tasks finish
// within the grace period; idempotent tasks still running then are handed
// over to another node (tasks.go).

// Drain starts a graceful shutdown: readiness fails, open connections
// end with ErrDrain, listen streams end with their result, and Drain
// waits until running requests and tasks finish or ctx ends (then it
// hands the idempotent tasks over).
func (n *Node) Drain(ctx context.Context) {
	n.draining.Store(true)
	n.metrics.Draining(true)
	n.Local.endAll(ErrDrain, false)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for n.Local.Running() > 0 || n.runningTasks() > 0 {
		select {
		case <-ctx.Done():
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.leaseTTL)
			defer cancel()
			n.handOver(hctx)
			return
		case <-t.C:
		}
	}
}

// Draining reports whether Drain was called.
func (n *Node) Draining() bool { return n.draining.Load() }
