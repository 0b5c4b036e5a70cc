package coordinator

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/cluster"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flow 8 (docs/ARCHITECTURE.md, "The flows and their files"): DELETE lands on any node and the session ends
// everywhere: its streams close, its running requests are cancelled, its
// waiters fail, and its cached state is dropped.

// EndSession ends session everywhere on behalf of principal, and
// releases its lease in the Limiter set leases when not empty. Only the
// session's own principal may end it: another's is reported as not
// live, exactly as a session that does not exist. The store announces
// the end to every node as it ends the session (SessionEnded, in the
// same round trip where it can), and EndSession returns once the nodes
// that may hold a copy of it have acknowledged (Echo), so that the
// client's next request finds it gone on any node. It reports whether
// the session was live.
func (n *Node) EndSession(ctx context.Context, session, principal, leases string) (bool, error) {
	echo := n.expectChange()
	defer echo.Stop()
	notice, err := n.sessionEndNotice(session, echo)
	if err != nil {
		return false, err
	}
	live, holders, err := n.Sessions.End(ctx, session, principal, notice, leases)
	if err != nil || !live {
		return live, err
	}
	echo.Among(holders)
	echo.Wait(ctx)
	return true, nil
}

// SetLogLevel records the log level of session, and returns once the
// nodes that may hold a copy of the session have dropped it (Echo), so
// that the client's next request finds the new level on any node.
func (n *Node) SetLogLevel(ctx context.Context, session, level string) error {
	holders, err := n.Sessions.SetLogLevel(ctx, session, level)
	if err != nil {
		return err
	}
	echo := n.expectChange()
	echo.Among(holders)
	if err := n.Publish(ctx, InvalidateSession{Session: session, Ack: echo.Token()}); err != nil {
		echo.Stop()
		return err
	}
	echo.Wait(ctx)
	return nil
}

// expectChange collects the acknowledgements of a session change when
// the nodes cache sessions (nil, asking for none, when they do not: no
// node holds a copy).
func (n *Node) expectChange() *Echo {
	if !n.Sessions.Caches() {
		return nil
	}
	return n.expectInvalidation()
}

// sessionEndNotice is the bus message of EndSession, for the store to
// publish as it ends the session (cluster.EndOptions.Announce), which
// saves a round trip; with echo, every node acknowledges it to echo.
func (n *Node) sessionEndNotice(session string, echo *Echo) (*cluster.Notice, error) {
	b, err := Encode(SessionEnded{Session: session, Ack: echo.Token()})
	if err != nil {
		return nil, err
	}
	n.metrics.BusSent()
	return &cluster.Notice{Topic: TopicAll, Msg: b}, nil
}

// endLocal ends what this node holds of an ended session: its cached
// state, its waiters, its running requests and its open streams.
func (n *Node) endLocal(session string) (held bool) {
	held = n.Sessions.Invalidate(session)
	n.Waiters.FailSession(session, jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "session ended", nil))
	n.Local.endSession(session)
	return held
}
