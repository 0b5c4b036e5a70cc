package mcp

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// serveGet opens the session's standalone stream, or resumes a stream
// (POST or GET) from Last-Event-ID. An idle stream parks under it, so
// the checks run in getRequest, which returns first.
func (h *HTTPHandler) serveGet(w http.ResponseWriter, r *http.Request) {
	sess, eid, ok := h.getRequest(w, r)
	if !ok {
		return
	}
	if eid.Stream == "" {
		h.followGet(w, r, sess, coordinator.GetCursor{}, false, false)
		return
	}
	if b, hasB, ok := coordinator.ParseGetEventStream(sess.ID, eid.Stream); ok {
		h.followGet(w, r, sess, coordinator.GetCursor{Own: eid.Seq, Broadcast: b}, true, hasB)
		return
	}
	h.resumePost(w, r, sess, eid)
}

// getRequest checks a GET request, and returns its session and its
// Last-Event-ID (zero without one), or answers it and returns false.
func (h *HTTPHandler) getRequest(w http.ResponseWriter, r *http.Request) (*session.Session, sse.EventID, bool) {
	if v := r.Header.Get(headerVersion); v != "" && IsModernVersion(v) {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "protocol version %s has no GET stream; use subscriptions/listen", v))
		return nil, sse.EventID{}, false
	}
	if v := r.Header.Get(headerVersion); v != "" && !IsSupportedVersion(v) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, UnsupportedVersionError(v))
		return nil, sse.EventID{}, false
	}
	if !acceptable(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Accept must allow text/event-stream"))
		return nil, sse.EventID{}, false
	}
	sid := r.Header.Get(headerSession)
	if sid == "" {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "missing %s header", headerSession))
		return nil, sse.EventID{}, false
	}
	if !h.node.BusReady() {
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, coordinator.ErrBusDown)
		return nil, sse.EventID{}, false
	}
	sess, ok := h.loadSession(w, r, sid, jsonrpc.ID{})
	if !ok {
		return nil, sse.EventID{}, false
	}
	if h.node.Draining() {
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.ErrDraining)
		return nil, sse.EventID{}, false
	}
	last := r.Header.Get(headerLastID)
	if last == "" {
		return sess, sse.EventID{}, true
	}
	eid, err := sse.ParseEventID(last)
	if err != nil {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "malformed Last-Event-ID"))
		return nil, sse.EventID{}, false
	}
	return sess, eid, true
}

// streamError writes the answer for a stream that cannot be read.
func streamError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, cluster.ErrNotFound), errors.Is(err, cluster.ErrForbidden):
		// The same answer for both, so streams of other sessions
		// cannot be probed.
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Last-Event-ID names no stream of this session"))
	case errors.Is(err, cluster.ErrEvicted):
		writeError(w, http.StatusGone, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the stream's history after Last-Event-ID is no longer kept"))
	default:
		writeError(w, statusOf(err, false), jsonrpc.ID{}, rpcError(err))
	}
}

// liveStream sets up an SSE connection that session-wide events (end,
// take-over, drain) can cancel. Its context ends with the request's
// until unlink is called: a stream whose connection was taken over
// (takeOver) outlives its request.
func (h *HTTPHandler) liveStream(r *http.Request, session, getFor string) (ctx context.Context, c *coordinator.Conn, unlink func() bool, done func()) {
	rctx := r.Context() // not r: a taken-over stream does not keep its request
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(rctx))
	unlink = context.AfterFunc(rctx, func() { cancel(context.Cause(rctx)) })
	c = &coordinator.Conn{ID: h.node.NewConnID(), Cancel: cancel, GetFor: getFor}
	remove := h.node.Local.AddConn(session, c)
	stop := context.AfterFunc(h.ctx, func() { cancel(coordinator.ErrDrain) })
	return ctx, c, unlink, func() { stop(); unlink(); remove(); cancel(nil) }
}

// followGet serves the session's GET stream: it takes the stream over
// (one connection per session holds it, the newest wins), replays from
// after when resuming, and follows new events until the client leaves.
// Its event ids carry both positions of the cursor (GetEventStream).
// On HTTP/1.1 the stream then goes on on goroutines of its own, its
// connection taken over from net/http (takeOverGet); otherwise it parks
// in here for its whole life, so the set-up, with its many locals, runs
// in openGet, which returns first: the shallower the parked stack, the
// smaller the runtime shrinks it.
func (h *HTTPHandler) followGet(w http.ResponseWriter, r *http.Request, sess *session.Session, after coordinator.GetCursor, resume, resumeBroadcast bool) {
	g := h.openGet(w, r, sess, after, resume, resumeBroadcast)
	if g == nil || h.takeOverGet(g, r) {
		return
	}
	h.runGet(g)
}

// runGet follows the GET stream g until it ends, and closes it.
func (h *HTTPHandler) runGet(g *getStream) {
	defer g.close()
	h.endStream(g.sw, g.ctx, h.node.TailGet(g.ctx, g.sid, g.after, h.getEvents(g), g.sw.Flush))
}

