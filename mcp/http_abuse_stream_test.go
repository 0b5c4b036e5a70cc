package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// rawRequest writes a request head (and the start of a body) on a fresh
// TCP connection to n and returns the connection; the test closes it.
func rawRequest(t testing.TB, n *node, dial *net.Dialer, head string) net.Conn {
	t.Helper()
	if dial == nil {
		dial = &net.Dialer{}
	}
	conn, err := dial.Dial("tcp", n.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// hostOf is the Host of n's address (a loopback host is allowed).
func hostOf(n *node) string { return n.ts.Listener.Addr().String() }

// A POST that sends its headers and then stalls gets 408 with a JSON-RPC
// error once BodyReadTimeout passed, and its connection is closed; a
// streamed response and a GET stream outlive the deadline untouched.
func TestAbuseStalledBody(t *testing.T) {
	const timeout = 300 * time.Millisecond
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{BodyReadTimeout: timeout, KeepAlive: 50 * time.Millisecond}})
	c := session(t, n.url, mcp.Version20250618, nil)
	base := len(goroutines())

	const stalled = 20
	conns := make([]net.Conn, stalled)
	wants := make([]int, stalled)
	for i := range conns {
		// Some are refused before their body is read (the server then
		// discards the body, which stalls as well).
		ct, want := "application/json", http.StatusRequestTimeout
		if i%4 == 3 {
			ct, want = "text/plain", http.StatusUnsupportedMediaType
		}
		wants[i] = want
		conns[i] = rawRequest(t, n, nil, fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n"+
			"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
			"Content-Length: 1000\r\n\r\n{\"jsonrpc\":", hostOf(n), ct, c.Session, c.Version))
	}
	start := time.Now()
	for i, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body after %v: %v", time.Since(start), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantRPCError(t, &mcptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, wants[i], jsonrpc.CodeInvalidRequest)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("the connection of a stalled body stayed open: %v", err)
		}
	}
	t.Logf("%d stalled bodies answered (408, or 415 when refused before reading) within %v", stalled, time.Since(start))
	settle(t, base, 2, 5*time.Second, "the stalled requests' goroutines to end")

	// Streams are not cut by the body deadline.
	get := getStream(t, c, n.url, "")
	st, id := openLegacy(t, c, n.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
	n.probe.waitStarted(t)
	time.Sleep(4 * timeout)
	n.probe.release <- struct{}{}
	if !st.WaitFor(5*time.Second, finalResponse) {
		t.Fatalf("the streamed response did not outlive the body deadline: %v", st.Err())
	}
	if msgs := st.Messages(); msgs[len(msgs)-1].ID.String() != id.String() {
		t.Fatalf("final message %+v", msgs[len(msgs)-1])
	}
	select {
	case <-get.Done():
		t.Fatalf("the GET stream ended: %v", get.Err())
	default:
	}
	if err := n.h.NotifySession(context.Background(), c.Session, "notifications/message", map[string]any{"level": "info", "data": "still here"}); err != nil {
		t.Fatal(err)
	}
	if !get.WaitFor(5*time.Second, hasMethod("notifications/message")) {
		t.Fatal("the GET stream stopped delivering after the body deadline")
	}
}

