package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/stdio"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// StdioOptions configure ServeStdio.
//
// A zero field means its documented default (DefaultStdioOptions); a
// negative one is an error (Validate).
type StdioOptions struct {
	// MaxLineBytes bounds one inbound line (default 4 MiB).
	MaxLineBytes int
	// DrainTimeout bounds how long requests still running at end of
	// input may take to finish and answer (default 20s); then they are
	// cancelled.
	DrainTimeout time.Duration
	// MaxBatch bounds the members of a 2025-03-26 batch line (default
	// 64, HTTPOptions.MaxBatch's); a larger batch gets one JSON-RPC
	// error and none of it runs.
	MaxBatch int
	// MaxHandlers bounds the request handlers running at once on the
	// connection, each batch member counting (default 64, as
	// HTTPOptions.MaxSessionHandlers, an HTTP session's share of a node);
	// more get a -31000 error at once.
	MaxHandlers int
}

// ServeStdio serves the server over a newline-delimited JSON-RPC byte
// stream (stdin/stdout of a process, or any full-duplex pair) until end
// of input, a read error or ctx ends. Requests run concurrently; replies
// to the server's own requests are matched by id; writes never
// interleave. Messages take effect in the order they are read:
// initialize is answered before the next line is read, a notification
// (initialized, cancelled) acts at once, and a request sees the session
// as it was when the request was read.
//
// At end of input every pending server→client request fails at once,
// listen streams end, and requests still running get
// StdioOptions.DrainTimeout to finish and write their answers; then
// they are cancelled. When ctx ends, they are cancelled at once.
//
// Invalid options (see StdioOptions.Validate and ServerOptions.Validate)
// are an error before anything is read.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, opts *StdioOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &stdioConn{srv: s, ctx: ctx, inputEnd: make(chan struct{}), inflight: map[jsonrpc.ID]*inflightReq{}, listens: map[jsonrpc.ID]*listenFilter{}}
	o := stdio.Options{
		Logger:     s.base,
		OnInbound:  c.inbound,
		OnBatch:    c.batch,
		OnResponse: c.response,
		OnInvalid: func(err *jsonrpc.DecodeError) {
			_ = c.ch.Send(jsonrpc.ErrorResponse(err.ID, err.Err))
		},
		SendAfterEOF: true,
	}
	var so StdioOptions
	if opts != nil {
		so = *opts
	}
	if err := errors.Join(s.opts.Validate(), so.Validate()); err != nil {
		return err
	}
	o.MaxLineBytes = so.MaxLineBytes
	drain := orDefault(so.DrainTimeout, DefaultStdioOptions().DrainTimeout)
	c.maxBatch = orDefault(so.MaxBatch, DefaultStdioOptions().MaxBatch)
	c.maxHandlers = orDefault(so.MaxHandlers, DefaultStdioOptions().MaxHandlers)
	c.ch = stdio.New(r, w, o)
	defer c.ch.Close()
	s.attach(c)
	defer s.detach(c)
	err := c.ch.Run(ctx)
	close(c.inputEnd)
	if err == nil && ctx.Err() == nil {
		c.drain(ctx, drain)
	}
	cancel()
	c.wg.Wait()
	return err
}

// drain waits until the requests still running have answered, ctx ends
// or the timeout passes.
func (c *stdioConn) drain(ctx context.Context, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
		c.srv.log.Warn().Float64("drain_timeout_ms", telemetry.Ms(timeout)).Msg("stdio: requests still running at end of input are cancelled")
	}
}

// stdioConn is one stdio peer: at most one legacy session (the process)
// plus any number of stateless requests.
type stdioConn struct {
	srv      *Server
	ch       *stdio.Channel
	ctx      context.Context
	inputEnd chan struct{} // closed at the end of the input
	wg       sync.WaitGroup

	nextID atomic.Uint64 // server→client requests are "srv-1", "srv-2", ...

	maxBatch, maxHandlers int

	mu          sync.Mutex
	sess        *session.Session // nil until initialize
	initialized bool             // notifications/initialized was read after it
	inflight    map[jsonrpc.ID]*inflightReq
	listens     map[jsonrpc.ID]*listenFilter
	running     int // handler slots taken, at most maxHandlers
}

