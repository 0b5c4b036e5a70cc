package mcp

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/stdio"
)

// StdioOptions configure ServeStdio.
type StdioOptions struct {
	// MaxLineBytes bounds one inbound line (default 4 MiB).
	MaxLineBytes int
}

// ServeStdio serves the server over a newline-delimited JSON-RPC byte
// stream (stdin/stdout of a process, or any full-duplex pair) until end
// of input, a read error or ctx ends. Requests run concurrently; replies
// to the server's own requests are matched by id; writes never
// interleave. At end of input every pending server→client request fails
// at once and running handlers are cancelled.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, opts *StdioOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &stdioConn{srv: s, ctx: ctx, inflight: map[jsonrpc.ID]context.CancelFunc{}, subs: map[string]bool{}, listens: map[jsonrpc.ID]*listenFilter{}}
	o := stdio.Options{
		Logger:    s.log,
		OnInbound: c.inbound,
		OnBatch:   c.batch,
		OnInvalid: func(err *jsonrpc.DecodeError) {
			_ = c.ch.Send(jsonrpc.ErrorResponse(err.ID, err.Err))
		},
		IDPrefix: "srv-",
	}
	if opts != nil {
		o.MaxLineBytes = opts.MaxLineBytes
	}
	c.ch = stdio.New(r, w, o)
	s.attach(c)
	defer s.detach(c)
	err := c.ch.Run(ctx)
	cancel()
	c.wg.Wait()
	return err
}

// stdioConn is one stdio peer: at most one legacy session (the process)
// plus any number of stateless requests.
type stdioConn struct {
	srv *Server
	ch  *stdio.Channel
	ctx context.Context
	wg  sync.WaitGroup

	mu       sync.Mutex
	sess     *legacyState // nil until initialize
	inflight map[jsonrpc.ID]context.CancelFunc
	subs     map[string]bool
	listens  map[jsonrpc.ID]*listenFilter
}

func (c *stdioConn) inbound(msg *jsonrpc.Message) {
	if msg.Kind() == jsonrpc.KindNotification {
		c.notification(msg)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	if _, dup := c.inflight[msg.ID]; dup {
		c.mu.Unlock()
		cancel()
		_ = c.ch.Send(jsonrpc.ErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "request id %s is already in use", msg.ID)))
		return
	}
	c.inflight[msg.ID] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.inflight, msg.ID)
			c.mu.Unlock()
			cancel()
		}()
		if resp := c.handle(ctx, msg); resp != nil && ctx.Err() == nil {
			_ = c.ch.Send(resp)
		}
	}()
}

func (c *stdioConn) notification(msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/initialized":
		c.mu.Lock()
		if c.sess != nil {
			c.sess.Initialized = true
		}
		c.mu.Unlock()
	case "notifications/cancelled":
		var p struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil && p.RequestID.IsValid() {
			c.mu.Lock()
			cancel := c.inflight[p.RequestID]
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}

// handle serves one request and returns the response to write (nil for
// none, as for a cancelled listen).
func (c *stdioConn) handle(ctx context.Context, msg *jsonrpc.Message) *jsonrpc.Message {
	s := c.srv
	if msg.Method == "initialize" {
		res, st, err := s.initialize(msg.Params)
		if err != nil {
			return jsonrpc.ErrorResponse(msg.ID, err)
		}
		c.mu.Lock()
		c.sess = st
		c.mu.Unlock()
		return &jsonrpc.Message{ID: msg.ID, Result: res}
	}
	var req *Request
	var err error
	if IsModernMessage(msg.Params) || modernOnly[msg.Method] {
		req, err = s.newModernRequest(msg, "")
	} else {
		c.mu.Lock()
		st := c.sess
		var snap legacyState
		if st != nil {
			snap = *st
		}
		c.mu.Unlock()
		if st == nil && msg.Method != "ping" {
			return jsonrpc.ErrorResponse(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "session not initialized: send initialize first"))
		}
		if st == nil {
			snap.Version = LatestLegacyVersion
		}
		req, err = s.newLegacyRequest(msg, &snap)
	}
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, err)
	}
	req.out = &stdioOut{c: c, modern: req.modern}
	if req.Method == "subscriptions/listen" {
		return c.listen(ctx, req)
	}
	res, err := s.call(ctx, req, c)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, err)
	}
	return &jsonrpc.Message{ID: msg.ID, Result: res}
}

// listen holds a subscriptions/listen open until it is cancelled or the
// connection ends.
func (c *stdioConn) listen(ctx context.Context, req *Request) *jsonrpc.Message {
	f, err := c.srv.parseListen(req.Params)
	if err != nil {
		return jsonrpc.ErrorResponse(req.id, err)
	}
	c.mu.Lock()
	_ = c.ch.Send(listenAck(req.id, f))
	c.listens[req.id] = &f
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	delete(c.listens, req.id)
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
	msgs, errs, _, err := jsonrpc.DecodeBatch(raw)
	if err != nil {
		de, _ := jsonrpc.IsDecodeError(err)
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, de.Err))
		return
	}
	if v != Version20250326 {
		_ = c.ch.Send(jsonrpc.ErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "batches are only accepted on protocol version 2025-03-26")))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		out := serveBatch(c.ctx, msgs, errs, func(ctx context.Context, m *jsonrpc.Message) *jsonrpc.Message {
			if m.Kind() == jsonrpc.KindNotification {
				c.notification(m)
				return nil
			}
			if m.Kind() == jsonrpc.KindResponse {
				c.ch.Deliver(m)
				return nil
			}
			if m.Method == "initialize" {
				return jsonrpc.ErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must not be part of a batch"))
			}
			return c.handle(ctx, m)
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

// sessionOps for the process session.

func (c *stdioConn) setLogLevel(_ context.Context, l LogLevel) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		c.sess.LogLevel = l
	}
	return nil
}

func (c *stdioConn) subscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	c.subs[uri] = true
	c.mu.Unlock()
	return nil
}

func (c *stdioConn) unsubscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	delete(c.subs, uri)
	c.mu.Unlock()
	return nil
}

// hub: unsolicited notifications.

func (c *stdioConn) listChanged(_ context.Context, method string) {
	c.deliver(method, "", func() bool { return c.sess != nil && c.sess.Initialized })
}

func (c *stdioConn) resourceUpdated(_ context.Context, uri string) {
	c.deliver("notifications/resources/updated", uri, func() bool { return c.subs[uri] })
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
	res, err := o.c.ch.Call(ctx, method, params)
	if err != nil && ctx.Err() != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeRequestTimeout, "%s: no reply from the client in time", method)
	}
	return res, err
}

func (o *stdioOut) streaming() bool     { return false }
func (o *stdioOut) nextEventID() string { return "" }
func (o *stdioOut) closeStream()        {}
