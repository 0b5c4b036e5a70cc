package coordinator

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// What the package's external tests reach of the node's insides.

// KnowsMember reports whether n counts instance among the live members.
func (n *Node) KnowsMember(instance string) bool { return n.members.has(instance) }

func (n *Node) ExpectInvalidation() *Echo { return n.expectInvalidation() }

func (n *Node) NewConnID() string { return n.newConnID() }

func (n *Node) OpenStream(ctx context.Context, session, stream, request string) (func(), error) {
	return n.openStream(ctx, session, stream, request)
}

func (n *Node) OwnerLost(ctx context.Context, w *OwnerWatch) bool { return n.ownerLost(ctx, w) }

func (n *Node) RunUpkeep(ctx context.Context, j Upkeep) { n.addUpkeep(ctx, j) }

func (n *Node) SessionEndNotice(session string, echo *Echo) (*cluster.Notice, error) {
	return n.sessionEndNotice(session, echo)
}

func (n *Node) SweepTasks(ctx context.Context) (int, error) { return n.sweepOnce(ctx) }

func (n *Node) TailGet(ctx context.Context, session string, from GetCursor, fn func(ev cluster.Event, cur GetCursor, broadcast bool) error, flush func() error) error {
	return n.tailGet(ctx, session, from, fn, flush)
}

func (n *Node) TakeGet(ctx context.Context, session string, conn *Conn) (func(), error) {
	return n.takeGet(ctx, session, conn)
}

func (n *Node) ClaimTTL() time.Duration { return n.claimTTL() }
