package coordinator

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// A session's GET stream is held by one connection at a time, through a
// claim: a newer connection takes it over, and requests sent on it fail
// when it closes.

// ErrGetDropped fails a request sent on a GET stream that closed.
var ErrGetDropped = jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "the stream the request was delivered on closed", nil)

// GetKey names the claim on a session's GET stream.
func GetKey(session string) string { return "session:" + session + ":get" }

// takeover ends this node's connections holding the GET stream of a
// session that another connection took over. Messages may arrive late
// (a stale take-over by a connection that has since been taken over
// itself): the claim decides, not the message, so a local GET connection
// ends only if it lost it.
func (n *Node) takeover(m GetTakeover) {
	others := n.Local.getHoldersBut(m.Session, m.Conn)
	if len(others) == 0 {
		return
	}
	n.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		holder, err := n.be.Claims.Holder(ctx, GetKey(m.Session))
		if err != nil {
			return
		}
		for _, c := range others {
			if c.ID != holder {
				c.Cancel(ErrTakenOver)
			}
		}
	})
}
