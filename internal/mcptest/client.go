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

// newPost builds a POST of body with the client's headers.
func (c *Client) newPost(ctx context.Context, url string, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		c.T.Fatalf("new request: %v", err)
	}
	c.setHeaders(req, true)
	return req
}

// setHeaders sets what every request of the client carries: Accept, the
// content type when there is a body, the session and version headers,
// and the client's own extra headers.
func (c *Client) setHeaders(req *http.Request, hasBody bool) {
	req.Header.Set("Accept", "application/json, text/event-stream")
	if hasBody {
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