// GET, resumed and subscriptions/listen streams per node are capped: past
// MaxOpenStreams they get 503 with Retry-After; a closed stream frees its
// slot.
func TestAbuseOpenStreams(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxOpenStreams: 2}})
	var sessions []*mcptest.Client
	for range 3 {
		sessions = append(sessions, session(t, n.url, mcp.Version20250618, nil))
	}
	first := getStream(t, sessions[0], n.url, "")
	getStream(t, sessions[1], n.url, "")
	c := sessions[2]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Raw(ctx, http.MethodGet, n.url, nil, header("Accept", "text/event-stream"))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, resp, http.StatusServiceUnavailable)
	m := mcptest.New(t, n.url)
	params := modernParams(map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	b, _ := encodeRequest(t, m, "subscriptions/listen", params)
	resp, err = m.PostRaw(context.Background(), n.url, b, modernMod("subscriptions/listen", params, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, resp, http.StatusServiceUnavailable)
	first.Close()
	mcptest.Eventually(t, 5*time.Second, "a stream slot to be free again", func() bool {
		st, err := c.Get(n.url, "")
		if err != nil {
			return false
		}
		st.Close()
		return true
	})
}

// A client that opens GET streams and never reads them does not pin the
// node's goroutines: once a write blocks for StreamWriteTimeout the
// stream ends, although the client keeps its connections open.
func TestAbuseUnreadStreams(t *testing.T) {
	const (
		streams  = 6
		writeMax = 300 * time.Millisecond
	)
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{StreamWriteTimeout: writeMax, KeepAlive: 50 * time.Millisecond}})
	// A small receive window, so that the server's writes block soon.
	dial := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	var ids []string
	for range streams {
		ids = append(ids, session(t, n.url, mcp.Version20250618, nil).Session)
	}
	base := len(goroutines())
	for _, sid := range ids {
		conn := rawRequest(t, n, dial, fmt.Sprintf("GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n"+
			"Mcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n\r\n", hostOf(n), sid, mcp.Version20250618))
		_ = conn // never read
	}
	mcptest.Eventually(t, 5*time.Second, "the GET streams to open", func() bool {
		return len(goroutines()) >= base+streams // an idle one holds one
	})
	open := len(goroutines())
	// More than a loopback socket buffers (4 MiB on the sending side).
	start := time.Now()
	big := strings.Repeat("x", 256<<10)
	for range 24 {
		for _, sid := range ids {
			if err := n.h.NotifySession(context.Background(), sid, "notifications/message", map[string]any{"level": "info", "data": big}); err != nil {
				t.Fatal(err)
			}
		}
	}
	left := settle(t, base, 2, 10*time.Second, "the unread streams' goroutines to end")
	t.Logf("%d unread streams: %d goroutines while open, %d %v after the first push (baseline %d)", streams, open, left, time.Since(start), base)
}

// A subscriptions/listen stream that is never read does not hold up the
// notifications of the node's other listen streams (they are delivered
// from the node's one bus subscription): it falls behind, is ended, and
// its goroutines go.
func TestAbuseUnreadListenStream(t *testing.T) {
	const writeMax = 10 * time.Second
	// A 6 KB uri makes each update fat; MaxURIBytes lets the filter carry it.
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{StreamWriteTimeout: writeMax}, Server: mcp.ServerOptions{MaxURIBytes: 8192}})
	uri := "demo://abuse/" + strings.Repeat("u", 6000)
	params := modernParams(map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}}, nil)
	base := len(goroutines())

	// The stalled listener: a small receive window, never read.
	m := mcptest.New(t, n.url)
	b, _ := encodeRequest(t, m, "subscriptions/listen", params)
	dial := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	req, _ := http.NewRequest(http.MethodPost, n.url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	modernMod("subscriptions/listen", params, nil)(req)
	var head strings.Builder
	_ = req.Header.Write(&head)
	rawRequest(t, n, dial, fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n%s\r\n%s", hostOf(n), len(b), head.String(), b))

	good := openModern(t, m, n.url, "subscriptions/listen", m.NextID(), map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}}, nil)
	if !good.WaitFor(5*time.Second, hasMethod("notifications/subscriptions/acknowledged")) {
		t.Fatal("no acknowledgement")
	}
	// About 5.5 MB to each listener, more than the socket buffers hold.
	// One at a time: fan-outs of the same notification coalesce.
	const updates = 900
	start := time.Now()
	gap := time.Duration(0)
	for i := range updates {
		sent := time.Now()
		n.srv.ResourceUpdated(context.Background(), uri)
		// The reading listener must never wait long for an update (the
		// bus would wait a whole StreamWriteTimeout on the unread stream).
		// (Events, not Messages: nothing decoded, the acknowledgement first.)
		if !good.WaitUntil(time.Minute, func() bool { return len(good.Events()) >= i+2 }) {
			t.Fatalf("update %d never reached the reading listener", i+1)
		}
		gap = max(gap, time.Since(sent))
	}
	if gap > writeMax/2 {
		t.Fatalf("the reading listener once waited %v for an update: the unread one held it up", gap)
	}
	if got := good.Count("notifications/resources/updated"); got != updates {
		t.Fatalf("the reading listener got %d updates, want %d", got, updates)
	}
	t.Logf("%d updates reached the reading listener in %v, none waiting more than %v", updates, time.Since(start), gap)
	good.Close()
	mcptest.Eventually(t, 2*writeMax, "the unread listen stream to end", func() bool {
		return gauge(t, n, "mcp_streams_admitted") == 0
	})
	settle(t, base, 2, 2*writeMax, "the unread listen stream's goroutines to end")
}

// gauge reads one of the node's metrics.
func gauge(t testing.TB, n *node, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	n.h.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
