package mcp

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// serveGet opens the session's standalone stream, or resumes a stream
// (POST or GET) from Last-Event-ID: the node serves it (ServeGet,
// Resume) onto a streamSink, from its set-up to its end, and the handler
// keeps the edge: the request's checks, the caller's admission, the
// response's writer and, on HTTP/1.1, the take-over of a GET stream's
// connection. An idle stream that is not taken over parks under it, so
// the checks run in getRequest, which returns first.
func (h *HTTPHandler) serveGet(w http.ResponseWriter, r *http.Request) {
	sess, eid, ok := h.getRequest(w, r)
	if !ok {
		return
	}
	s := &streamSink{h: h, w: w, r: r, session: sess.ID}
	o := coordinator.StreamOpen{Session: sess.ID, Prime: atLeast(sess.Version, Version20251125),
		Lifetime: h.opts.MaxStreamLifetime, Admit: s.admit}
	var err error
	if eid.Stream == "" {
		err = h.node.ServeGet(r.Context(), o, s)
	} else {
		err = h.node.Resume(r.Context(), o, eid.Stream, eid.Seq, s)
	}
	if err != nil {
		h.streamRefused(w, err)
	}
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
	sess, ok := h.loadSession(w, r, sid, jsonrpc.ID{})
	if !ok {
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

// streamRefused answers a stream the node did not open: the one place
// where its errors become a status.
func (h *HTTPHandler) streamRefused(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, coordinator.ErrNoStream):
		// The same answer for a stream of another session, so that
		// streams of other sessions cannot be probed.
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Last-Event-ID names no stream of this session"))
	case errors.Is(err, coordinator.ErrHistoryGone):
		writeError(w, http.StatusGone, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the stream's history after Last-Event-ID is no longer kept"))
	default:
		// A refusal of the caller's admission, the node's (bus down,
		// draining), or the store's.
		h.writeRefusal(w, jsonrpc.ID{}, err)
	}
}

// streamSink is the coordinator.Sink of a GET or resumed stream: an SSE
// writer on the response, started when the node opens the stream. A GET
// stream's connection is taken over from net/http once its set-up is
// done (Detach), and the stream then goes on with no goroutine waiting
// for its events: an idle stream keeps one goroutine, the one watching
// for the client's close.
type streamSink struct {
	h       *HTTPHandler
	w       http.ResponseWriter // until Open
	r       *http.Request       // until Detach
	session string
	sw      *sse.Writer
	taken   *takenStream // the connection, once taken over
	stop    func(error)  // ends the stream (Open's)
	counted bool         // in h.gets
	closed  func()       // ends the open-stream metric
	unwatch func() bool  // stops watching for the handler's Close
}

// admit takes the caller's place for one more stream (openStream), and
// counts the stream from before its first event, so that Drain, which
// ends it, waits for it even when it is taken over as Drain begins.
func (s *streamSink) admit() (func(), error) {
	h := s.h
	s.counted = h.gets.add()
	slot, err := h.openStream(s.r, s.session)
	if err != nil {
		s.uncount()
		return nil, err
	}
	return func() { slot(); s.uncount() }, nil
}

func (s *streamSink) uncount() {
	if s.counted {
		s.h.gets.done()
	}
}

// Open starts the response's event stream; the handler's Close ends it
// as a drain does. A GET stream's response is its connection's last, as
// the connection may be taken over (takeableHeader).
func (s *streamSink) Open(kind coordinator.StreamKind, stop func(error)) {
	h := s.h
	s.stop = stop
	s.sw = h.sseWriter(s.w, func() { stop(errStalled) })
	s.w = nil // the writer's now
	s.closed = h.metrics.StreamOpened(string(kind))
	s.unwatch = context.AfterFunc(h.ctx, func() { stop(jsonrpc.ErrDraining) })
	var header func(http.Header)
	if kind == coordinator.KindGet {
		header = takeableHeader(s.r, false)
	}
	s.sw.Start(header)
}

func (s *streamSink) Queue(stream string, seq uint64, data []byte) error {
	return s.sw.Queue(sse.Event{ID: sse.EventID{Stream: stream, Seq: seq}.String(), Data: data})
}

func (s *streamSink) Flush() error { return s.sw.Flush() }

func (s *streamSink) Retry(stream string, seq uint64) error {
	if stream == "" {
		return s.sw.Retry(s.h.opts.RetryHint)
	}
	return s.sw.Event(sse.Event{ID: sse.EventID{Stream: stream, Seq: seq}.String(), Retry: s.h.opts.RetryHint})
}

// End closes the writer, and the connection once taken over.
func (s *streamSink) End() {
	s.unwatch()
	s.sw.Close()
	if s.taken != nil {
		s.taken.end(s.h.opts.StreamWriteTimeout)
	}
	s.closed()
}

// Detach takes the stream's connection over from net/http (takeOver)
// and watches it for the client's close; it reports false, the stream
// left to the handler, when the connection cannot be taken. The
// request's access line and trace span end as its handler returns.
func (s *streamSink) Detach() bool {
	if !s.counted {
		return false // Close ran: it does not wait for the stream
	}
	if s.taken = takeOver(s.sw, s.r, false); s.taken == nil {
		return false
	}
	s.r = nil // net/http lets go of the request, its buffers and its connection's
	go s.taken.watch(s.gone)
	return true
}

// gone ends the stream whose client closed its taken connection.
func (s *streamSink) gone() { s.stop(context.Canceled) }