// getEvents queues the events of the GET stream g on its writer: the
// tail flushes each round of them at once.
func (h *HTTPHandler) getEvents(g *getStream) func(ev cluster.Event, cur coordinator.GetCursor, broadcast bool) error {
	sid, sw, last := g.sid, g.sw, g.last
	return func(ev cluster.Event, cur coordinator.GetCursor, broadcast bool) error {
		if len(ev.Data) == 0 {
			return nil
		}
		if !broadcast && ev.Seq <= last {
			h.metrics.Replayed(1)
		}
		return sw.Queue(sse.Event{ID: getEventID(sid, cur), Data: ev.Data})
	}
}

// takeOverGet takes the connection of the GET stream g over from
// net/http (takeOver), and follows the stream with no goroutine waiting
// for its events (TailGetFunc): an idle stream keeps one goroutine, the
// one watching for the client's close. It reports false, the stream
// left to the handler, when the connection cannot be taken. The
// request's access line and trace span end here, as its handler returns.
func (h *HTTPHandler) takeOverGet(g *getStream, r *http.Request) bool {
	if !g.counted {
		return false // Close ran: it does not wait for the stream
	}
	if g.taken = takeOver(g.sw, r, false); g.taken == nil {
		return false
	}
	g.unlink()
	go g.taken.watch(func() { g.conn.Cancel(context.Canceled) })
	h.node.TailGetFunc(g.ctx, g.sid, g.after, h.getEvents(g), g.sw.Flush, func(err error) {
		h.endStream(g.sw, g.ctx, err)
		g.close()
	})
	return true
}

// getStream is a GET stream between its set-up and its end.
type getStream struct {
	ctx     context.Context
	sid     string
	conn    *coordinator.Conn
	unlink  func() bool // parts the stream's context from the request's
	sw      *sse.Writer
	taken   *takenStream // the connection, once taken over
	counted bool         // in h.gets
	after   coordinator.GetCursor
	last    uint64
	undo    undoList
}

// close runs the clean-ups.
func (g *getStream) close() { g.undo.run() }

// undoList is the clean-ups of a stream's set-up, in the order they were
// taken.
type undoList []func()

// run runs the clean-ups, the last taken first.
func (u undoList) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// openGet sets up the GET stream of followGet, or answers the request
// with the refusal and returns nil.
func (h *HTTPHandler) openGet(w http.ResponseWriter, r *http.Request, sess *session.Session, after coordinator.GetCursor, resume, resumeBroadcast bool) *getStream {
	sid := sess.ID
	g := &getStream{sid: sid}
	ok := false
	defer func() {
		if !ok {
			g.close()
		}
	}()
	// Counted from before its first event, so that Drain, which ends it,
	// waits for it even when it is taken over as Drain begins.
	if g.counted = h.gets.add(); g.counted {
		g.undo = append(g.undo, h.gets.done)
	}
	after, last, err := h.node.OpenGet(r.Context(), sid, after, resume, resumeBroadcast)
	if err != nil {
		streamError(w, err)
		return nil
	}
	g.after, g.last = after, last
	slot, err := h.openStream(r, sid)
	if err != nil {
		h.writeRefusal(w, jsonrpc.ID{}, err)
		return nil
	}
	g.undo = append(g.undo, slot)
	ctx, conn, unlink, done := h.liveStream(r, sid, sid)
	g.ctx, g.conn, g.unlink = ctx, conn, unlink
	g.undo = append(g.undo, done)
	lifetime := time.AfterFunc(h.opts.MaxStreamLifetime, func() { conn.Cancel(errLifetime) })
	g.undo = append(g.undo, func() { lifetime.Stop() }, h.metrics.StreamOpened("get"))
	release, err := h.node.TakeGet(ctx, sid, conn)
	if err != nil {
		streamError(w, err)
		return nil
	}
	g.undo = append(g.undo, release)
	g.sw = h.streamWriter(w, conn)
	g.undo = append(g.undo, func() {
		g.sw.Close()
		if g.taken != nil {
			g.taken.end(h.opts.StreamWriteTimeout)
		}
	})
	g.sw.Start(takeableHeader(r, false))
	if atLeast(sess.Version, Version20251125) {
		// Priming: the client gets a cursor to resume from even if the
		// stream carries nothing before the connection ends.
		_ = g.sw.Event(sse.Event{ID: getEventID(sid, after), Retry: h.opts.RetryHint})
	} else {
		_ = g.sw.Retry(h.opts.RetryHint)
	}
	h.node.RunUpkeep(ctx, coordinator.Upkeep{
		Conn: conn, Claim: coordinator.GetKey(sid), Session: sid,
		History: cluster.StreamRef{Session: sid, Stream: coordinator.GetStreamID(sid)},
	})
	ok = true
	return g
}

// getEventID is the id of a GET stream's event at cur.
func getEventID(session string, cur coordinator.GetCursor) string {
	return sse.EventID{Stream: coordinator.GetEventStream(session, cur.Broadcast), Seq: cur.Own}.String()
}

