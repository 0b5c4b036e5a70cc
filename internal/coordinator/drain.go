package coordinator

import (
	"context"
	"time"
)

// Flow 9 (DESIGN §3): on SIGTERM the node's readiness flips, new work is
// refused, open streams are closed (the adapter sends them a retry hint)
// so clients resume elsewhere, and running requests finish within the
// grace period.

// Drain starts a graceful shutdown: readiness fails, open connections
// end with ErrDrain, listen streams end with their result, and Drain
// waits until running requests finish or ctx ends.
func (n *Node) Drain(ctx context.Context) {
	n.draining.Store(true)
	n.metrics.Draining(true)
	n.Local.endAll(ErrDrain, false)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for n.Local.Running() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Draining reports whether Drain was called.
func (n *Node) Draining() bool { return n.draining.Load() }
