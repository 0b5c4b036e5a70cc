package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// postOut is the outbound side of one POST request: a JSON response
// that upgrades to an SSE stream the first time the handler sends
// something before its result. On handshake-era revisions every event is
// appended to the stream's shared history before it is written, so the
// client can resume the stream on any node. Its events are recorded in
// group commits (coordinator.Producer): a notification is queued and
// written to the client once recorded (the events of one commit with one
// write and one flush), while the handler goes on; a
// server request and the final response wait for theirs.
type postOut struct {
	h       *HTTPHandler
	req     *Request
	w       http.ResponseWriter
	conn    context.Context // the HTTP request's context: done on disconnect
	session string
	legacy  bool
	sseOK   bool

	start    time.Time
	mu       sync.Mutex
	sw       *sse.Writer
	stream   string
	refused  bool
	closed   func()        // ends the open-stream metric
	detached chan struct{} // closed when the server closed the connection early
	detachMu sync.Once
	prod     *coordinator.PostStream // legacy streams: recorded, held and listed by the node
	primed   bool                    // the stream's start was recorded and written
	lost     error                   // an *unrecorded notification the handler was not told of
}

func (h *HTTPHandler) newPostOut(w http.ResponseWriter, r *http.Request, req *Request, session string) *postOut {
	req.edge = noteMethod(r.Context(), req.Method)
	return &postOut{
		h: h, req: req, w: w, conn: r.Context(), session: session,
		legacy: !req.modern, sseOK: acceptable(r, "text/event-stream"),
		detached: make(chan struct{}), start: time.Now(),
	}
}

func (p *postOut) closeStream() {
	// SSE polling is a 2025-11-25 feature: older clients may not resume.
	if !p.legacy || !atLeast(p.req.version, Version20251125) {
		return
	}
	// Polling needs an event id to resume from: open the stream (with its
	// priming event on 2025-11-25) if the handler has sent nothing yet.
	p.mu.Lock()
	err := p.upgrade(context.WithoutCancel(p.conn))
	prod := p.prod
	p.mu.Unlock()
	if err != nil {
		return
	}
	<-prod.Sync()
	p.mu.Lock()
	primed := p.primed
	p.mu.Unlock()
	if primed {
		p.detach()
	}
}

// detach closes the client's connection early with a retry hint; the
// handler goes on and its events land in history.
func (p *postOut) detach() {
	p.detachMu.Do(func() {
		p.mu.Lock()
		sw := p.sw
		p.mu.Unlock()
		if sw != nil {
			sw.Detach(p.h.opts.RetryHint)
		}
		close(p.detached)
	})
}

// upgrade turns the response into an SSE stream; p.mu is held.
func (p *postOut) upgrade(ctx context.Context) error {
	if p.sw != nil {
		return nil
	}
	if !p.sseOK {
		p.refused = true
		return errNotAcceptable
	}
	var onFail func()
	if p.legacy {
		// A client that stopped reading loses the connection; the
		// request goes on in history for as long as a resume may come.
		onFail = func() { go p.detach() }
	}
	sw := p.h.sseWriter(p.w, onFail)
	if p.legacy {
		p.stream = sse.NewStreamID()
		// The stream is opened with its first batch of events. Each
		// batch's events are queued as they are delivered and go out
		// with one flush, before the batch's waiters go on. Drain and
		// session end close the connection of a live stream.
		p.prod = p.h.node.OpenPost(p.session, p.stream, p.req.id.Key(), func() { _ = sw.Flush() }, p.detach)
	}
	p.sw = sw
	// The headers go out with the first events (one write, not two).
	sw.StartBuffered(nil)
	if p.legacy && atLeast(p.req.version, Version20251125) {
		// The priming event gives the client an id to resume from
		// (2025-11-25; older clients may not expect an empty event):
		// the start of the stream, sequence 0, which costs no append. It
		// is written once the stream's open, folded into its first batch
		// of events, is recorded, so a resume from it finds the stream.
		p.prod.Start(func(err error) {
			if err != nil {
				return // the events after it fail alike and say so
			}
			_ = sw.Queue(sse.Event{ID: sse.EventID{Stream: p.stream}.String(), Retry: p.h.opts.RetryHint})
			p.mu.Lock()
			p.primed = true
			p.mu.Unlock()
		})
	}
	p.closed = p.h.metrics.StreamOpened("post")
	return nil
}

