package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// Protocol revisions mcpbench speaks.
const (
	rev20250326 = "2025-03-26"
	rev20250618 = "2025-06-18"
	rev20251125 = "2025-11-25"
	rev20260728 = "2026-07-28"
)

var revisions = []string{rev20250326, rev20250618, rev20251125, rev20260728}

// Request metadata keys of 2026-07-28.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// client speaks MCP over Streamable HTTP to one or more endpoints, picked
// round robin per HTTP request the way a load balancer without
// stickiness would. Connections are kept alive and reused. With source
// addresses (--source) there is one transport per address, and a
// request goes through the one its context's worker or stream index
// selects (index mod the number of addresses; requests of unmarked
// contexts take the transports in turn), so each worker's connections
// always come from the same address.
type client struct {
	hcs      []*http.Client
	trs      []*http.Transport
	next     atomic.Uint64 // transport of the next unmarked request
	urls     []string
	rr       atomic.Uint64
	revision string
	modern   bool
	caps     map[string]any
}

func newClient(urls []string, revision string, maxConns int, sources []netip.Addr) *client {
	c := &client{
		urls:     urls,
		revision: revision,
		modern:   revision == rev20260728,
		caps:     map[string]any{"sampling": map[string]any{}},
	}
	newTransport := func(local net.Addr) *http.Transport {
		d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: local}
		return &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: maxConns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			WriteBufferSize:     16 << 10,
			ReadBufferSize:      16 << 10,
		}
	}
	if len(sources) == 0 {
		c.trs = []*http.Transport{newTransport(nil)}
	}
	for _, a := range sources {
		c.trs = append(c.trs, newTransport(&net.TCPAddr{IP: a.AsSlice()}))
	}
	for _, tr := range c.trs {
		c.hcs = append(c.hcs, &http.Client{Transport: tr})
	}
	return c
}

// do sends req through the transport of its context's source index.
func (c *client) do(req *http.Request) (*http.Response, error) {
	if len(c.hcs) == 1 {
		return c.hcs[0].Do(req)
	}
	i, ok := sourceIndex(req.Context())
	if !ok {
		i = int((c.next.Add(1) - 1) % uint64(len(c.hcs)))
	}
	return c.hcs[i%len(c.hcs)].Do(req)
}

// closeIdle closes the idle connections of every transport.
func (c *client) closeIdle() {
	for _, tr := range c.trs {
		tr.CloseIdleConnections()
	}
}

// pick returns the index of the next endpoint, round robin.
func (c *client) pick() int { return int((c.rr.Add(1) - 1) % uint64(len(c.urls))) }

// session is a legacy session (id and negotiated revision) or, on
// 2026-07-28, just a source of request ids. Its ids are unique across
// the workers that share it (--sessions).
type session struct {
	id      string
	version string
	nextID  atomic.Int64
}

func (s *session) newID() int64 { return s.nextID.Add(1) }

// incoming is one message a response stream delivered.
type incoming struct {
	msg     *jsonrpc.Message
	eventID string
	at      time.Time
}

// exchange is a finished POST.
type exchange struct {
	header  http.Header
	sse     bool
	final   *jsonrpc.Message
	lastID  string // last SSE event id seen
	started time.Time
}

// errCut, returned by an onMsg callback, makes call drop the connection
// (used to cut a stream on purpose).
var errCut = errors.New("mcpbench: stream cut on purpose")

// requestBody encodes a JSON-RPC request; on 2026-07-28 the request
// metadata is merged into params._meta.
func (c *client) requestBody(id int64, method string, params map[string]any, meta map[string]any) []byte {
	if params == nil {
		params = map[string]any{}
	}
	if c.modern || meta != nil {
		m := map[string]any{}
		for k, v := range meta {
			m[k] = v
		}
		if c.modern {
			m[metaProtocolVersion] = rev20260728
			m[metaClientCapabilities] = c.caps
			m[metaClientInfo] = map[string]any{"name": "mcpbench", "version": "1"}
		}
		params["_meta"] = m
	}
	msg, err := jsonrpc.Request(jsonrpc.IntID(id), method, params)
	if err != nil {
		panic(fmt.Sprintf("mcpbench: encoding %s: %v", method, err))
	}
	b, _ := jsonrpc.Encode(msg)
	return b
}

// newPost builds a POST with the headers the revision needs.
func (c *client) newPost(ctx context.Context, url string, s *session, body []byte, method, name string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.modern {
		req.Header.Set("Mcp-Protocol-Version", rev20260728)
		if method != "" {
			req.Header.Set("Mcp-Method", method)
		}
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		return req
	}
	if s != nil && s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s != nil && s.version != "" {
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	return req
}

// statusError reads the start of an unexpected answer's body.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return &bench.StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
}

// call POSTs a request and reads the answer — a JSON body, or an SSE
// stream up to the response with the request's id. onMsg (may be nil)
// sees every other message as it arrives; its error ends the call
// (errCut drops the connection).
func (c *client) call(ctx context.Context, url string, s *session, id int64, body []byte, method, name string, onMsg func(incoming) error) (*exchange, error) {
	req := c.newPost(ctx, url, s, body, method, name)
	ex := &exchange{started: time.Now()}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ex.header = resp.Header
	if resp.StatusCode != http.StatusOK {
		return ex, statusError(resp)
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		ex.sse = true
		return ex, readStreamUntil(resp.Body, id, ex, onMsg)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return ex, err
	}
	msg, err := jsonrpc.Decode(b)
	if err != nil {
		return ex, bench.Errorf("protocol", "undecodable JSON answer (%s): %.200s", ct, b)
	}
	ex.final = msg
	return ex, rpcErr(msg)
}

