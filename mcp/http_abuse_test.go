package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Abuse cases of one node (docs/RELIABILITY.md, "Abuse cases"): each
// drives an exhaustion attempt against a real node on loopback and checks
// the bound holds, the refused work gets its status with Retry-After and a
// JSON-RPC error body, and the goroutines come back near their baseline.

// wantRefused checks an admission refusal: status, Retry-After and a
// JSON-RPC error with the unavailable code.
func wantRefused(t testing.TB, resp *mcptest.Response, status int) {
	t.Helper()
	wantRPCError(t, resp, status, jsonrpc.CodeUnavailable)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d without Retry-After", status)
	}
}

// settle waits until at most slack goroutines more than base run.
func settle(t testing.TB, base, slack int, within time.Duration, what string) int {
	t.Helper()
	var n int
	mcptest.Eventually(t, within, what, func() bool {
		n = len(goroutines())
		return n <= base+slack
	})
	return n
}

// echoCall is a tools/call of echo.
func echoCall(text string) map[string]any {
	return toolCall("echo", map[string]any{"text": text}, false)
}

// Handlers per node and per session are bounded: a session past its share
// gets 429, anyone past the node's bound 503 (the modern era too), and
// once the handlers return the slots are free again.
func TestAbuseHandlerSlots(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxHandlers: 6, MaxSessionHandlers: 3}})
	a := session(t, n.url, mcp.Version20250618, nil)
	b := session(t, n.url, mcp.Version20250618, nil)
	c := session(t, n.url, mcp.Version20250618, nil)
	var dones []<-chan *mcptest.Response
	for range 3 {
		_, d := startBlock(t, n, a, false)
		dones = append(dones, d)
	}
	wantRefused(t, post(t, a, n.url, "tools/call", echoCall("x"), nil), http.StatusTooManyRequests)
	for range 3 {
		_, d := startBlock(t, n, b, false)
		dones = append(dones, d)
	}
	wantRefused(t, post(t, c, n.url, "tools/call", echoCall("x"), nil), http.StatusServiceUnavailable)
	m := mcptest.New(t, n.url)
	wantRefused(t, postModern(t, m, n.url, "tools/call", echoCall("x"), nil), http.StatusServiceUnavailable)
	for range dones {
		n.probe.release <- struct{}{}
	}
	for _, d := range dones {
		if got := resultText(t, <-d); got != "released" {
			t.Fatalf("got %q", got)
		}
	}
	if got := resultText(t, post(t, c, n.url, "tools/call", echoCall("x"), nil)); got != "x" {
		t.Fatalf("after the handlers returned: got %q", got)
	}
}

// batchBody encodes a 2025-03-26 batch of requests.
func batchBody(t testing.TB, c *mcptest.Client, n int, method string, params any) []byte {
	t.Helper()
	parts := make([]string, n)
	for i := range parts {
		b, _ := encodeRequest(t, c, method, params)
		parts[i] = string(b)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

// A batch is bounded in size (413), counts each member against the
// session's share (429), and is cancelled with its connection: its
// handlers see their contexts end and their goroutines go.
func TestAbuseBatch(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxBatch: 8, MaxSessionHandlers: 4}})
	c := session(t, n.url, mcp.Version20250326, nil)

	t.Run("too large", func(t *testing.T) {
		resp, err := c.PostRaw(context.Background(), n.url, batchBody(t, c, 9, "ping", nil), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantRPCError(t, resp, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest)
	})
	t.Run("members count", func(t *testing.T) {
		resp, err := c.PostRaw(context.Background(), n.url, batchBody(t, c, 5, "tools/call", echoCall("x")), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, resp, http.StatusTooManyRequests)
		resp, err = c.PostRaw(context.Background(), n.url, batchBody(t, c, 4, "tools/call", echoCall("x")), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []json.RawMessage
		if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &out) != nil || len(out) != 4 {
			t.Fatalf("a batch within the share: status %d, body %q", resp.Status, resp.Body)
		}
	})
	t.Run("cancelled with its connection", func(t *testing.T) {
		base := len(goroutines())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.PostRaw(ctx, n.url, batchBody(t, c, 4, "tools/call", toolCall("block", nil, false)), nil, nil)
		}()
		for range 4 {
			n.probe.waitStarted(t)
		}
		cancel()
		<-done
		for range 4 {
			n.probe.waitCancelled(t, 5*time.Second)
		}
		// A handler that saw its context end has yet to return, and the
		// batch frees its slots once the last one has: wait for that.
		mcptest.Eventually(t, 5*time.Second, "the batch's handler slots to be freed", func() bool {
			return gauge(t, n, "mcp_handlers_running") == 0
		})
		settle(t, base, 2, 5*time.Second, "the batch's goroutines to end")
		// The slots are free again.
		resp, err := c.PostRaw(context.Background(), n.url, batchBody(t, c, 4, "tools/call", echoCall("x")), nil, nil)
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("after the batch was cancelled: %v %+v", err, resp)
		}
	})
}

