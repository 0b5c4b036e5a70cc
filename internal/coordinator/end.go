package coordinator

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/cluster"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flow 8 (DESIGN §3): DELETE lands on any node and the session ends
// everywhere: its streams close, its running requests are cancelled, its
// waiters fail, and its cached state is dropped.

// EndSession tells every node (this one included) that session ended;
// the caller has already deleted it from the store.
func (n *Node) EndSession(ctx context.Context, session string) error {
	return n.Publish(ctx, SessionEnded{Session: session})
}

// SessionEndNotice is the bus message of EndSession, for the store to
// publish as it ends the session (cluster.EndOptions.Announce), which
// saves a round trip; with echo, every node acknowledges it to echo.
func (n *Node) SessionEndNotice(session string, echo *Echo) (*cluster.Notice, error) {
	b, err := Encode(SessionEnded{Session: session, Ack: echo.Token()})
	if err != nil {
		return nil, err
	}
	n.metrics.BusSent()
	return &cluster.Notice{Topic: TopicAll, Msg: b}, nil
}

// EndLocal ends what this node holds of an ended session: its cached
// state, its waiters, its running requests and its open streams.
func (n *Node) EndLocal(session string) (held bool) {
	held = n.sessions.Invalidate(session)
	n.Waiters.FailSession(session, jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "session ended", nil))
	n.Local.endSession(session)
	return held
}
