package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Upkeep is the periodic chores of one open stream.
type Upkeep struct {
	Conn *Conn
	// Claim is the claim to renew; losing it ends the stream with
	// ErrTakenOver.
	Claim string
	// Session is the session to keep alive while its GET stream is open
	// (a listening client is not idle); the stream ends with
	// ErrSessionEnded when the session is gone.
	Session string
	// Owner is the producer to watch on a resumed POST stream.
	Owner *OwnerWatch
}

// RunUpkeep runs a stream's chores on one goroutine until ctx ends:
// renewing its claim (every LeaseTTL/3), sliding its session's idle
// timeout (every SessionTTL/4), and watching the node that produces a
// resumed stream (every LeaseTTL/2). SSE keep-alives are the stream
// writer's own (see sse.Writer).
func (n *Node) RunUpkeep(ctx context.Context, j Upkeep) {
	var renew, touch, watch <-chan time.Time
	if j.Claim != "" {
		t := time.NewTicker(n.leaseTTL / 3)
		defer t.Stop()
		renew = t.C
	}
	if j.Session != "" {
		t := time.NewTicker(max(n.sessionTTL/4, 50*time.Millisecond))
		defer t.Stop()
		touch = t.C
	}
	if j.Owner != nil {
		t := time.NewTicker(n.leaseTTL / 2)
		defer t.Stop()
		watch = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew:
			if ok, err := n.be.Claims.Renew(ctx, j.Claim, j.Conn.ID, n.leaseTTL); err == nil && !ok {
				j.Conn.Cancel(ErrTakenOver)
				return
			}
		case <-touch:
			if err := n.sessions.Touch(ctx, j.Session); errors.Is(err, cluster.ErrNotFound) {
				j.Conn.Cancel(ErrSessionEnded)
				return
			}
		case <-watch:
			if n.OwnerLost(ctx, j.Owner) {
				watch = nil
			}
		}
	}
}
