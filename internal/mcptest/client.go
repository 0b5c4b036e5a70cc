// Package mcptest is a wire-level MCP client for tests: it speaks raw
// JSON-RPC over Streamable HTTP so tests can assert on status codes,
// headers, SSE event ids and every message a server sends, and can cut
// and resume streams at will.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// Client is a raw MCP client over HTTP. URLs lists the endpoints of the
// nodes; requests go round robin over them unless pinned.
type Client struct {
	T       testing.TB
	URLs    []string
	HTTP    *http.Client
	Session string
	Version string
	// Header is added to every request.
	Header http.Header

	next atomic.Int64
	ids  atomic.Int64
}

// New returns a client for the given endpoint URLs.
// Its idle connections are closed when the test ends.
func New(t testing.TB, urls ...string) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &Client{T: t, URLs: urls, HTTP: &http.Client{Transport: tr}, Header: http.Header{}}
}

// URL returns the next endpoint (round robin).
func (c *Client) URL() string {
	n := c.next.Add(1) - 1
	return c.URLs[int(n)%len(c.URLs)]
}

// NextID returns a fresh integer request id.
func (c *Client) NextID() jsonrpc.ID { return jsonrpc.IntID(c.ids.Add(1)) }

// Response is what a POST returned.
type Response struct {
	Status int
	Header http.Header
	// Messages holds the JSON body (one message) or every SSE event's
	// message, in order.
	Messages []*jsonrpc.Message
	// Events holds the raw SSE events (with ids) when the body was a
	// stream.
	Events []sse.Event
	Body   []byte
	SSE    bool
	// Retry is the last SSE retry hint seen on the stream (0 if none).
	Retry time.Duration
	// Comments counts the SSE comment lines (keep-alives) seen.
	Comments int
}

// Final returns the last message that is a response.
func (r *Response) Final() *jsonrpc.Message {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Kind() == jsonrpc.KindResponse {
			return r.Messages[i]
		}
	}
	return nil
}

// Result decodes the final response's result into v and fails the test
// on an error response.
func (r *Response) Result(t testing.TB, v any) {
	t.Helper()
	f := r.Final()
	if f == nil {
		t.Fatalf("no response in %d messages (status %d, body %q)", len(r.Messages), r.Status, r.Body)
	}
	if f.Error != nil {
		t.Fatalf("got error %d %q, want a result", f.Error.Code, f.Error.Message)
	}
	if v != nil {
		if err := json.Unmarshal(f.Result, v); err != nil {
			t.Fatalf("decoding result %s: %v", f.Result, err)
		}
	}
}

// Request builds the headers of a POST.
func (c *Client) newPost(ctx context.Context, url string, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		c.T.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
	}
	if c.Version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.Version)
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	return req
}

// PostRaw sends body to url and reads the whole response. onEvent, when
// set, sees each message as it arrives (to answer server requests); its
// return value, when not nil, is POSTed back as a reply.
func (c *Client) PostRaw(ctx context.Context, url string, body []byte, mod func(*http.Request), onEvent func(*jsonrpc.Message) *jsonrpc.Message) (*Response, error) {
	req := c.newPost(ctx, url, body)
	if mod != nil {
		mod(req)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.read(ctx, resp, onEvent)
}

func (c *Client) read(ctx context.Context, resp *http.Response, onEvent func(*jsonrpc.Message) *jsonrpc.Message) (*Response, error) {
	out := &Response{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		out.SSE = true
		r := sse.NewReader(resp.Body, 16<<20)
		for {
			ev, err := r.Next()
			out.Retry, out.Comments = r.Retry(), r.Comments()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out.Events = append(out.Events, ev)
			if len(ev.Data) == 0 {
				continue
			}
			msg, err := jsonrpc.Decode(ev.Data)
			if err != nil {
				return out, fmt.Errorf("bad SSE message %q: %w", ev.Data, err)
			}
			out.Messages = append(out.Messages, msg)
			if onEvent != nil {
				if reply := onEvent(msg); reply != nil {
					c.Reply(ctx, reply)
				}
			}
			if msg.Kind() == jsonrpc.KindResponse {
				return out, nil
			}
		}
	}
	b, err := io.ReadAll(resp.Body)
	out.Body = b
	if err != nil {
		return out, err
	}
	if len(bytes.TrimSpace(b)) > 0 && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		msg, err := jsonrpc.Decode(b)
		if err == nil {
			out.Messages = append(out.Messages, msg)
		}
	}
	return out, nil
}

