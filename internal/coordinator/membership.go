package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Start joins the node to the cluster: it subscribes to its reply topic,
// to the broadcast topic and to its acknowledgement topic (AckTopic), takes its membership lease and renews it
// every LeaseTTL/3 (a renewal that failed is tried again after
// heartbeatRetry) on one goroutine, which also runs Config.Refresh. The
// node-wide upkeep (runUpkeep) reloads the view of live instances at the
// same pace.
func (n *Node) Start() error {
	ctx := n.ctx
	stop, err := n.Waiters.Start(ctx)
	if err != nil {
		return err
	}
	n.stops = append(n.stops, stop)
	stop, err = n.be.Bus.Subscribe(ctx, TopicAll, n.onBus)
	if err != nil {
		return err
	}
	n.stops = append(n.stops, stop)
	stop, err = n.be.Bus.Subscribe(ctx, AckTopic(n.instance), n.onAck)
	if err != nil {
		return err
	}
	n.stops = append(n.stops, stop)
	n.be.Bus.OnReconnect(func() {
		n.resync()
		n.refreshSoon()
	})
	n.Go(n.Callers.Run)
	renewed := time.Now()
	if err := n.be.Members.Heartbeat(ctx, n.instance, n.leaseTTL); err != nil {
		n.log.Warn().Err(err).Msg("membership heartbeat failed")
	}
	n.predecessors(ctx)
	_ = n.refreshMembers(ctx)
	// The others wait for this node's acknowledgements from now on (Echo).
	if err := n.Publish(ctx, MemberJoined{Instance: n.instance}); err != nil {
		n.log.Warn().Err(err).Msg("joining not announced")
	}
	n.refresh(ctx)
	n.Go(n.runUpkeep)
	n.Go(n.sweepTasks)
	n.Go(func(ctx context.Context) {
		every := n.leaseTTL / 3
		t := time.NewTimer(every)
		defer t.Stop()
		var warned time.Time    // the last failure logged
		refreshed := time.Now() // by the heartbeat goroutine's own pace
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.refreshDue:
				n.refresh(ctx)
			case <-t.C:
				start := time.Now()
				next := every
				if err := n.be.Members.Heartbeat(ctx, n.instance, n.leaseTTL); err != nil {
					// Tried again soon: the store may be back in a moment (a
					// Cluster whose replica took over), and the lease runs
					// out LeaseTTL after the last renewal.
					next = min(every, heartbeatRetry)
					if ctx.Err() == nil && time.Since(warned) >= every {
						n.log.Warn().Err(err).Msg("membership heartbeat failed")
						warned = time.Now()
					}
				} else {
					if gap := time.Since(renewed); gap > n.leaseTTL {
						n.leaseLapsed(gap)
					}
					renewed = start
					warned = time.Time{}
				}
				if time.Since(refreshed) >= every-heartbeatRetry/2 { // not at each retry
					n.refresh(ctx)
					refreshed = time.Now()
				}
				t.Reset(next)
			}
		}
	})
	return nil
}

// heartbeatRetry is how soon a heartbeat that failed is tried again
// (LeaseTTL/3 when that is sooner).
const heartbeatRetry = 250 * time.Millisecond

// predecessors drops the membership leases of the earlier processes of
// this node id (a node restarted with the same id, after kill -9): they
// are gone, so the streams and replies they held end with -31003 now, at
// the others' next look (their MemberJoined handler also forgets them),
// not when their leases lapse. Node ids are therefore unique among the
// processes that run at once.
func (n *Node) predecessors(ctx context.Context) {
	live, err := n.be.Members.Members(ctx)
	if err != nil {
		return
	}
	node := NodeOf(n.instance)
	for _, m := range live {
		if m == n.instance || NodeOf(m) != node {
			continue
		}
		if err := n.be.Members.Leave(ctx, m); err != nil {
			n.log.Warn().Err(err).Str("previous", m).Msg("an earlier process of this node id is still listed as live; its streams end when its lease lapses")
			continue
		}
		n.log.Info().Str("previous", m).Msg("an earlier process of this node id is gone: its streams and requests end now")
	}
}

// ErrLeaseLapsed fails the server→client requests a node was waiting
// for while its membership lease lapsed: the other nodes took it for
// gone then, and answered a reply to it with 410 (RouteReply), so the
// reply will not come.
var ErrLeaseLapsed = jsonrpc.NewError(jsonrpc.CodeNodeLost,
	"the node waiting for the client's reply was cut off from the cluster for a while, and the reply may have been refused; retry the request", nil)

// leaseLapsed runs when a heartbeat succeeds more than LeaseTTL after the
// last renewal began: the lease may have lapsed in between (a partition
// from the store), and every pending waiter is failed with
// ErrLeaseLapsed rather than left waiting for a reply refused as
// undeliverable.
func (n *Node) leaseLapsed(gap time.Duration) {
	pending := n.Waiters.Pending()
	n.log.Warn().Float64("since_renewal_ms", telemetry.Ms(gap)).Int("waiters", pending).
		Msg("membership lease may have lapsed: the server→client requests waiting on this node fail")
	n.Waiters.FailAll(ErrLeaseLapsed)
}

// refreshSoon asks the heartbeat goroutine to run Config.Refresh soon; it
// never blocks (bus callbacks call it).
func (n *Node) refreshSoon() {
	select {
	case n.refreshDue <- struct{}{}:
	default: // a refresh is already due
	}
}

// BusReady reports whether messages between nodes flow (always true on
// the memory backend).
func (n *Node) BusReady() bool {
	return n.be.Ready == nil || n.be.Ready()
}

// BusCurrent reports whether this node has received every bus message
// published up to cluster.BusFresh ago, its bus connection not known
// broken (cluster.Backend.Current; BusReady when the backend has no such
// check). It does no round trip: a node asks it before each answer from
// a copy that bus messages invalidate.
func (n *Node) BusCurrent() bool {
	if n.be.Current == nil {
		return n.BusReady()
	}
	return n.be.Current()
}

// ErrBusDown answers work that needs the bus while it reconnects.
var ErrBusDown = jsonrpc.NewError(jsonrpc.CodeUnavailable, "the cluster bus is reconnecting; retry shortly", nil)

// Ready reports whether the node should receive traffic: not draining,
// the bus up, the shared store answering, and not one that may evict
// the deployment's keys (unless the operator accepted it).
func (n *Node) Ready(ctx context.Context) error {
	switch {
	case n.draining.Load():
		return errors.New("draining")
	case !n.BusReady():
		return errors.New("cluster bus reconnecting")
	}
	if n.be.Ping != nil {
		if err := n.be.Ping(ctx); err != nil {
			return fmt.Errorf("backend: %w", err)
		}
	}
	if n.be.Memory != nil {
		if m := n.be.Memory(); m.Evicting && !m.Accepted {
			return fmt.Errorf("the store may evict this deployment's keys (Redis maxmemory-policy %s, maxmemory %d): set maxmemory-policy noeviction, or accept evictions (--redis-eviction accept)", m.Policy, m.MaxMemory)
		}
	}
	return nil
}

// boolGauge is a gauge's value of b.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NodeOf returns the node id of an instance name ("<node>.<incarnation>").
func NodeOf(instance string) string {
	if i := strings.LastIndexByte(instance, '.'); i > 0 {
		return instance[:i]
	}
	return instance
}
