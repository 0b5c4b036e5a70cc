package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Messages between nodes travel on the bus, which delivers only to
// nodes connected when they are published. Each message whose loss
// would leave someone waiting is backed by something that does not
// depend on it:
//
//   - a reply to a server→client request: Publish counts its receivers,
//     and a reply its owner did not receive is refused (503 with
//     Retry-After while the owner holds its lease, 410 after), so the
//     client sends it again (Coordinator.Resolve);
//   - SessionEnded: a node whose bus comes back checks every session it
//     runs requests or holds streams of (resync);
//   - CancelRequest: the cancellation is also recorded (for HistoryTTL),
//     and a node whose bus comes back checks its running requests
//     (resync);
//   - GetDropped (the GET stream a request was sent on closed): the
//     waiter also watches the stream's claim, which lives as long as
//     the holder's membership lease;
//   - GetTakeover: a node whose bus comes back renews every claim its
//     streams hold at once, which ends those another connection took
//     (and the node-wide renewal every ClaimTTL/4 would find them too);
//   - InvalidateSession: cached sessions are dropped when the bus comes
//     back, and the cache is bypassed while it is down;
//   - Invalidated (an acknowledgement of an invalidation): its sender
//     answers its client anyway after EchoWait (echo.go);
//   - MemberJoined: the view of the members is reloaded every
//     LeaseTTL/3;
//   - RegistryChanged: Config.Refresh runs when the bus comes back and
//     on every heartbeat;
//   - ListenNotify: nothing keeps it, so a node whose bus comes back
//     ends its listen streams without their result, which tells clients
//     to listen again (SPEC §7.3);
//   - follow notifications of a stream: Tail re-reads the history on the
//     reconnect hint and polls it;
//   - TaskChanged: task waiters poll the record every poll interval, and
//     a task's runner every LeaseTTL/3 (tasks.go).

// resync runs when the bus is back after a loss: it catches up, from the
// shared store, on what the messages lost meanwhile would have told this
// node.
func (n *Node) resync() {
	n.sessions.Flush()
	n.Local.endAll(nil, true)
	n.Go(n.renewClaims)
	sessions, requests := n.Local.held()
	if len(sessions) == 0 {
		return
	}
	n.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		ended := map[string]bool{}
		for sid := range sessions {
			if err := n.sessions.Touch(ctx, sid); errors.Is(err, cluster.ErrNotFound) {
				ended[sid] = true
				n.EndLocal(sid)
			}
		}
		for _, k := range requests {
			if ended[k[0]] || len(k[1]) > maxCancelKey {
				continue
			}
			holder, err := n.be.Claims.Holder(ctx, cancelKey(k[0], k[1]))
			if err != nil || holder == "" {
				continue
			}
			n.Local.cancel(k[0], k[1])
		}
	})
}