// A legacy request whose connection is gone is cancelled: at once when
// its answer was to be JSON (nothing can resume it), after ResumeGrace
// when it streamed and nobody resumed the stream. A resumed stream keeps
// its request running.
func TestAbuseDisconnectCancels(t *testing.T) {
	const grace = 400 * time.Millisecond
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{ResumeGrace: grace}})
	c := session(t, n.url, mcp.Version20250618, nil)

	t.Run("json", func(t *testing.T) {
		const calls = 40
		base := len(goroutines())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, calls)
		for range calls {
			b, _ := encodeRequest(t, c, "tools/call", toolCall("block", nil, false))
			go func() {
				_, _ = c.PostRaw(ctx, n.url, b, nil, nil)
				done <- struct{}{}
			}()
		}
		for range calls {
			n.probe.waitStarted(t)
		}
		start := time.Now()
		cancel()
		for range calls {
			<-done
			n.probe.waitCancelled(t, grace+5*time.Second)
		}
		t.Logf("%d handlers cancelled %v after their clients left", calls, time.Since(start))
		settle(t, base, 2, 5*time.Second, "the handlers' goroutines to end")
	})
	t.Run("stream not resumed", func(t *testing.T) {
		st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
		n.probe.waitStarted(t)
		start := time.Now()
		st.Close()
		n.probe.waitCancelled(t, grace+5*time.Second)
		if d := time.Since(start); d < grace/2 {
			t.Fatalf("cancelled %v after the disconnect, before the resume grace %v", d, grace)
		}
	})
	t.Run("stream resumed", func(t *testing.T) {
		st, id := openLegacy(t, c, n.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
		n.probe.waitStarted(t)
		if !st.WaitFor(5*time.Second, hasMethod("notifications/progress")) {
			t.Fatal("no progress on the stream")
		}
		evs := st.Events()
		if len(evs) == 0 || evs[len(evs)-1].ID == "" {
			t.Fatalf("no event id to resume from: %+v", evs)
		}
		st.Close()
		resumed := getStream(t, c, n.url, evs[len(evs)-1].ID)
		select {
		case got := <-n.probe.cancelled:
			t.Fatalf("request %s cancelled while its stream was resumed", got)
		case <-time.After(3 * grace):
		}
		n.probe.release <- struct{}{}
		if !resumed.WaitFor(5*time.Second, finalResponse) {
			t.Fatal("no final response on the resumed stream")
		}
		msgs := resumed.Messages()
		if last := msgs[len(msgs)-1]; last.ID.String() != id.String() || last.Error != nil {
			t.Fatalf("final message %+v, want the result of %s", last, id)
		}
	})
}

// The node holds at most MaxInflightBytes of request bodies: a request
// that would pass it is refused with 503 and Retry-After before its body
// is read, a small one still fits, and once the large ones finished a
// large one is served again.
func TestAbuseInflightBytes(t *testing.T) {
	const body = 64 << 10
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxBodyBytes: body, MaxInflightBytes: 2*body + body/4}})
	pad := strings.Repeat("p", body-1024)
	var dones []<-chan *mcptest.Response
	for range 2 {
		c := session(t, n.url, mcp.Version20250618, nil)
		params := toolCall("block", nil, false)
		params["_meta"] = map[string]any{"pad": pad}
		b, _ := encodeRequest(t, c, "tools/call", params)
		d := make(chan *mcptest.Response, 1)
		go func() {
			resp, _ := c.PostRaw(context.Background(), n.url, b, nil, nil)
			d <- resp
		}()
		n.probe.waitStarted(t)
		dones = append(dones, d)
	}
	c := session(t, n.url, mcp.Version20250618, nil)
	wantRefused(t, post(t, c, n.url, "tools/call", echoCall(pad), nil), http.StatusServiceUnavailable)
	if got := resultText(t, post(t, c, n.url, "tools/call", echoCall("small"), nil)); got != "small" {
		t.Fatalf("a small request: got %q", got)
	}
	for range dones {
		n.probe.release <- struct{}{}
	}
	for _, d := range dones {
		if got := resultText(t, <-d); got != "released" {
			t.Fatalf("got %q", got)
		}
	}
	if got := resultText(t, post(t, c, n.url, "tools/call", echoCall(pad), nil)); got != pad {
		t.Fatalf("a large request once the budget is free: got %d bytes", len(got))
	}
}
