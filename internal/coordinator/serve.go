package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flows 4 and 7 (docs/ARCHITECTURE.md, "The flows and their files") as one call each: ServeGet serves a
// session's GET stream, and Resume a stream resumed after Last-Event-ID
// (a GET stream, or a POST stream produced on any node), onto a Sink,
// from the set-up to the end. Behind them: the checks, the claims
// (the GET stream's, which takes it over from any connection holding it,
// and a follower's, which keeps a POST stream's producer going), the
// chores (RunUpkeep), the owner watch of a resumed POST stream, the
// tails, and the undoing of a set-up that fails.

// ServeGet serves the GET stream of o.Session: it takes the stream over
// (one connection holds it at a time, the newest wins) and follows its
// new events until the stream ends. It returns an error only when it
// opened nothing (Sink.Open was not called); a stream served returns nil
// once over, or at once when its sink detached (see Detacher).
func (n *Node) ServeGet(ctx context.Context, o StreamOpen, sink Sink) error {
	return n.serveGet(ctx, &o, GetCursor{}, false, false, sink)
}

// Resume serves the stream of o.Session that stream names (the stream
// part of a Last-Event-ID), replaying its events after seq: a GET stream
// is served as ServeGet serves it, from that cursor; a POST stream is
// followed until its final event (or its producer is lost: see
// ownerLost). Errors are as ServeGet's; ErrNoStream and ErrHistoryGone
// answer a stream the session does not have, or no longer keeps after
// seq.
func (n *Node) Resume(ctx context.Context, o StreamOpen, stream string, seq uint64, sink Sink) error {
	if b, hasB, ok := ParseGetEventStream(o.Session, stream); ok {
		return n.serveGet(ctx, &o, GetCursor{Own: seq, Broadcast: b}, true, hasB, sink)
	}
	return n.resumePost(ctx, &o, stream, seq, sink)
}

// serveGet serves a GET stream (see ServeGet) from after when resuming.
// A stream that stays with the caller parks in here for its whole life,
// so the set-up, with its many locals, runs in openGet, which returns
// first: the shallower the parked stack, the smaller the runtime shrinks
// it.
func (n *Node) serveGet(ctx context.Context, o *StreamOpen, after GetCursor, resume, resumeBroadcast bool, sink Sink) error {
	g, err := n.openGet(ctx, o, after, resume, resumeBroadcast, sink)
	if err != nil {
		return err
	}
	if d, ok := sink.(Detacher); ok && d.Detach() {
		g.unlink()
		n.tailGetFunc(g.ctx, g.session, g.after, g.event, sink.Flush, g.end)
		return nil
	}
	g.end(n.tailGet(g.ctx, g.session, g.after, g.event, sink.Flush))
	return nil
}

// getServe is a GET stream between its set-up and its end.
type getServe struct {
	n        *Node
	session  string
	sink     Sink
	ctx      context.Context
	conn     *Conn
	unlink   func() bool // parts the stream's context from the caller's
	remove   func()      // takes conn off the node's list
	admitted func()      // gives the caller's place back
	lifetime *time.Timer
	release  func() // gives the stream up (TakeGet)
	open     bool   // the sink was opened
	after    GetCursor
	last     uint64 // the stream's last own event at the set-up
}

// openGet sets up the GET stream of serveGet: the stream's cursor, the
// caller's place, the connection and its lifetime, the claim (taking the
// stream over), the sink with its priming event, and the chores. What a
// failed set-up took is given back.
func (n *Node) openGet(ctx context.Context, o *StreamOpen, after GetCursor, resume, resumeBroadcast bool, sink Sink) (_ *getServe, err error) {
	if err := n.Refusal(); err != nil {
		return nil, err
	}
	sid := o.Session
	g := &getServe{n: n, session: sid, sink: sink}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	if g.after, g.last, err = n.OpenGet(ctx, sid, after, resume, resumeBroadcast); err != nil {
		return nil, streamErr(err)
	}
	if g.admitted, err = o.admit(); err != nil {
		return nil, err
	}
	g.ctx, g.conn, g.unlink, g.remove = n.liveConn(ctx, sid, sid)
	if o.Lifetime > 0 {
		cancel := g.conn.Cancel
		g.lifetime = time.AfterFunc(o.Lifetime, func() { cancel(errLifetime) })
	}
	if g.release, err = n.takeGet(g.ctx, sid, g.conn); err != nil {
		return nil, streamErr(err)
	}
	sink.Open(KindGet, g.conn.Cancel)
	g.open = true
	if o.Prime {
		// The client gets a cursor to resume from even if the stream
		// carries nothing before the connection ends.
		_ = sink.Retry(GetEventStream(sid, g.after.Broadcast), g.after.Own)
	} else {
		_ = sink.Retry("", 0)
	}
	n.addUpkeep(g.ctx, Upkeep{
		Conn: g.conn, Claim: GetKey(sid), Session: sid,
		History: cluster.StreamRef{Session: sid, Stream: GetStreamID(sid)},
	})
	return g, nil
}

// event queues an event of the GET stream on its sink (the tail flushes
// each round of them at once); its id carries both positions of the
// cursor (GetEventStream).
func (g *getServe) event(ev cluster.Event, cur GetCursor, broadcast bool) error {
	if len(ev.Data) == 0 {
		return nil
	}
	if !broadcast && ev.Seq <= g.last {
		g.n.metrics.Replayed(1)
	}
	return g.sink.Queue(GetEventStream(g.session, cur.Broadcast), cur.Own, ev.Data)
}

