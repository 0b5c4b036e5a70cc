package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// node is one Streamable HTTP node of a test, serving the demo pack and
// the probe tools on a loopback server.
type node struct {
	srv   *mcp.Server
	h     *mcp.HTTPHandler
	url   string
	ts    *httptest.Server
	probe *probe
}

// nodeOptions configure newNode; the zero value is a default node.
type nodeOptions struct {
	HTTP   mcp.HTTPOptions
	Server mcp.ServerOptions
	// Setup registers more on the server before the handler starts.
	Setup func(*mcp.Server)
}

// testStateKeys are the state keys the test nodes share.
var testStateKeys = [][]byte{[]byte("test-nodes-state-key-0123456789a")}

// newNode starts a node. When the test ends the client connections are
// cut, the handler is closed, the server stopped, and the test fails if
// goroutines started since newNode are still running.
func newNode(t testing.TB, o *nodeOptions) *node {
	t.Helper()
	checkLeaks(t)
	if o == nil {
		o = &nodeOptions{}
	}
	if o.Server.RequestTimeout == 0 {
		o.Server.RequestTimeout = 10 * time.Second
	}
	if o.HTTP.RetryHint == 0 {
		o.HTTP.RetryHint = 50 * time.Millisecond
	}
	if len(o.Server.StateKeys) == 0 {
		// The nodes of a cluster share their state keys (a shared
		// backend without them is refused).
		o.Server.StateKeys = testStateKeys
	}
	srv := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, &o.Server)
	demo.Register(srv)
	p := registerProbe(srv)
	if o.Setup != nil {
		o.Setup(srv)
	}
	opts := o.HTTP
	h, err := srv.NewHTTPHandler(&opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		p.releaseAll()
		ts.CloseClientConnections()
		h.Close()
		ts.Close()
	})
	return &node{srv: srv, h: h, url: ts.URL, ts: ts, probe: p}
}

// checkLeaks fails the test if, once it ended, more goroutines run than
// when checkLeaks was called (after letting them settle for a while).
func checkLeaks(t testing.TB) {
	t.Helper()
	before := len(goroutines())
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			gs := goroutines()
			if len(gs) <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutine leak: %d before, %d after the test:\n%s", before, len(gs), strings.Join(gs, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// goroutines returns the stacks of the running goroutines but the
// caller's and those the test framework starts (signal handling).
func goroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "mcp_test.goroutines(") || strings.Contains(g, "os/signal.signal_recv") {
			continue
		}
		out = append(out, g)
	}
	return out
}

// probe holds the channels of the probe tools, which let a test see a
// handler start, end, or notice cancellation, and release it.
type probe struct {
	started   chan string   // request id of each handler that started
	cancelled chan string   // request id of each handler whose ctx ended
	reached   chan int      // gate: phase index reached (then it waits)
	release   chan struct{} // one value releases one wait
	done      chan struct{} // closed at the end of the test
}

func registerProbe(s *mcp.Server) *probe {
	p := &probe{
		started: make(chan string, 64), cancelled: make(chan string, 64),
		reached: make(chan int, 64), release: make(chan struct{}, 64), done: make(chan struct{}),
	}
	// wait blocks until released, the test ends, or ctx ends (reported on
	// cancelled).
	wait := func(ctx context.Context, req *mcp.Request) error {
		select {
		case <-p.release:
			return nil
		case <-p.done:
			return context.Canceled
		case <-ctx.Done():
			p.cancelled <- req.RequestID()
			return ctx.Err()
		}
	}
	type blockIn struct {
		Progress bool `json:"progress,omitempty"`
	}
	mcp.AddTool(s, mcp.Tool{Name: "block", Description: "Blocks until released or cancelled; progress first upgrades to SSE."},
		func(ctx context.Context, req *mcp.Request, in blockIn) (string, error) {
			if in.Progress {
				if err := req.Progress(ctx, 1, 0, "blocking"); err != nil {
					return "", err
				}
			}
			p.started <- req.RequestID()
			if err := wait(ctx, req); err != nil {
				return "", err
			}
			return "released", nil
		})
	type gateIn struct {
		Phases []int `json:"phases"`
	}
	mcp.AddTool(s, mcp.Tool{Name: "gate", Description: "Sends progress in phases, waiting for a release between phases."},
		func(ctx context.Context, req *mcp.Request, in gateIn) (string, error) {
			n := 0
			for i, steps := range in.Phases {
				for range steps {
					n++
					if err := req.Progress(ctx, float64(n), 0, ""); err != nil {
						return "", err
					}
				}
				if i < len(in.Phases)-1 {
					p.reached <- i
					if err := wait(ctx, req); err != nil {
						return "", err
					}
				}
			}
			return "gated", nil
		})
	mcp.AddTool(s, mcp.Tool{Name: "poll", Description: "Sends progress, closes the SSE connection (polling), waits for a release, sends more progress and returns."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			if err := req.Progress(ctx, 1, 2, "before close"); err != nil {
				return "", err
			}
			req.CloseSSEStream()
			p.reached <- 0
			if err := wait(ctx, req); err != nil {
				return "", err
			}
			if err := req.Progress(ctx, 2, 2, "after close"); err != nil {
				return "", err
			}
			return "polled", nil
		})
	return p
}