// Call sends a request and returns the whole response. handler answers
// server→client requests arriving on the stream (nil ignores them).
func (c *Client) Call(method string, params any, handler func(*jsonrpc.Message) *jsonrpc.Message) *Response {
	c.T.Helper()
	msg, err := jsonrpc.Request(c.NextID(), method, params)
	if err != nil {
		c.T.Fatalf("build %s: %v", method, err)
	}
	b, _ := jsonrpc.Encode(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.PostRaw(ctx, c.URL(), b, nil, handler)
	if err != nil {
		c.T.Fatalf("%s: %v", method, err)
	}
	return resp
}

// Notify sends a notification and returns the HTTP status.
func (c *Client) Notify(method string, params any) int {
	c.T.Helper()
	msg, _ := jsonrpc.Notification(method, params)
	b, _ := jsonrpc.Encode(msg)
	resp, err := c.PostRaw(context.Background(), c.URL(), b, nil, nil)
	if err != nil {
		c.T.Fatalf("%s: %v", method, err)
	}
	return resp.Status
}

// Reply posts a reply to a server→client request (to the next node). Like
// a well-behaved client, it sends the reply again after a 503 (the node
// waiting for it is briefly unreachable), waiting as Retry-After says (at
// most a second), until ctx ends.
func (c *Client) Reply(ctx context.Context, msg *jsonrpc.Message) {
	b, _ := jsonrpc.Encode(msg)
	for {
		resp, err := c.PostRaw(ctx, c.URL(), b, nil, nil)
		if err != nil {
			c.T.Errorf("reply: %v", err)
			return
		}
		if resp.Status == http.StatusServiceUnavailable && ctx.Err() == nil {
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				wait = min(time.Duration(s)*time.Second, wait)
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			continue
		}
		if resp.Status != http.StatusAccepted {
			c.T.Errorf("reply: got status %d, want 202 (body %q)", resp.Status, resp.Body)
		}
		return
	}
}

// Initialize opens a session with the given revision and capabilities.
func (c *Client) Initialize(version string, caps map[string]any) {
	c.T.Helper()
	if caps == nil {
		caps = map[string]any{}
	}
	resp := c.Call("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "mcptest", "version": "1.0.0"},
	}, nil)
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	resp.Result(c.T, &res)
	c.Session = resp.Header.Get("Mcp-Session-Id")
	if c.Session == "" {
		c.T.Fatalf("initialize: no Mcp-Session-Id header")
	}
	c.Version = res.ProtocolVersion
	if st := c.Notify("notifications/initialized", nil); st != http.StatusAccepted {
		c.T.Fatalf("notifications/initialized: got %d, want 202", st)
	}
}

// Stream is an open SSE response: a GET stream, or a POST response read
// incrementally (OpenPost) so a test can cut it at any point.
type Stream struct {
	Resp   *http.Response
	cancel context.CancelFunc
	tap    *lineTap
	mu     sync.Mutex
	events []sse.Event
	done   chan struct{}
	err    error
	notify chan struct{}
}

// Get opens a GET stream (with Last-Event-ID when lastID is not empty)
// on url. It returns once the response headers arrived.
func (c *Client) Get(url, lastID string) (*Stream, error) {
	return c.GetWith(url, lastID, nil)
}

// GetWith is Get with a hook that may change the request's headers.
func (c *Client) GetWith(url, lastID string, mod func(*http.Request)) (*Stream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
	}
	if c.Version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.Version)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if mod != nil {
		mod(req)
	}
	return c.open(req, cancel)
}

// OpenPost sends body as a POST and returns the response as a Stream once
// its headers arrived; a response that is not an event stream is an
// error. Closing the Stream cuts the connection.
func (c *Client) OpenPost(url string, body []byte, mod func(*http.Request)) (*Stream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req := c.newPost(ctx, url, body)
	if mod != nil {
		mod(req)
	}
	return c.open(req, cancel)
}

func (c *Client) open(req *http.Request, cancel context.CancelFunc) (*Stream, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Stream{Resp: resp, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		close(s.done)
		s.err = fmt.Errorf("%s: status %d (%s): %s", req.Method, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		return s, s.err
	}
	s.tap = &lineTap{r: resp.Body, wake: s.wake}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		r := sse.NewReader(s.tap, 16<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
			s.wake()
		}
	}()
	return s, nil
}

func (s *Stream) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Close cuts the stream.
func (s *Stream) Close() {
	s.cancel()
	<-s.done
}

// Done is closed when the stream ended.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Err returns the error that ended the stream (io.EOF when the server
// closed it), or nil while it is open.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Events returns the events received so far.
func (s *Stream) Events() []sse.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sse.Event(nil), s.events...)
}

// Comments returns the number of SSE comment lines (keep-alives) read.
func (s *Stream) Comments() int {
	if s.tap == nil {
		return 0
	}
	return s.tap.stats().comments
}