// historyWriter queues a stream's events on sw (the tail flushes each
// round of them at once), counting those up to replayedUpTo (history the
// client missed) as replayed.
func (h *HTTPHandler) historyWriter(sw *sse.Writer, stream string, replayedUpTo uint64) func(cluster.Event) error {
	return func(ev cluster.Event) error {
		if ev.Seq <= replayedUpTo && len(ev.Data) > 0 {
			h.metrics.Replayed(1)
		}
		return queueHistoryEvent(sw, stream, ev)
	}
}

// queueHistoryEvent queues an event from a stream's history; priming
// events (empty data) are not replayed.
func queueHistoryEvent(sw *sse.Writer, stream string, ev cluster.Event) error {
	if len(ev.Data) == 0 {
		return nil
	}
	return sw.Queue(sse.Event{ID: sse.EventID{Stream: stream, Seq: ev.Seq}.String(), Data: ev.Data})
}

// endStream closes a stream; a draining node, or a stream that reached
// its lifetime, first tells the client when to reconnect.
func (h *HTTPHandler) endStream(sw *sse.Writer, ctx context.Context, err error) {
	if cause := context.Cause(ctx); errors.Is(cause, coordinator.ErrDrain) || errors.Is(cause, errLifetime) {
		_ = sw.Retry(h.opts.RetryHint)
	}
	if err != nil && ctx.Err() == nil {
		h.log.Debug().Err(err).Msg("stream ended")
	}
}

// resumePost replays a POST stream after eid and follows it live until
// its final response. If the node producing it dies first, the stream
// ends with a JSON-RPC error for the request.
//
// The first replayed event waits only for the history's read and the
// caller's stream place (openResume: two round trips side by side on
// Redis, no goroutine to wait on in memory): a node that resumes many
// streams at once (clients cut by the same network blip reconnect
// together) serves each without queueing it behind the others' work
// more often than it must. The claim that keeps the stream's producer
// going (which it looks for only every ResumeGrace) is taken beside the
// replay, under the caller's own session (so a stream of another
// session, which the read refuses, is not kept going by it), and given up
// when the handler returns; if it cannot be taken the stream ends, and
// the client resumes again from the last event it got.
func (h *HTTPHandler) resumePost(w http.ResponseWriter, r *http.Request, sess *session.Session, eid sse.EventID) {
	sid := sess.ID
	ctx, conn, _, done := h.liveStream(r, sid, "")
	defer done()
	claimed := make(chan func(), 1)
	go func() {
		release, err := h.node.Follow(ctx, sid, eid.Stream, conn)
		if err != nil {
			conn.Cancel(err)
		} else {
			// Kept alive once taken: a renewal before would find it
			// missing and end the stream as taken over.
			h.node.RunUpkeep(ctx, coordinator.Upkeep{Conn: conn, Claim: coordinator.FollowKey(sid, eid.Stream)})
		}
		claimed <- release
	}()
	defer func() {
		if release := <-claimed; release != nil {
			release()
		}
	}()
	o := h.openResume(r, sid, eid)
	if o.slot != nil {
		defer o.slot()
	}
	if o.readErr != nil {
		streamError(w, o.readErr)
		return
	}
	if o.slotErr != nil {
		h.writeRefusal(w, jsonrpc.ID{}, o.slotErr)
		return
	}
	head := o.head
	defer h.metrics.StreamOpened("resume")()
	sw := h.streamWriter(w, conn)
	defer sw.Close()
	sw.Start(nil)
	jobs := coordinator.Upkeep{Conn: conn, History: cluster.StreamRef{Session: sid, Stream: eid.Stream}}
	if info := head.Info; !info.Done && info.Owner != "" {
		jobs.Owner = &coordinator.OwnerWatch{Session: sid, Stream: eid.Stream, Info: info}
	}
	h.node.RunUpkeep(ctx, jobs)
	h.endStream(sw, ctx, h.node.Tail(ctx, sid, eid.Stream, eid.Seq, head, h.historyWriter(sw, eid.Stream, head.Info.Last), sw.Flush))
}

// resumeOpening is what openResume found: the history to replay (or
// why not) and the caller's place for the stream (or its refusal).
type resumeOpening struct {
	head    cluster.History
	readErr error
	slot    func()
	slotErr error
}

// openResume reads the history of a resumed stream after eid (see
// Node.OpenResume) and takes the caller's place for one more stream
// (openStream): side by side when the backend's calls are round trips,
// one after the other (no goroutine to wait on) when they are not.
func (h *HTTPHandler) openResume(r *http.Request, sid string, eid sse.EventID) (o resumeOpening) {
	if !h.be.Remote {
		o.head, o.readErr = h.node.OpenResume(r.Context(), sid, eid.Stream, eid.Seq)
		o.slot, o.slotErr = h.openStream(r, sid)
		return o
	}
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		o.slot, o.slotErr = h.openStream(r, sid)
	}()
	o.head, o.readErr = h.node.OpenResume(r.Context(), sid, eid.Stream, eid.Seq)
	<-placed
	return o
}