// releaseAll unblocks every probe handler (at the end of a test).
func (p *probe) releaseAll() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

// waitStarted waits until a probe handler started and returns its id.
func (p *probe) waitStarted(t testing.TB) string {
	t.Helper()
	select {
	case id := <-p.started:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("the probe handler did not start")
		return ""
	}
}

// waitCancelled waits until a probe handler saw its context end.
func (p *probe) waitCancelled(t testing.TB, within time.Duration) string {
	t.Helper()
	select {
	case id := <-p.cancelled:
		return id
	case <-time.After(within):
		t.Fatalf("the probe handler's context did not end within %v", within)
		return ""
	}
}

// waitReached waits until the gate or poll tool reached phase i.
func (p *probe) waitReached(t testing.TB, i int) {
	t.Helper()
	select {
	case got := <-p.reached:
		if got != i {
			t.Fatalf("reached phase %d, want %d", got, i)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the probe handler did not reach phase %d", i)
	}
}

// session opens a legacy session on url.
func session(t testing.TB, url, version string, caps map[string]any) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, url)
	c.Initialize(version, caps)
	if c.Version != version {
		t.Fatalf("negotiated %q, want %q", c.Version, version)
	}
	return c
}

// encodeRequest builds a request body with a fresh id of c.
func encodeRequest(t testing.TB, c *mcptest.Client, method string, params any) ([]byte, jsonrpc.ID) {
	t.Helper()
	id := c.NextID()
	msg, err := jsonrpc.Request(id, method, params)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonrpc.Encode(msg)
	if err != nil {
		t.Fatal(err)
	}
	return b, id
}

// toolCall returns tools/call params; progress adds a progress token.
func toolCall(name string, args map[string]any, progress bool) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	p := map[string]any{"name": name, "arguments": args}
	if progress {
		p["_meta"] = map[string]any{"progressToken": "tok"}
	}
	return p
}

// modernParams adds the 2026-07-28 _meta (merged with extra) to params.
func modernParams(params map[string]any, extra map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range params {
		out[k] = v
	}
	meta := mcptest.ModernMeta()
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	for k, v := range extra {
		meta[k] = v
	}
	out["_meta"] = meta
	return out
}

// modernMod sets the 2026-07-28 request headers for a body's method and
// params (Mcp-Name from params.name or params.uri), then applies mod.
func modernMod(method string, params map[string]any, mod func(*http.Request)) func(*http.Request) {
	name := ""
	switch method {
	case "tools/call", "prompts/get":
		name, _ = params["name"].(string)
	case "resources/read":
		name, _ = params["uri"].(string)
	}
	return func(r *http.Request) {
		mcptest.ModernHeaders(method, name)(r)
		if mod != nil {
			mod(r)
		}
	}
}