// take reserves n handler slots, or returns the error that refuses the
// work; give returns them.
func (c *stdioConn) take(n int) *jsonrpc.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running+n > c.maxHandlers {
		return jsonrpc.NewError(jsonrpc.CodeUnavailable, fmt.Sprintf("this connection runs as many requests as it may (%d); wait for some to finish", c.maxHandlers), nil)
	}
	c.running += n
	return nil
}

func (c *stdioConn) give(n int) {
	c.mu.Lock()
	c.running -= n
	c.mu.Unlock()
}

// inflightReq is a running request. Its id is in use until the request
// ends or is cancelled: a cancelled request gets no response, so the
// client may use the id again at once.
type inflightReq struct {
	cancel context.CancelFunc
}

// inbound is called by the read loop for each request and notification,
// in input order. What orders the protocol (the session's handshake and
// state) is settled here, before the next line is read; the handler runs
// on a goroutine of its own.
func (c *stdioConn) inbound(msg *jsonrpc.Message) {
	if msg.Kind() == jsonrpc.KindNotification {
		c.notification(msg)
		return
	}
	ctx, end, err := c.begin(msg.ID)
	if err != nil {
		_ = c.ch.Send(jsonrpc.ErrorResponse(msg.ID, err))
		return
	}
	if msg.Method == "initialize" {
		// Cheap and handler-free: answered before anything read later.
		end(c.initialize(ctx, msg))
		return
	}
	req, resp := c.prepare(msg)
	if resp == nil {
		if err := c.take(1); err != nil {
			resp = jsonrpc.ErrorResponse(msg.ID, err)
		}
	}
	if resp != nil {
		end(resp)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.give(1)
		var resp *jsonrpc.Message
		defer func() { end(resp) }() // a handler's panic still frees the id
		resp = c.execute(ctx, req)
	}()
}

// begin registers a request as in flight, so that notifications/cancelled
// reaches it, and returns its context and the function that ends it:
// end frees the id and writes the request's response (nil: none), in one
// step under c.mu, so a client that reads the response may use the id
// again at once. No response is written for a cancelled request:
// cancellation happens under c.mu, so once notifications/cancelled has
// been read, none is. It fails when a request in flight already uses the
// id.
func (c *stdioConn) begin(id jsonrpc.ID) (context.Context, func(resp *jsonrpc.Message), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.inflight[id]; dup {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "request id %s is already in use", id)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	e := &inflightReq{cancel: cancel}
	c.inflight[id] = e
	return ctx, func(resp *jsonrpc.Message) {
		c.mu.Lock()
		if c.inflight[id] == e {
			delete(c.inflight, id)
		}
		if resp != nil && ctx.Err() == nil {
			_ = c.ch.Send(resp)
		}
		c.mu.Unlock()
		cancel()
	}, nil
}

// notification runs a notification through the receiving middleware and
// acts on it.
func (c *stdioConn) notification(msg *jsonrpc.Message) {
	c.srv.receiveMessage(c.ctx, msg, c.session(), "", func(context.Context) { c.notified(msg) })
}

// response runs a client's reply through the receiving middleware and
// hands it to the request waiting for it.
func (c *stdioConn) response(msg *jsonrpc.Message) {
	c.srv.receiveMessage(c.ctx, msg, c.session(), "", func(context.Context) { c.ch.Deliver(msg) })
}

// session returns a copy of the session as it is now (nil before
// initialize).
func (c *stdioConn) session() *session.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil
	}
	snap := *c.sess
	return &snap
}

func (c *stdioConn) notified(msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/initialized":
		c.mu.Lock()
		c.initialized = c.sess != nil
		c.mu.Unlock()
	case "notifications/cancelled":
		var p struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil && p.RequestID.IsValid() {
			c.mu.Lock()
			if e := c.inflight[p.RequestID]; e != nil {
				// The request ends now: its id is free, and a listen
				// stream hears nothing more.
				e.cancel()
				delete(c.inflight, p.RequestID)
				delete(c.listens, p.RequestID)
			}
			c.mu.Unlock()
		}
	}
}

// initialize starts the process session and returns the response.
func (c *stdioConn) initialize(ctx context.Context, msg *jsonrpc.Message) *jsonrpc.Message {
	res, st, err := c.srv.receiveInitialize(ctx, msg)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, err)
	}
	c.mu.Lock()
	c.sess, c.initialized = st, false
	c.mu.Unlock()
	return &jsonrpc.Message{ID: msg.ID, Result: res}
}

