package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flow 5 (DESIGN §3): a node dies mid-call. Its membership lease lapses
// (membership.go), and whoever holds streams of its requests ends them
// with a JSON-RPC error for the request instead of hanging; its waiters
// die with it.
//
// A POST stream is held by its producer: a claim renewed while the
// request runs and until its final response is recorded. A node that
// follows the stream for a resumed connection ends it with an error for
// the request when its producer lets the claim lapse (it gave up
// recording, its process died or was restarted under the same node id),
// so no resumed stream waits for an end that nobody will append.

// produceKey names the claim of the producer of a POST stream. Stream
// ids are unique in the deployment, and the claim outside the session's
// namespace needs no release: it lapses within LeaseTTL of its last
// renewal, and after the final is recorded nobody asks for it.
func produceKey(stream string) string { return "produce:" + stream }

// HoldStream claims the production of stream and renews the claim every
// LeaseTTL/3 (retrying sooner while the store fails, taking the claim
// back if it lapsed meanwhile) until the returned function is called.
func (n *Node) HoldStream(ctx context.Context, stream string) (func(), error) {
	var b [9]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	key, holder := produceKey(stream), n.instance+"/"+base64.RawURLEncoding.EncodeToString(b[:])
	if _, err := n.be.Claims.Claim(ctx, key, holder, n.leaseTTL); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := n.leaseTTL / 3
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			ok, err := n.be.Claims.Renew(hctx, key, holder, n.leaseTTL)
			if err == nil && !ok {
				_, err = n.be.Claims.Claim(hctx, key, holder, n.leaseTTL)
			}
			if err != nil {
				t.Reset(min(every, 100*time.Millisecond))
				continue
			}
			t.Reset(every)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// AbandonedError ends a resumed stream whose producer stopped holding it.
func AbandonedError(id jsonrpc.ID, owner string) *jsonrpc.Message {
	return jsonrpc.ErrorResponse(id, jsonrpc.NewError(jsonrpc.CodeNodeLost,
		"the node running this request stopped before its response was recorded; retry it",
		map[string]any{"node": owner}))
}

// OwnerWatch is the state of watching the producer of a followed stream
// (see OwnerLost).
type OwnerWatch struct {
	Session, Stream string
	Info            cluster.StreamInfo
	unheld          int // consecutive checks that found no producer
}

// OwnerLost appends an error for the stream's request, ending it, when
// its producing node is gone, or when its producer has not held the
// stream on two checks in a row (one lapse may be a store outage the
// producer has not yet seen the end of); it reports whether it did.
// The owner is a process (node id and incarnation), so a node restarted
// with the same id does not keep the streams of its previous process open.
func (n *Node) OwnerLost(ctx context.Context, w *OwnerWatch) bool {
	alive, err := n.be.Members.Alive(ctx, w.Info.Owner)
	if err != nil {
		return false
	}
	if alive {
		holder, err := n.be.Claims.Holder(ctx, produceKey(w.Stream))
		if err != nil {
			return false
		}
		if holder != "" {
			w.unheld = 0
			return false
		}
		if w.unheld++; w.unheld < 2 {
			return false
		}
	}
	id, err := jsonrpc.ParseKey(w.Info.Request)
	if err != nil {
		return true
	}
	msg := jsonrpc.ErrorResponse(id, jsonrpc.NewError(jsonrpc.CodeNodeLost, "the node running this request stopped; retry it", map[string]any{"node": NodeOf(w.Info.Owner)}))
	if alive {
		msg = AbandonedError(id, NodeOf(w.Info.Owner))
	}
	data, _ := jsonrpc.Encode(msg)
	if _, err := n.be.Events.Append(ctx, w.Session, w.Stream, data, true, n.lim); err != nil {
		n.log.Debug().Err(err).Str("stream", w.Stream).Msg("lost-node error not appended")
	}
	return true
}