// readStreamUntil reads SSE events until the response to id. After it,
// the rest of the body (normally nothing: the server ends the stream) is
// drained so that the connection can be reused.
func readStreamUntil(body io.Reader, id int64, ex *exchange, onMsg func(incoming) error) error {
	r := sse.NewReader(body, 16<<20)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return bench.Errorf("eof", "the stream ended without a response to request %d", id)
		}
		if err != nil {
			return err
		}
		if ev.ID != "" {
			ex.lastID = ev.ID
		}
		if len(ev.Data) == 0 {
			continue // priming event
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			return bench.Errorf("protocol", "undecodable SSE event: %.200s", ev.Data)
		}
		if msg.Kind() == jsonrpc.KindResponse && msg.ID.IsValid() && !msg.ID.IsString() && msg.ID.Int() == id {
			ex.final = msg
			_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
			return rpcErr(msg)
		}
		if onMsg != nil {
			if err := onMsg(incoming{msg: msg, eventID: ev.ID, at: time.Now()}); err != nil {
				return err
			}
		}
	}
}

// rpcErr turns an error response into a bench.RPCError.
func rpcErr(msg *jsonrpc.Message) error {
	if msg.Error != nil {
		return &bench.RPCError{Code: msg.Error.Code, Message: msg.Error.Message}
	}
	return nil
}

// notify POSTs a notification or a reply; it expects 202 (200 and 204
// are accepted from servers that answer so).
func (c *client) notify(ctx context.Context, url string, s *session, body []byte, method string) error {
	req := c.newPost(ctx, url, s, body, method, "")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK, http.StatusNoContent:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	return statusError(resp)
}

// initialize opens a legacy session on url: initialize, then
// notifications/initialized. When only the notification fails, the
// session is returned with the error.
func (c *client) initialize(ctx context.Context, url string) (*session, error) {
	s := &session{}
	id := s.newID()
	body := c.requestBody(id, "initialize", map[string]any{
		"protocolVersion": c.revision,
		"capabilities":    c.caps,
		"clientInfo":      map[string]any{"name": "mcpbench", "version": "1"},
	}, nil)
	ex, err := c.call(ctx, url, s, id, body, "initialize", "", nil)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(ex.final.Result, &res); err != nil || res.ProtocolVersion == "" {
		return nil, bench.Errorf("protocol", "initialize: no protocolVersion in %.200s", ex.final.Result)
	}
	s.id = ex.header.Get("Mcp-Session-Id")
	s.version = res.ProtocolVersion
	n, _ := jsonrpc.Notification("notifications/initialized", nil)
	nb, _ := jsonrpc.Encode(n)
	if err := c.notify(ctx, c.urls[c.pick()], s, nb, "notifications/initialized"); err != nil {
		// The session exists: return it, so that the caller can end it.
		return s, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

// openSession opens a legacy session on url (initialize); a session the
// server opened though the handshake failed is ended (DELETE) before the
// error is returned.
func (c *client) openSession(ctx context.Context, url string) (*session, error) {
	s, err := c.initialize(ctx, url)
	if err != nil {
		if s != nil {
			_ = c.deleteSession(ctx, url, s)
		}
		return nil, err
	}
	return s, nil
}

// deleteSession ends a legacy session (DELETE).
func (c *client) deleteSession(ctx context.Context, url string, s *session) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", s.id)
	if s.version != "" {
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// openGet opens a session's GET stream (resuming after lastID when set)
// and returns the response once its headers arrived.
func (c *client) openGet(ctx context.Context, url string, s *session, lastID string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s.version != "" {
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil, bench.Errorf("protocol", "GET answered %s, not an event stream", resp.Header.Get("Content-Type"))
		}
		return nil, statusError(resp)
	}
	return resp, nil
}

// openListen opens a 2026-07-28 subscriptions/listen stream for
// tools/list_changed and returns it once the acknowledgement arrived.
func (c *client) openListen(ctx context.Context, url string, id int64) (*http.Response, *sse.Reader, error) {
	body := c.requestBody(id, "subscriptions/listen", map[string]any{
		"notifications": map[string]any{"toolsListChanged": true},
	}, nil)
	req := c.newPost(ctx, url, nil, body, "subscriptions/listen", "")
	resp, err := c.do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return nil, nil, bench.Errorf("protocol", "subscriptions/listen answered %s: %.200s", resp.Header.Get("Content-Type"), b)
		}
		return nil, nil, statusError(resp)
	}
	r := sse.NewReader(resp.Body, 1<<20)
	for {
		ev, err := r.Next()
		if err != nil {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("subscriptions/listen: waiting for the acknowledgement: %w", err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err == nil && msg.Method == "notifications/subscriptions/acknowledged" {
			return resp, r, nil
		}
		resp.Body.Close()
		return nil, nil, bench.Errorf("protocol", "subscriptions/listen: first event is not the acknowledgement: %.200s", ev.Data)
	}
}

// toolText returns the text of the first content item of a tools/call
// result (and whether the result says isError).
func toolText(result json.RawMessage) (string, bool, error) {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return "", false, err
	}
	if len(r.Content) == 0 {
		return "", r.IsError, nil
	}
	return r.Content[0].Text, r.IsError, nil
}

// expectText checks that a tools/call result is the text want.
func expectText(ex *exchange, want string) error {
	if ex.final == nil {
		return bench.Errorf("protocol", "no response")
	}
	got, isErr, err := toolText(ex.final.Result)
	if err != nil {
		return bench.Errorf("bad_result", "undecodable result %.200s", ex.final.Result)
	}
	if isErr {
		return bench.Errorf("tool_error", "the tool failed: %.200s", got)
	}
	if got != want {
		return bench.Errorf("bad_result", "got text %.80q, want %.80q", got, want)
	}
	return nil
}
