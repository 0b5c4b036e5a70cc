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
//   - each kind of message on TopicAll: the comment of its entry in
//     busKinds (bus.go) says what makes up for its loss, resync below
//     among them;
//   - follow notifications of a stream: Tail re-reads the history on the
//     reconnect hint and polls it.

// resync runs when the bus is back after a loss: it catches up, from the
// shared store, on what the messages lost meanwhile would have told this
// node.
func (n *Node) resync() {
	n.Sessions.Flush()
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
			if err := n.Sessions.Touch(ctx, sid); errors.Is(err, cluster.ErrNotFound) {
				ended[sid] = true
				n.endLocal(sid)
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
