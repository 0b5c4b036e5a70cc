package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// A session's GET stream is held by one connection at a time, through a
// claim: a newer connection takes it over, and requests sent on it fail
// when it closes. Flow 7's second half (docs/ARCHITECTURE.md, "The flows and their files"): a server-initiated
// request on the GET stream works from any node (RequestOnGet).

// ErrNoGetStream is returned by RequestOnGet when no GET stream of the
// session is open.
var ErrNoGetStream = errors.New("coordinator: no GET stream of the session is open")

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

// RequestOnGet sends a server→client request (ping, elicitation outside
// a request, ...) on the GET stream of session, whose caller is principal
// (its id; only that caller's reply is taken), from any node, and waits
// at most timeout for the reply. It fails at once with ErrNoGetStream
// when no GET stream of the session is open, and promptly with
// ErrGetDropped when the stream closes before the reply.
func (n *Node) RequestOnGet(ctx context.Context, session, principal, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	// Register before looking for the stream: a stream that closes after
	// the look fails the waiter (GetDropped), one that closed before is
	// not found.
	id := n.Waiters.NewID()
	waiter, err := n.Waiters.Register(session, principal, id, "get")
	if err != nil {
		return nil, err
	}
	holder, err := n.liveHolder(ctx, GetKey(session))
	if err != nil {
		waiter.Cancel()
		return nil, err
	}
	if holder == "" {
		waiter.Cancel()
		return nil, ErrNoGetStream
	}
	msg, err := jsonrpc.Request(id, method, params)
	if err != nil {
		waiter.Cancel()
		return nil, err
	}
	data, _ := jsonrpc.Encode(msg)
	if err := n.AppendGet(ctx, session, data); err != nil {
		waiter.Cancel()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The node holding the stream announces its end (GetDropped), but
	// that message is lost if the node dies or the bus drops it: the
	// claim, which lives as long as the holder's membership lease, tells
	// it too.
	go n.WatchClaim(ctx, GetKey(session), n.leaseTTL/2, waiter, ErrGetDropped)
	return waiter.Wait(ctx)
}

// WatchClaim fails waiter with err once no connection holds the claim
// key, looking every interval until ctx ends. A claim is held only while
// its holder's process holds its membership lease (see liveHolder), so
// it lapses when that connection's node dies, and no message has to
// announce it.
func (n *Node) WatchClaim(ctx context.Context, key string, interval time.Duration, waiter interface{ Fail(error) }, err error) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		holder, herr := n.liveHolder(ctx, key)
		if herr == nil && holder == "" {
			waiter.Fail(err)
			return
		}
		t.Reset(interval)
	}
}
