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
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

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
	c.setHeaders(req, body != nil)
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
