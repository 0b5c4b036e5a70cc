package mcp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// countStacks returns how many running goroutines have one of fns in
// their stack.
func countStacks(fns ...string) int {
	n := 0
	for _, g := range goroutines() {
		for _, fn := range fns {
			if strings.Contains(g, fn) {
				n++
				break
			}
		}
	}
	return n
}

// openPrimed opens a session's GET stream on n and returns once its
// priming event arrived.
func openPrimed(t *testing.T, n *node) (*mcptest.Client, *mcptest.Stream) {
	t.Helper()
	c := session(t, n.url, mcp.Version20251125, nil)
	st := getStream(t, c, n.url, "")
	if !st.WaitUntil(5*time.Second, func() bool { return len(st.Events()) > 0 }) {
		t.Fatalf("no priming event: %v", st.Err())
	}
	return c, st
}

// mustEnd fails the test unless st ends soon after what ended it.
func mustEnd(t *testing.T, st *mcptest.Stream, what string) {
	t.Helper()
	select {
	case <-st.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the taken stream outlived %s", what)
	}
}

// openGets is the node's open GET streams, from its metrics.
func openGets(t *testing.T, n *node) float64 {
	return sample(t, scrape(t, n.h), `mcp_streams_open{kind="get",node="t1"}`)
}

// An HTTP/1.1 GET stream is taken over from net/http once open: no
// net/http goroutine serves it any longer, and while idle it keeps one
// goroutine, the one watching for the client's close. It still carries
// events and keep-alives, gives its claim up and its count in the
// metrics as soon as the client leaves, and ends on Drain, which waits
// for it, with the retry hint and a complete body; newNode fails the
// test on a goroutine left behind.
func TestTakenGetStream(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "t1", KeepAlive: 30 * time.Millisecond}})
	c, st := openPrimed(t, n)
	// The priming event may arrive before the connection is taken.
	mcptest.Eventually(t, 5*time.Second, "the GET stream's connection to be taken over", func() bool {
		return countStacks("mcp.(*HTTPHandler).serveGet") == 0 && countStacks("mcp.(*takenStream).watch") == 1
	})
	// The stream's own: the adapter's, and the node's serving it.
	if got := countStacks("mcp.(*HTTPHandler).", "mcp.(*streamSink).", "coordinator.(*getServe).", "coordinator.(*Node).serveGet"); got != 1 {
		t.Errorf("%d goroutines of the handler for one idle GET stream, want 1:\n%s", got, strings.Join(goroutines(), "\n\n"))
	}
	if got := openGets(t, n); got != 1 {
		t.Errorf("%v open GET streams in the metrics, want 1", got)
	}

	if err := n.h.NotifySession(context.Background(), c.Session, "notifications/message", map[string]any{"level": "info", "data": "x"}); err != nil {
		t.Fatal(err)
	}
	if !st.WaitFor(5*time.Second, hasMethod("notifications/message")) {
		t.Fatalf("the taken stream delivered no event: %v", st.Err())
	}
	if !st.WaitUntil(5*time.Second, func() bool { return st.Comments() >= 2 }) {
		t.Fatalf("the taken stream sent %d keep-alives", st.Comments())
	}

	// The client leaves: the claim goes at once, so a request on the
	// stream fails instead of waiting for its timeout.
	st.Close()
	mcptest.Eventually(t, 5*time.Second, "the stream's claim to be released", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return errors.Is(n.h.Ping(ctx, c.Session), mcp.ErrNoChannel)
	})
	mcptest.Eventually(t, 5*time.Second, "the stream's goroutine to end", func() bool {
		return countStacks("mcp.(*takenStream).watch") == 0 && openGets(t, n) == 0
	})

	// Drain ends the stream with the retry hint and the body's end (no
	// unexpected EOF), and waits for it.
	_, st = openPrimed(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.h.Drain(ctx)
	if got := openGets(t, n); got != 0 {
		t.Errorf("Drain returned with %v GET streams open", got)
	}
	mustEnd(t, st, "Drain")
	if err := st.Err(); !errors.Is(err, io.EOF) {
		t.Errorf("the drained stream ended with %v, want EOF (a complete body)", err)
	}
	if len(st.Retries()) == 0 {
		t.Error("the drained stream got no retry hint")
	}
}

// A stream that may be taken over says its connection ends with it: a
// taken stream closes its connection when it ends, so a client that read
// the body to its end must not pool the connection and send its next
// request on it (it would get a reset, and a POST is not retried).
func TestTakenStreamConnectionNotReused(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "t1"}})
	c, st := openPrimed(t, n)
	if !st.Resp.Close {
		t.Fatalf("GET stream response headers %v: want Connection: close", st.Resp.Header)
	}
	listen := openModern(t, mcptest.New(t, n.url), n.url, "subscriptions/listen", jsonrpc.IntID(1),
		map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	if !listen.Resp.Close {
		t.Fatalf("listen stream response headers %v: want Connection: close", listen.Resp.Header)
	}
	// The session's end ends the stream with a complete body; the next
	// request goes on a new connection and is answered.
	if got := c.Delete(n.url); got != http.StatusOK && got != http.StatusNoContent {
		t.Fatalf("DELETE: got %d", got)
	}
	mustEnd(t, st, "the session's end")
	if resp := post(t, c, n.url, "ping", nil, nil); resp.Status != http.StatusNotFound {
		t.Fatalf("a request after the session ended: got %d, want 404", resp.Status)
	}
}