// end ends the stream, whose tail ended with err.
func (g *getServe) end(err error) {
	g.n.endStream(g.sink, g.ctx, err)
	g.close()
}

// close gives back what the set-up took, the last taken first.
func (g *getServe) close() {
	if g.open {
		g.sink.End()
	}
	if g.release != nil {
		g.release()
	}
	if g.lifetime != nil {
		g.lifetime.Stop()
	}
	if g.conn != nil {
		g.unlink()
		g.remove()
		g.conn.Cancel(nil)
	}
	if g.admitted != nil {
		g.admitted()
	}
}

// resumePost replays a POST stream after seq and follows it live until
// its final event. If the process producing it dies first, the stream
// ends with a JSON-RPC error for the request (OwnerLost).
//
// The first replayed event waits only for the history's read and the
// caller's place (openResume: two round trips side by side on a remote
// store, no goroutine to wait on in memory): a node that resumes many
// streams at once (clients cut by the same network blip reconnect
// together) serves each without queueing it behind the others' work
// more often than it must. The claim that keeps the stream's producer
// going (which it looks for only every ResumeGrace) is taken beside the
// replay, under the caller's own session (so a stream of another
// session, which the read refuses, is not kept going by it), and given
// up when the stream ends; if it cannot be taken the stream ends, and
// the client resumes again from the last event it got.
func (n *Node) resumePost(ctx context.Context, o *StreamOpen, stream string, seq uint64, sink Sink) error {
	if err := n.Refusal(); err != nil {
		return err
	}
	sid := o.Session
	lctx, conn, unlink, remove := n.liveConn(ctx, sid, "")
	defer func() {
		unlink()
		remove()
		conn.Cancel(nil)
	}()
	claimed := make(chan func(), 1)
	go func() {
		release, err := n.Follow(lctx, sid, stream, conn)
		if err != nil {
			conn.Cancel(err)
		} else {
			// Kept alive once taken: a renewal before would find it
			// missing and end the stream as taken over.
			n.addUpkeep(lctx, Upkeep{Conn: conn, Claim: FollowKey(sid, stream)})
		}
		claimed <- release
	}()
	defer func() {
		if release := <-claimed; release != nil {
			release()
		}
	}()
	r := n.openResume(ctx, o, stream, seq)
	if r.admitted != nil {
		defer r.admitted()
	}
	if r.readErr != nil {
		return streamErr(r.readErr)
	}
	if r.admitErr != nil {
		return r.admitErr
	}
	sink.Open(KindResumed, conn.Cancel)
	defer sink.End()
	jobs := Upkeep{Conn: conn, History: cluster.StreamRef{Session: sid, Stream: stream}}
	if info := r.head.Info; !info.Done && info.Owner != "" {
		jobs.Owner = &OwnerWatch{Session: sid, Stream: stream, Info: info}
	}
	n.addUpkeep(lctx, jobs)
	info, err := n.Tail(lctx, sid, stream, seq, r.head, n.historyEvents(sink, stream, r.head.Info.Last), sink.Flush)
	if errors.Is(err, cluster.ErrNotFound) && lctx.Err() == nil {
		historyVanished(sink, stream, info)
	}
	n.endStream(sink, lctx, err)
	return nil
}

// ErrHistoryVanished ends a resumed POST stream whose history vanished
// from the store before its final response (an evicting Redis, or one
// that lost its data): nothing more of the call can reach the client.
var ErrHistoryVanished = jsonrpc.NewError(jsonrpc.CodeUnavailable,
	"the shared state lost this request's stream before its response; its outcome is unknown: retry it", nil)

// historyVanished writes the request's error to a resumed stream whose
// history is gone (info as last read), after its last event.
func historyVanished(sink Sink, stream string, info cluster.StreamInfo) {
	id, err := jsonrpc.ParseKey(info.Request)
	if err != nil || info.Done {
		return
	}
	data, _ := jsonrpc.Encode(jsonrpc.ErrorResponse(id, ErrHistoryVanished))
	if sink.Queue(stream, info.Last+1, data) == nil {
		_ = sink.Flush()
	}
}

// resumeOpening is what openResume found: the history to replay (or
// why not) and the caller's place for the stream (or its refusal).
type resumeOpening struct {
	head     cluster.History
	readErr  error
	admitted func()
	admitErr error
}

// openResume reads the history of a resumed stream after seq (see
// readResume) and takes the caller's place for one more stream
// (StreamOpen.Admit): side by side when the store's calls are round
// trips, one after the other (no goroutine to wait on) when they are
// not.
func (n *Node) openResume(ctx context.Context, o *StreamOpen, stream string, seq uint64) (r resumeOpening) {
	if !n.be.Remote {
		r.head, r.readErr = n.readResume(ctx, o.Session, stream, seq)
		r.admitted, r.admitErr = o.admit()
		return r
	}
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		r.admitted, r.admitErr = o.admit()
	}()
	r.head, r.readErr = n.readResume(ctx, o.Session, stream, seq)
	<-placed
	return r
}

// historyEvents queues a resumed stream's events on sink (the tail
// flushes each round of them at once), counting those up to replayedUpTo
// (history the client missed) as replayed; priming events (no data) are
// not replayed.
func (n *Node) historyEvents(sink Sink, stream string, replayedUpTo uint64) func(cluster.Event) error {
	return func(ev cluster.Event) error {
		if len(ev.Data) == 0 {
			return nil
		}
		if ev.Seq <= replayedUpTo {
			n.metrics.Replayed(1)
		}
		return sink.Queue(stream, ev.Seq, ev.Data)
	}
}