// emit writes one message on the stream. On handshake-era revisions it
// is recorded first, and written once recorded: a notification is
// queued (emit returns at once, unless HTTPOptions.MaxStreamBacklog are queued) and a
// failure to record it is the error of the handler's next emit (or of
// the call, see lostError); a server request and the final (wait set)
// return once recorded, or with the failure.
func (p *postOut) emit(ctx context.Context, msg *jsonrpc.Message, final, wait bool) error {
	data, err := jsonrpc.Encode(msg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if err := p.upgrade(ctx); err != nil {
		p.mu.Unlock()
		return err
	}
	sw := p.sw
	if !p.legacy {
		p.mu.Unlock()
		if !final {
			_ = sw.Event(sse.Event{Data: data})
			return nil
		}
		_ = queueEvent(sw, sse.Event{Data: data}, true)
		_ = sw.Flush()
		return nil
	}
	if lost := p.lost; lost != nil && !final {
		// The stream ended at an event it could not record: nothing
		// after it is sent, and the call fails (lostError) even when
		// the handler ignores this error.
		p.mu.Unlock()
		return lost
	}
	var failed error
	deliver := func(seq uint64, err error) {
		ev := sse.Event{Data: data}
		if err != nil {
			if final {
				// The live connection gets its final message whatever
				// happens to the history (without an id: it cannot
				// be resumed from); the caller records it later.
				_ = queueEvent(sw, ev, true)
			}
			failed = &unrecorded{data: data, err: err}
			// The stream ends here, so the call does too, whatever
			// the handler makes of the error (a server request's
			// failure may become a tool result): see lostError.
			p.mu.Lock()
			if p.lost == nil && !final {
				p.lost = failed
			}
			p.mu.Unlock()
			return
		}
		ev.ID = sse.EventID{Stream: p.stream, Seq: seq}.String()
		_ = queueEvent(sw, ev, final) // a dead connection is not an error: the history has it
	}
	var done <-chan struct{}
	var backlog int
	if wait {
		done, backlog = p.prod.Add(data, final, deliver)
	} else {
		done, backlog = p.prod.Notify(data, deliver) // may wait for company: see Producer.Notify
	}
	p.mu.Unlock()
	if wait || backlog > p.h.opts.MaxStreamBacklog {
		<-done
	}
	if wait {
		return failed
	}
	return nil
}

// queueEvent queues ev on sw; the final message is the stream's last
// event: the response ends right after, and its end sends the event with
// the end of the body in one write (sse.Writer.QueueLast).
func queueEvent(sw *sse.Writer, ev sse.Event, final bool) error {
	if final {
		return sw.QueueLast(ev)
	}
	return sw.Queue(ev)
}

// lostError waits until the stream's queued events are recorded and
// returns the failure to record one of them, once: the stream ended at
// that event, so the call fails with it, whether or not the handler was
// told (a notification's failure reaches it only at its next emit, and
// it may ignore it or turn it into a result).
func (p *postOut) lostError() error {
	p.mu.Lock()
	prod := p.prod
	p.mu.Unlock()
	if prod == nil {
		return nil
	}
	<-prod.Sync()
	p.mu.Lock()
	defer p.mu.Unlock()
	lost := p.lost
	p.lost = nil
	return lost
}

func (p *postOut) notify(ctx context.Context, msg *jsonrpc.Message) error {
	return p.emit(ctx, msg, false, false)
}

func (p *postOut) streaming() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sw != nil
}

func (p *postOut) nextEventID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.legacy || p.prod == nil {
		return ""
	}
	return sse.EventID{Stream: p.stream, Seq: p.prod.Next()}.String()
}

// request sends a server→client request on this stream and waits for the
// reply, which may arrive on any node. If the connection drops, the
// client may resume the stream elsewhere and answer; when nobody follows
// the stream for ResumeGrace, the request fails.
func (p *postOut) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if !p.legacy {
		return nil, ErrNoChannel
	}
	w := p.h.node.Waiters
	waiter, err := w.Register(p.session, p.req.principal.ID(), w.NewID(), "post")
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, err.Error(), nil)
	}
	msg, err := jsonrpc.Request(waiter.ID, method, params)
	if err != nil {
		waiter.Cancel()
		return nil, err
	}
	if err := p.emit(ctx, msg, false, true); err != nil {
		waiter.Cancel()
		if errors.Is(err, errNotAcceptable) {
			return nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "the client does not accept text/event-stream, which a server request needs", nil)
		}
		return nil, err
	}
	res, err := waiter.Wait(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, jsonrpc.ErrConnectionClosed) {
		if errors.Is(context.Cause(ctx), errClientGone) {
			return nil, errNotResumed
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeRequestTimeout, "%s: no reply from the client in time", method)
	}
	return res, err
}

// errClientGone cancels a request whose client left: its connection is
// gone and no stream resumes it.
var errClientGone = errors.New("mcp: the client's connection closed and nothing resumed the request")

// errNotResumed fails a server→client request of an abandoned request.
var errNotResumed = jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "the client's connection closed and the stream was not resumed", nil)

// abandoned runs once the request's connection is gone. An answer that
// was not streamed gave the client nothing to resume from, so the request
// is cancelled at once; a streamed one is cancelled when no connection
// follows its stream for ResumeGrace. It returns when ctx ends.
func (p *postOut) abandoned(ctx context.Context, cancel context.CancelCauseFunc) {
	if !p.streaming() {
		cancel(errClientGone)
		return
	}
	p.prod.WatchResume(ctx, p.h.opts.ResumeGrace, cancel, errClientGone)
}

// observe records a request's outcome in the metrics.
func (h *HTTPHandler) observe(req *Request, res json.RawMessage, err error, d time.Duration) {
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "error"
		if isUnavailable(err) {
			h.metrics.BackendError()
		}
	case req.modern && bytes.Contains(res, []byte(`"resultType":"input_required"`)):
		outcome = "input_required"
	}
	h.metrics.Request(req.Method, outcome, d)
}