// postModern sends a 2026-07-28 request (with _meta and headers; mod may
// change the headers) and returns the whole response.
func postModern(t testing.TB, c *mcptest.Client, url, method string, params map[string]any, mod func(*http.Request)) *mcptest.Response {
	t.Helper()
	params = modernParams(params, nil)
	b, _ := encodeRequest(t, c, method, params)
	resp, err := c.PostRaw(context.Background(), url, b, modernMod(method, params, mod), nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// post sends a legacy request on c's session with extra header changes.
func post(t testing.TB, c *mcptest.Client, url, method string, params any, mod func(*http.Request)) *mcptest.Response {
	t.Helper()
	b, _ := encodeRequest(t, c, method, params)
	resp, err := c.PostRaw(context.Background(), url, b, mod, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// wantRPCError checks an HTTP error answer: the status, a JSON body that
// is a JSON-RPC error response, and (when code != 0) its code.
func wantRPCError(t testing.TB, resp *mcptest.Response, status int, code int64) *jsonrpc.Error {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("got status %d, want %d (body %q)", resp.Status, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("got Content-Type %q, want application/json (body %q)", ct, resp.Body)
	}
	msg, err := jsonrpc.Decode(resp.Body)
	if err != nil {
		t.Fatalf("body %q is not a JSON-RPC message: %v", resp.Body, err)
	}
	if msg.Kind() != jsonrpc.KindResponse || msg.Error == nil {
		t.Fatalf("body %q is not a JSON-RPC error response", resp.Body)
	}
	if code != 0 && msg.Error.Code != code {
		t.Fatalf("got error code %d (%s), want %d", msg.Error.Code, msg.Error.Message, code)
	}
	return msg.Error
}

// resultText returns the first text block of a tools/call result.
func resultText(t testing.TB, resp *mcptest.Response) string {
	t.Helper()
	var res mcp.CallToolResult
	resp.Result(t, &res)
	if len(res.Content) == 0 {
		t.Fatalf("empty content")
	}
	if res.IsError {
		t.Fatalf("tool error: %s", res.Content[0].Text)
	}
	return res.Content[0].Text
}

// hasMethod reports whether one of msgs has the given method.
func hasMethod(method string) func([]*jsonrpc.Message) bool {
	return func(ms []*jsonrpc.Message) bool {
		for _, m := range ms {
			if m.Method == method {
				return true
			}
		}
		return false
	}
}

// countAtLeast reports whether at least n of msgs have the method.
func countAtLeast(method string, n int) func([]*jsonrpc.Message) bool {
	return func(ms []*jsonrpc.Message) bool {
		c := 0
		for _, m := range ms {
			if m.Method == method {
				c++
			}
		}
		return c >= n
	}
}

// finalResponse reports whether msgs end with a response.
func finalResponse(ms []*jsonrpc.Message) bool {
	return len(ms) > 0 && ms[len(ms)-1].Kind() == jsonrpc.KindResponse
}

// header is a request modifier that sets (or, with "", deletes) headers
// given as name, value pairs.
func header(kv ...string) func(*http.Request) {
	return func(r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				r.Header.Del(kv[i])
			} else {
				r.Header.Set(kv[i], kv[i+1])
			}
		}
	}
}

// chain applies modifiers in order.
func chain(mods ...func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		for _, m := range mods {
			if m != nil {
				m(r)
			}
		}
	}
}

// openModern sends a 2026-07-28 request whose answer is a stream and
// returns it once its headers arrived.
func openModern(t testing.TB, c *mcptest.Client, url, method string, id jsonrpc.ID, params map[string]any, meta map[string]any) *mcptest.Stream {
	t.Helper()
	params = modernParams(params, meta)
	msg, err := jsonrpc.Request(id, method, params)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := jsonrpc.Encode(msg)
	st, err := c.OpenPost(url, b, modernMod(method, params, nil))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	t.Cleanup(st.Close)
	return st
}

// openLegacy sends a request on c's session whose answer is a stream and
// returns it once its headers arrived.
func openLegacy(t testing.TB, c *mcptest.Client, url, method string, params any) (*mcptest.Stream, jsonrpc.ID) {
	t.Helper()
	b, id := encodeRequest(t, c, method, params)
	st, err := c.OpenPost(url, b, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	t.Cleanup(st.Close)
	return st, id
}

// getStream opens c's GET stream (resuming after lastID when set) and
// closes it when the test ends.
func getStream(t testing.TB, c *mcptest.Client, url, lastID string) *mcptest.Stream {
	t.Helper()
	st, err := c.Get(url, lastID)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}
