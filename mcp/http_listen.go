package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// listenConn is a subscriptions/listen stream on this node.
type listenConn struct {
	id     jsonrpc.ID
	filter listenFilter
	sw     *sse.Writer
	end    context.CancelFunc // ends the stream with the listen result

	mu     sync.Mutex // orders the acknowledgement, notifications and the result
	over   bool       // the result was sent: nothing may follow it
	abrupt bool       // end without the result: the client should listen again

	// queue holds notifications for the stream's handler to write, so
	// that the bus does not wait on one client's connection.
	queue  chan *jsonrpc.Message
	closed atomic.Bool // the handler takes no more notifications
}

// A listen stream may fall behind by listenQueue notifications; past
// that the bus waits for room while the stream's writes make progress,
// and ends the stream once one write has been blocked for listenWait:
// its client stopped reading.
const (
	listenQueue = 256
	listenWait  = time.Second
)

// enqueue hands a notification to the stream's handler.
// Wants, Notify and End make a listen stream a coordinator.Listener.
func (c *listenConn) Wants(method, uri string) bool { return c.filter.wants(method, uri) }

func (c *listenConn) Notify(method, uri string) { c.enqueue(listenNotification(c.id, method, uri)) }

func (c *listenConn) End(abrupt bool) {
	if abrupt {
		c.mu.Lock()
		c.abrupt = true
		c.mu.Unlock()
	}
	c.end()
}

func (c *listenConn) enqueue(msg *jsonrpc.Message) {
	if c.closed.Load() {
		return
	}
	select {
	case c.queue <- msg:
		return
	default:
	}
	t := time.NewTicker(listenWait / 10)
	defer t.Stop()
	for {
		select {
		case c.queue <- msg:
			return
		case <-t.C:
		}
		if c.closed.Load() {
			return
		}
		if c.sw.BlockedFor() > listenWait {
			c.closed.Store(true)
			c.end()
			return
		}
	}
}

// hold queues msg on the stream's writer, for its next flush.
func (c *listenConn) hold(msg *jsonrpc.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdLocked(msg)
}

func (c *listenConn) holdLocked(msg *jsonrpc.Message) {
	if c.over {
		return
	}
	if data, err := jsonrpc.Encode(msg); err == nil {
		_ = c.sw.Queue(sse.Event{Data: data})
	}
}

// sendLocked writes msg (after the messages held) and flushes.
func (c *listenConn) sendLocked(msg *jsonrpc.Message) {
	c.holdLocked(msg)
	_ = c.sw.Flush()
}

// listen serves subscriptions/listen through the receiving middleware;
// a refusal is the request's JSON-RPC error.
func (h *HTTPHandler) listen(w http.ResponseWriter, r *http.Request, req *Request) {
	answered := false
	_, err := h.srv.receive(r.Context(), req, func(ctx context.Context, _ string, req *Request) (json.RawMessage, error) {
		f, err := h.srv.parseListen(req.Params)
		if err != nil {
			return nil, err
		}
		answered = true
		h.serveListen(w, r.WithContext(ctx), req, f)
		return nil, nil
	})
	if err != nil && !answered {
		writeError(w, http.StatusOK, req.id, err)
	}
}