// prepare reads what a request needs of the session, as it is when the
// request is read, and returns the request to execute, or the error
// response to write instead.
func (c *stdioConn) prepare(msg *jsonrpc.Message) (*Request, *jsonrpc.Message) {
	s := c.srv
	var req *Request
	var err error
	if IsModernMessage(msg.Params) || modernOnly[msg.Method] {
		req, err = s.newModernRequest(msg, nil, nil)
	} else {
		st := c.session()
		if st == nil && msg.Method != "ping" {
			return nil, jsonrpc.ErrorResponse(msg.ID, errNoSession)
		}
		if st == nil {
			st = &session.Session{Version: LatestLegacyVersion}
		}
		req, err = s.newLegacyRequest(msg, st, nil)
	}
	if err != nil {
		return nil, jsonrpc.ErrorResponse(msg.ID, err)
	}
	req.out = &stdioOut{c: c, modern: req.modern}
	return req, nil
}

// execute runs a prepared request and returns the response to write (nil
// for none, as for a cancelled listen).
func (c *stdioConn) execute(ctx context.Context, req *Request) *jsonrpc.Message {
	if req.Method == "subscriptions/listen" {
		var resp *jsonrpc.Message
		_, err := c.srv.receive(ctx, req, func(ctx context.Context, _ string, req *Request) (json.RawMessage, error) {
			if resp = c.listen(ctx, req); resp != nil && resp.Error != nil {
				return nil, resp.Error
			}
			return nil, nil
		})
		if err != nil {
			return jsonrpc.ErrorResponse(req.id, err)
		}
		return resp
	}
	res, err := c.srv.call(ctx, req, c)
	if err != nil {
		return jsonrpc.ErrorResponse(req.id, err)
	}
	return &jsonrpc.Message{ID: req.id, Result: res}
}

// listen holds a subscriptions/listen open until it is cancelled or the
// input ends.
func (c *stdioConn) listen(ctx context.Context, req *Request) *jsonrpc.Message {
	f, err := c.srv.parseListen(req.Params)
	if err != nil {
		return jsonrpc.ErrorResponse(req.id, err)
	}
	f.TaskIDs = nil // tasks run on the HTTP transport's nodes only
	fp := &f
	c.mu.Lock()
	if ctx.Err() != nil { // cancelled before the acknowledgement
		c.mu.Unlock()
		return nil
	}
	_ = c.ch.Send(listenAck(req.id, f))
	c.listens[req.id] = fp
	c.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-c.inputEnd:
	}
	c.mu.Lock()
	if c.listens[req.id] == fp {
		delete(c.listens, req.id)
	}
	c.mu.Unlock()
	return nil
}

// batch serves a JSON-RPC batch line: only on 2025-03-26 sessions.
func (c *stdioConn) batch(raw []byte) {
	c.mu.Lock()
	v := ""
	if c.sess != nil {
		v = c.sess.Version
	}
	c.mu.Unlock()
	msgs, errs, _, err := jsonrpc.DecodeBatchMax(raw, c.maxBatch)
	var big *jsonrpc.BatchTooLargeError
	if errors.As(err, &big) {
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, big.RPC()))
		return
	}
	if err != nil {
		de, _ := jsonrpc.IsDecodeError(err)
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, de.Err))
		return
	}
	if v != Version20250326 {
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "batches are only accepted on protocol version 2025-03-26")))
		return
	}
	// Each request member may run a handler: the batch takes their slots
	// at once, or none of it runs.
	requests := 0
	for i, m := range msgs {
		if errs[i] == nil && m.Kind() == jsonrpc.KindRequest {
			requests++
		}
	}
	if err := c.take(requests); err != nil {
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, err))
		return
	}
	// Members take effect in order before the next line is read, like
	// single messages: notifications act, responses are delivered, and
	// requests are registered (so that a cancellation on a later line
	// finds them) and prepared; only their handlers run later.
	type member struct {
		ctx  context.Context
		end  func(*jsonrpc.Message)
		req  *Request
		resp *jsonrpc.Message // instead of running a handler
	}
	members := map[*jsonrpc.Message]*member{}
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		switch {
		case m.Kind() == jsonrpc.KindNotification:
			c.notification(m)
		case m.Kind() == jsonrpc.KindResponse:
			c.response(m)
		case m.Method == "initialize":
			members[m] = &member{resp: jsonrpc.ErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must not be part of a batch"))}
		default:
			mb := &member{}
			var err error
			if mb.ctx, mb.end, err = c.begin(m.ID); err != nil {
				mb.resp = jsonrpc.ErrorResponse(m.ID, err)
			} else {
				mb.req, mb.resp = c.prepare(m)
			}
			members[m] = mb
		}
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.give(requests)
		out := serveBatch(c.ctx, msgs, errs, func(_ context.Context, m *jsonrpc.Message) *jsonrpc.Message {
			mb := members[m]
			if mb == nil { // a notification or a response
				return nil
			}
			if mb.end != nil {
				defer mb.end(nil) // the batch's response carries it
			}
			resp := mb.resp
			if mb.req != nil {
				resp = c.execute(mb.ctx, mb.req)
			}
			if mb.ctx != nil && mb.ctx.Err() != nil {
				return nil // cancelled: no response
			}
			return resp
		})
		if len(out) > 0 {
			if b, err := jsonrpc.EncodeBatch(out); err == nil {
				_ = c.ch.SendRaw(b)
			}
		}
	}()
}