// Close ends the taken streams of the node, and waits for them.
func TestTakenGetStreamClose(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "t1"}})
	_, st := openPrimed(t, n)
	n.h.Close()
	if got := openGets(t, n); got != 0 {
		t.Errorf("Close returned with %v GET streams open", got)
	}
	mustEnd(t, st, "Close")
}

// Over TLS an HTTP/1.1 GET stream is taken over too (its connection is
// the TLS one); an HTTP/2 stream, one of the connection's many, stays
// with net/http. Both carry events, and end when the client leaves.
func TestTakenGetStreamTLS(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP1.1", true: "HTTP2"}[h2], func(t *testing.T) {
			checkLeaks(t)
			h, err := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1"}, nil).NewHTTPHandler(&mcp.HTTPOptions{NodeID: "t1"})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewUnstartedServer(h)
			ts.EnableHTTP2 = h2
			ts.StartTLS()
			t.Cleanup(func() { ts.CloseClientConnections(); h.Close(); ts.Close() })
			c := mcptest.New(t, ts.URL)
			c.HTTP = ts.Client()
			c.Initialize(mcp.Version20251125, nil)
			st := getStream(t, c, ts.URL, "")
			if got := st.Resp.ProtoMajor; got != map[bool]int{false: 1, true: 2}[h2] {
				t.Fatalf("the GET stream is HTTP/%d", got)
			}
			if !st.WaitUntil(5*time.Second, func() bool { return len(st.Events()) > 0 }) {
				t.Fatalf("no priming event: %v", st.Err())
			}
			want := map[bool]int{false: 1, true: 0}[h2]
			mcptest.Eventually(t, 5*time.Second, "the stream to settle", func() bool {
				return countStacks("mcp.(*takenStream).watch") == want && countStacks("mcp.(*HTTPHandler).serveGet") == 1-want
			})
			if err := h.NotifySession(context.Background(), c.Session, "notifications/message", map[string]any{"level": "info", "data": "x"}); err != nil {
				t.Fatal(err)
			}
			if !st.WaitFor(5*time.Second, hasMethod("notifications/message")) {
				t.Fatalf("the stream delivered no event: %v", st.Err())
			}
			st.Close()
			mcptest.Eventually(t, 5*time.Second, "the stream to end", func() bool {
				return sample(t, scrape(t, h), `mcp_streams_open{kind="get",node="t1"}`) == 0
			})
		})
	}
}

// A subscriptions/listen stream on HTTP/1.1 is taken over from net/http
// once acknowledged, unless receiving middleware wraps it (a middleware
// sees a request end when its handler returns): it then runs on a
// goroutine of its own with one watching for the client's close, still
// delivers notifications, and ends when the client leaves.
func TestTakenListenStream(t *testing.T) {
	for _, mw := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "middleware"}[mw], func(t *testing.T) {
			o := &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "t1"}}
			if mw {
				o.Setup = func(s *mcp.Server) {
					s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler { return next })
				}
			}
			n := newNode(t, o)
			c := mcptest.New(t, n.url)
			st := openModern(t, c, n.url, "subscriptions/listen", jsonrpc.StringID("L"), map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
			if !st.WaitFor(5*time.Second, hasMethod("notifications/subscriptions/acknowledged")) {
				t.Fatalf("no acknowledgement: %v", st.Err())
			}
			taken := map[bool]int{false: 1, true: 0}[mw]
			mcptest.Eventually(t, 5*time.Second, "the stream to settle", func() bool {
				return countStacks("mcp.(*takenStream).watch") == taken && countStacks("mcp.(*HTTPHandler).serveListen") == 1-taken
			})
			resultText(t, postModern(t, c, n.url, "tools/call", toolCall("toggle_extra_tool", nil, false), nil))
			if !st.WaitFor(5*time.Second, hasMethod("notifications/tools/list_changed")) {
				t.Fatalf("no list_changed: %v", st.Err())
			}
			st.Close()
			mcptest.Eventually(t, 5*time.Second, "the stream to end", func() bool {
				return sample(t, scrape(t, n.h), `mcp_streams_open{kind="listen",node="t1"}`) == 0 &&
					countStacks("mcp.(*takenStream).watch") == 0 && countStacks("mcp.(*HTTPHandler).runListen") == 0
			})
		})
	}
}
