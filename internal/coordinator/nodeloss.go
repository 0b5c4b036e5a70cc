package coordinator

import (
	"context"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flow 5 (docs/ARCHITECTURE.md, "The flows and their files"): a node dies mid-call. Its membership lease lapses
// (membership.go), and whoever holds streams of its requests ends them
// with a JSON-RPC error for the request instead of hanging; its waiters
// die with it.
//
// A POST stream names its producer, the process that opened it (node id
// and incarnation), in its meta. A node that follows the stream for a
// resumed connection ends it with an error for the request when that
// process loses its membership lease (it died, or was restarted under
// the same node id): one membership view per LeaseTTL/3 serves every
// followed stream of the node. A producer that lives but stops
// producing without recording the final (it gave up while the store was
// down) ends the stream itself with AbandonedError, retrying until the
// store takes it, so no resumed stream waits for an end that nobody
// will append, and no stream needs a claim of its own.

// produced is a stream this process produces.
type produced struct {
	session, request string
	ended            bool // its final event was recorded
}

// producing lists the streams this process produces, by stream id.
type producing struct {
	mu      sync.Mutex
	streams map[string]*produced
}

func (p *producing) add(stream string, s *produced) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streams == nil {
		p.streams = map[string]*produced{}
	}
	p.streams[stream] = s
}

// ended marks stream's final as recorded.
func (p *producing) ended(stream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.streams[stream]; s != nil {
		s.ended = true
	}
}

// remove forgets stream and reports whether its final was recorded.
func (p *producing) remove(stream string) (*produced, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.streams[stream]
	delete(p.streams, stream)
	return s, s == nil || s.ended
}

// HoldStream lists stream, a stream of request (its id key) of session,
// as produced by this process until the returned function is called. If
// its final was not recorded (see Record) by then, the stream is ended
// with AbandonedError, retried while the store is down, for up to the
// stream's history TTL. Its history is slid while it is held (see
// addUpkeep), so a call that runs silent longer than the history TTL can
// still be resumed.
func (n *Node) HoldStream(session, stream, request string) func() {
	n.producing.add(stream, &produced{session: session, request: request})
	h := &held{history: cluster.StreamRef{Session: session, Stream: stream}}
	n.upkeep.add(h)
	return func() {
		n.upkeep.remove(h)
		s, ended := n.producing.remove(stream)
		if ended {
			return
		}
		id, err := jsonrpc.ParseKey(s.request)
		if err != nil {
			return
		}
		data, _ := jsonrpc.Encode(AbandonedError(id, NodeOf(n.instance)))
		n.Go(func(ctx context.Context) {
			cctx, cancel := context.WithTimeout(ctx, n.leaseTTL)
			defer cancel()
			n.retryLater(cctx, "abandon "+stream, n.lim.WithDefaults().TTL, func(ctx context.Context) error {
				_, err := n.be.Events.Append(ctx, s.session, stream, data, true, n.lim)
				return err
			})
		})
	}
}

// AbandonedError ends a resumed stream whose producer stopped holding it.
func AbandonedError(id jsonrpc.ID, owner string) *jsonrpc.Message {
	return jsonrpc.ErrorResponse(id, jsonrpc.NewError(jsonrpc.CodeNodeLost,
		"the node running this request stopped before its response was recorded; retry it",
		map[string]any{"node": owner}))
}

// OwnerWatch is a followed stream whose producer is watched (see
// ownerLost).
type OwnerWatch struct {
	Session, Stream string
	Info            cluster.StreamInfo
}

// ownerLost appends an error for the stream's request, ending it, when
// its producing process holds no membership lease, and reports whether
// it did. The owner is a process (node id and incarnation), so a node
// restarted with the same id does not keep the streams of its previous
// process open. A store that does not answer is no proof of loss. It
// asks the store, not the node's view of live instances: the node-wide
// watch calls it only for the owners its view misses. No owner is taken
// for lost while the store misses this node's own lease too (see
// trustMembers).
func (n *Node) ownerLost(ctx context.Context, w *OwnerWatch) bool {
	if w.Info.Owner == n.instance {
		return false
	}
	alive, err := n.be.Members.Alive(ctx, w.Info.Owner)
	if err != nil || alive {
		return false
	}
	if trusted, err := n.trustMembers(ctx); err != nil || !trusted {
		return false
	}
	id, err := jsonrpc.ParseKey(w.Info.Request)
	if err != nil {
		return true
	}
	msg := jsonrpc.ErrorResponse(id, jsonrpc.NewError(jsonrpc.CodeNodeLost, "the node running this request stopped; retry it", map[string]any{"node": NodeOf(w.Info.Owner)}))
	data, _ := jsonrpc.Encode(msg)
	if _, err := n.be.Events.Append(ctx, w.Session, w.Stream, data, true, n.lim); err != nil {
		n.log.Debug().Err(err).Str("stream", w.Stream).Msg("lost-node error not appended")
	}
	return true
}