// serveBatch runs the members of a batch concurrently and collects the
// responses in order; invalid members get their own error.
func serveBatch(ctx context.Context, msgs []*jsonrpc.Message, errs []error, fn func(context.Context, *jsonrpc.Message) *jsonrpc.Message) []*jsonrpc.Message {
	res := make([]*jsonrpc.Message, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		if errs[i] != nil {
			de, _ := jsonrpc.IsDecodeError(errs[i])
			res[i] = jsonrpc.ErrorResponse(de.ID, de.Err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = fn(ctx, m)
		}()
	}
	wg.Wait()
	out := res[:0]
	for _, r := range res {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

// sessionOps for the process session. Requests that change the session
// run only on one (prepare refuses them before initialize).

var errNoSession = jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "session not initialized: send initialize first")

func (c *stdioConn) setLogLevel(_ context.Context, l LogLevel) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return errNoSession
	}
	c.sess.LogLevel = string(l)
	return nil
}

func (c *stdioConn) subscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return errNoSession
	}
	return subscriptionError(c.sess.Subscribe(uri, c.srv.opts.maxSubscriptions()))
}

func (c *stdioConn) unsubscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return errNoSession
	}
	c.sess.Unsubscribe(uri)
	return nil
}

// hub: unsolicited notifications.

func (c *stdioConn) listChanged(_ context.Context, method string) {
	c.deliver(method, "", func() bool { return c.initialized })
}

func (c *stdioConn) resourceUpdated(_ context.Context, uri string) {
	c.deliver("notifications/resources/updated", uri, func() bool { return c.sess != nil && c.sess.Subscribed(uri) })
}

func (c *stdioConn) deliver(method, uri string, legacy func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if legacy() {
		_ = c.ch.Send(plainNotification(method, uri))
	}
	for id, f := range c.listens {
		if f.wants(method, uri) {
			_ = c.ch.Send(listenNotification(id, method, uri))
		}
	}
}

// stdioOut is the outbound side of one stdio request.
type stdioOut struct {
	c      *stdioConn
	modern bool
}

func (o *stdioOut) notify(_ context.Context, msg *jsonrpc.Message) error { return o.c.ch.Send(msg) }

func (o *stdioOut) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if o.modern {
		return nil, ErrNoChannel
	}
	id := jsonrpc.StringID("srv-" + strconv.FormatUint(o.c.nextID.Add(1), 10))
	res, err := o.c.ch.CallWithID(ctx, id, method, params)
	if err != nil && ctx.Err() != nil {
		// The server stops waiting (the request timed out, or the request
		// that asked was cancelled) and tells the client so.
		reason := "the request that asked for it ended"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "timed out"
		}
		if n, nerr := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": id, "reason": reason}); nerr == nil {
			_ = o.c.ch.Send(n)
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeRequestTimeout, "%s: no reply from the client in time", method)
	}
	return res, err
}

func (o *stdioOut) streaming() bool     { return false }
func (o *stdioOut) nextEventID() string { return "" }
func (o *stdioOut) closeStream()        {}