// Retries returns every retry hint read, in order, as the number of
// events dispatched before it.
func (s *Stream) Retries() []RetryHint {
	if s.tap == nil {
		return nil
	}
	return s.tap.stats().retries
}

// RetryHint is a retry field seen on a stream.
type RetryHint struct {
	Value time.Duration
	// After is the number of blank-line-terminated blocks with data
	// before the hint (the events dispatched before it).
	After int
}

// Messages returns the decoded messages received so far (events with
// data).
func (s *Stream) Messages() []*jsonrpc.Message {
	var out []*jsonrpc.Message
	for _, ev := range s.Events() {
		if len(ev.Data) == 0 {
			continue
		}
		if m, err := jsonrpc.Decode(ev.Data); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// WaitFor waits until cond holds for the messages received, the stream
// ends, or the timeout passes; it reports whether cond held.
func (s *Stream) WaitFor(timeout time.Duration, cond func([]*jsonrpc.Message) bool) bool {
	return s.WaitUntil(timeout, func() bool { return cond(s.Messages()) })
}

// WaitUntil waits until cond holds, re-checking it whenever the stream
// delivers anything (events, comments, retry hints), the stream ends, or
// the timeout passes; it reports whether cond held.
func (s *Stream) WaitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.After(timeout)
	for {
		if cond() {
			return true
		}
		select {
		case <-s.notify:
		case <-s.done:
			return cond()
		case <-deadline:
			return false
		}
	}
}

// Count returns how many received messages have the given method.
func (s *Stream) Count(method string) int {
	n := 0
	for _, m := range s.Messages() {
		if m.Method == method {
			n++
		}
	}
	return n
}

// lineTap observes the raw lines of an event stream as the sse.Reader
// consumes them, to see what the Reader does not dispatch: comments and
// retry hints.
type lineTap struct {
	r    io.Reader
	wake func()

	mu      sync.Mutex
	partial []byte
	st      tapStats
	data    bool // the current block has a data line
}

type tapStats struct {
	comments int
	retries  []RetryHint
	blocks   int
}

func (t *lineTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.mu.Lock()
		t.partial = append(t.partial, p[:n]...)
		for {
			i := bytes.IndexByte(t.partial, '\n')
			if i < 0 {
				break
			}
			line := bytes.TrimSuffix(t.partial[:i], []byte("\r"))
			switch {
			case len(line) == 0:
				if t.data {
					t.st.blocks++
				}
				t.data = false
			case line[0] == ':':
				t.st.comments++
			case bytes.HasPrefix(line, []byte("retry:")):
				if ms, perr := strconv.Atoi(strings.TrimSpace(string(line[len("retry:"):]))); perr == nil {
					t.st.retries = append(t.st.retries, RetryHint{Value: time.Duration(ms) * time.Millisecond, After: t.st.blocks})
				}
			case bytes.HasPrefix(line, []byte("data")):
				t.data = true
			}
			t.partial = t.partial[i+1:]
		}
		t.mu.Unlock()
		t.wake()
	}
	return n, err
}

func (t *lineTap) stats() tapStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st
	st.retries = append([]RetryHint(nil), st.retries...)
	return st
}

// Raw sends one request with the client's session and version headers
// (mod may change them) and reads the whole response; an event-stream
// body is parsed into Messages and Events.
func (c *Client) Raw(ctx context.Context, method, url string, body []byte, mod func(*http.Request)) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
	}
	if c.Version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.Version)
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	if mod != nil {
		mod(req)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.read(ctx, resp, nil)
}

// Delete ends the client's session and returns the HTTP status.
func (c *Client) Delete(url string) int {
	c.T.Helper()
	resp, err := c.Raw(context.Background(), http.MethodDelete, url, nil, nil)
	if err != nil {
		c.T.Fatalf("DELETE: %v", err)
	}
	return resp.Status
}

// Eventually polls cond until it holds or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ModernMeta is the _meta of a 2026-07-28 request from a client that
// declares sampling.
func ModernMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": map[string]any{}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcptest", "version": "1"},
	}
}

// ModernHeaders sets the request-metadata headers of a 2026-07-28 POST
// (name is Mcp-Name, omitted when empty).
func ModernHeaders(method, name string) func(*http.Request) {
	return func(r *http.Request) {
		r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		r.Header.Set("Mcp-Method", method)
		if name != "" {
			r.Header.Set("Mcp-Name", name)
		}
	}
}

// ProgressValues returns the progress values of the progress
// notifications among msgs, in order.
func ProgressValues(msgs []*jsonrpc.Message) []float64 {
	var out []float64
	for _, m := range msgs {
		if m.Method != "notifications/progress" {
			continue
		}
		var p struct {
			Progress float64 `json:"progress"`
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, p.Progress)
	}
	return out
}