// serveListen serves subscriptions/listen: the acknowledgement first,
// then the notifications asked for, changed on any node, until the
// client leaves; a draining node ends it with the listen result. On
// HTTP/1.1, without receiving middleware (which sees a request end when
// its handler returns), the stream's connection is taken over from
// net/http once the acknowledgement is out (takeOverListen).
func (h *HTTPHandler) serveListen(w http.ResponseWriter, r *http.Request, req *Request, f listenFilter) {
	if !req.tasksNegotiated() {
		f.TaskIDs = nil
	}
	if !acceptable(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, req.id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "subscriptions/listen needs text/event-stream"))
		return
	}
	slot, err := h.openStream(r, "")
	if err != nil {
		h.writeRefusal(w, req.id, err)
		return
	}
	l := &listenStream{req: req}
	if l.counted = h.gets.add(); l.counted {
		l.undo = append(l.undo, h.gets.done)
	}
	l.undo = append(l.undo, slot)
	// The stream's context follows the request's until the take-over.
	rctx := r.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(rctx))
	l.ctx, l.cancel, l.unlink = ctx, cancel, context.AfterFunc(rctx, cancel)
	stop := context.AfterFunc(h.ctx, cancel)
	l.undo = append(l.undo, func() { l.unlink(); cancel() }, func() { stop() })
	// A client that stopped reading loses the stream.
	c := &listenConn{id: req.id, filter: f, sw: h.sseWriter(w, cancel), end: cancel, queue: make(chan *jsonrpc.Message, listenQueue)}
	l.c = c
	l.undo = append(l.undo, func() { l.endConn(h.opts.StreamWriteTimeout) })
	// The stream is listed before the acknowledgement, so nothing changed
	// after it is missed, and c.mu is held until the acknowledgement is
	// written, so no notification comes before it.
	c.mu.Lock()
	unlist := h.node.Local.AddListener(c)
	l.undo = append(l.undo, h.metrics.StreamOpened("listen"))
	c.sw.Start(takeableHeader(r, true))
	c.sendLocked(listenAck(req.id, f))
	c.mu.Unlock()
	if h.Draining() {
		cancel() // Drain ran before the stream was listed
	}
	lifetime := time.AfterFunc(h.opts.MaxStreamLifetime, cancel)
	l.undo = append(l.undo, unlist, func() { lifetime.Stop() })
	if h.takeOverListen(l, r) {
		return
	}
	h.runListen(l, func() bool { return rctx.Err() == nil })
}

// listenStream is a subscriptions/listen stream between its set-up and
// its end.
type listenStream struct {
	req     *Request
	c       *listenConn
	ctx     context.Context
	cancel  context.CancelFunc
	unlink  func() bool  // parts the stream's context from the request's
	taken   *takenStream // the connection, once taken over
	gone    atomic.Bool  // the client closed the taken connection
	counted bool         // in h.gets
	undo    undoList
}

// endConn closes the stream's writer, and its connection once taken over.
func (l *listenStream) endConn(timeout time.Duration) {
	l.c.sw.Close()
	if l.taken != nil {
		l.taken.end(timeout)
	}
}

// takeOverListen takes the connection of the listen stream l over from
// net/http (takeOver; its body was read) and runs the stream on a
// goroutine of its own, with one more watching for the client's close.
// It reports false, the stream left to the handler, when it cannot.
func (h *HTTPHandler) takeOverListen(l *listenStream, r *http.Request) bool {
	if !l.counted || len(h.srv.receiving()) > 0 {
		return false
	}
	if l.taken = takeOver(l.c.sw, r, true); l.taken == nil {
		return false
	}
	l.unlink()
	go l.taken.watch(func() {
		l.gone.Store(true)
		l.cancel()
	})
	go h.runListen(l, func() bool { return !l.gone.Load() })
	return true
}

// runListen writes the notifications of the listen stream l until it
// ends, then its result unless the client is gone (here false) or it
// ended abruptly, and closes it.
func (h *HTTPHandler) runListen(l *listenStream, here func() bool) {
	defer l.undo.run()
	c, ctx, req := l.c, l.ctx, l.req
	for open := true; open; {
		select {
		case <-ctx.Done():
			open = false
		case msg := <-c.queue:
			// The notifications waiting (a burst) go out together,
			// with one write and one flush.
			for n := 1; msg != nil; n++ {
				if msg.Method == taskNotification {
					msg = h.taskNotice(ctx, req, msg)
				}
				if msg != nil {
					c.hold(msg)
				}
				msg = nil
				if n < listenQueue {
					select {
					case msg = <-c.queue:
					default:
					}
				}
			}
			_ = c.sw.Flush()
		}
	}
	c.closed.Store(true)
	c.mu.Lock()
	if here() && !c.abrupt {
		c.sendLocked(h.srv.listenResult(req.id)) // graceful end
	}
	c.over = true
	c.mu.Unlock()
}
