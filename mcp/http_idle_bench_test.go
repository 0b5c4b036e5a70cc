package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// BenchmarkIdleGetStreams measures what an open, idle GET stream costs
// the server: it opens idleStreams sessions on a loopback server, then
// one GET stream on each (over raw connections, so that the client side
// holds no goroutine or buffer), and reports the growth of the heap
// (heap-B/stream), of goroutine stacks (stack-B/stream) and of the
// number of goroutines (goroutines/stream), per stream. With -v it also
// logs the goroutines the streams added, grouped by stack. Run it alone:
//
//	go test -run '^$' -bench IdleGetStreams -benchtime 1x ./mcp/
//
// MCP_IDLE_STREAMS changes the number of streams (default 500);
// MCP_IDLE_HEAPPROFILE names a file to write the heap profile to while
// the streams are open (best with -memprofilerate 1).
func BenchmarkIdleGetStreams(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("MCP_IDLE_STREAMS")); err == nil && v > 0 {
		n = v
	}
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			url := idleStreamServer(b, backend)
			for b.Loop() {
				c := measureIdleStreams(b, url, n)
				b.ReportMetric(c.heap, "heap-B/stream")
				b.ReportMetric(c.stack, "stack-B/stream")
				b.ReportMetric(c.goroutines, "goroutines/stream")
			}
		})
	}
}

// An idle GET stream on Redis keeps one goroutine, the one watching for
// the client's close on its connection, taken over from net/http, and
// the heap of its own state: net/http's connection buffers (10 KiB), its
// request and its connection goroutine are let go, and no goroutine
// waits for the stream's events. Before the take-over it cost two
// goroutines, 12 KiB of stack and 25 KiB of heap.
func TestIdleGetStreamStack(t *testing.T) {
	skipIdleCost(t)
	c := measureIdleStreams(t, idleStreamServer(t, "redis"), 200)
	checkIdleCost(t, "GET", c, idleCost{goroutines: 1, stack: 4 << 10, heap: 14 << 10})
}

// An idle subscriptions/listen stream, its connection taken over from
// net/http, keeps two goroutines (its writer and the one watching for the
// client's close) on shallow stacks, and the heap of its own state.
// Before the take-over it cost 19 KiB of stack and 25 KiB of heap.
func TestIdleListenStreamCost(t *testing.T) {
	skipIdleCost(t)
	url := idleStreamServer(t, "redis")
	c := measureIdle(t, 200, func(int) net.Conn { return openIdleListen(t, url) })
	checkIdleCost(t, "listen", c, idleCost{goroutines: 2, stack: 8 << 10, heap: 14 << 10})
}

// skipIdleCost skips a test of an idle stream's cost in -short mode
// and under the race detector, whose frames are larger.
func skipIdleCost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 streams")
	}
	if raceEnabled {
		t.Skip("the race detector's frames are larger: the stack is measured without it")
	}
}

// checkIdleCost fails the test when an idle stream of kind costs more
// than most (goroutines up to 5% above, for stray ones).
func checkIdleCost(t *testing.T, kind string, c, most idleCost) {
	t.Helper()
	t.Logf("per idle %s stream: %.2f goroutines, %.0f B of stack, %.0f B of heap", kind, c.goroutines, c.stack, c.heap)
	if c.goroutines > most.goroutines+0.05 {
		t.Errorf("%.2f goroutines per idle %s stream, want %.0f", c.goroutines, kind, most.goroutines)
	}
	if c.stack > most.stack {
		t.Errorf("%.0f bytes of goroutine stack per idle %s stream, want at most %.0f", c.stack, kind, most.stack)
	}
	if c.heap > most.heap {
		t.Errorf("%.0f bytes of heap per idle %s stream, want at most %.0f", c.heap, kind, most.heap)
	}
}

// idleStreamServer starts a node on backend (memory or redis) on a
// loopback server and returns its URL.
func idleStreamServer(tb testing.TB, backend string) string {
	var be *mcp.Backend
	if backend == "redis" {
		srv := redistest.Start(tb)
		var err error
		if be, err = redisbackend.Open(context.Background(), srv.URL(), nil); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = be.Close() })
	}
	s := mcp.NewServer(mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{StateKeys: testStateKeys})
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: be, CallerRate: 1 << 30, CallerBurst: 1 << 30,
		MaxCallerStreams: 1 << 20, MaxCallerSessions: 1 << 20, MaxSessions: 1 << 21})
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.CloseClientConnections(); h.Close(); ts.Close() })
	return ts.URL
}

// idleCost is what one idle stream costs: heap and stack bytes, and
// goroutines.
type idleCost struct{ heap, stack, goroutines float64 }

// measureIdleStreams opens n sessions and then n GET streams, and
// returns the streams' cost.
func measureIdleStreams(b testing.TB, url string, n int) idleCost {
	sids := make([]string, n)
	client := &http.Client{}
	for i := range sids {
		sids[i] = openIdleSession(b, client, url)
	}
	client.CloseIdleConnections()
	return measureIdle(b, n, func(i int) net.Conn { return openIdleGet(b, url, sids[i]) })
}

// measureIdle opens n streams with open and returns their cost.
func measureIdle(b testing.TB, n int, open func(i int) net.Conn) idleCost {
	before := settledMem()
	goBefore := goroutineStacks()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = open(i)
	}
	time.Sleep(200 * time.Millisecond) // let the streams' goroutines park
	after := settledMem()
	goAfter := goroutineStacks()
	if path := os.Getenv("MCP_IDLE_HEAPPROFILE"); path != "" {
		// The heap while the streams are open (go test's -memprofile
		// is written after they closed).
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		_ = f.Close()
	}
	f := float64(n)
	cost := idleCost{
		heap:       float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / f,
		stack:      float64(int64(after.StackInuse)-int64(before.StackInuse)) / f,
		goroutines: float64(after.goroutines-before.goroutines) / f,
	}
	if testing.Verbose() {
		var out []string
		for stack, c := range goAfter {
			if d := c - goBefore[stack]; d > 0 {
				out = append(out, fmt.Sprintf("%d (%.2f/stream):\n%s", d, float64(d)/f, stack))
			}
		}
		sort.Strings(out)
		b.Logf("goroutines the streams added:\n%s", strings.Join(out, "\n"))
	}
	for _, c := range conns {
		_ = c.Close()
	}
	return cost
}

type memSample struct {
	runtime.MemStats
	goroutines int
}

// settledMem returns the memory statistics after two collections.
func settledMem() memSample {
	runtime.GC()
	runtime.GC()
	var m memSample
	runtime.ReadMemStats(&m.MemStats)
	m.goroutines = runtime.NumGoroutine()
	return m
}

// goroutineStacks counts the running goroutines by stack (functions
// only, without arguments or addresses).
func goroutineStacks() map[string]int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	out := map[string]int{}
	text := buf.String()
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[i+1:] // "goroutine profile: total N"
	}
	for _, rec := range strings.Split(text, "\n\n") {
		lines := strings.Split(rec, "\n")
		if len(lines) < 2 {
			continue
		}
		head := strings.Fields(lines[0])
		c, err := strconv.Atoi(head[0])
		if err != nil {
			continue
		}
		var fns []string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" {
				fns = append(fns, "  "+f[2])
			}
		}
		out[strings.Join(fns, "\n")] += c
	}
	return out
}

// openIdleSession initializes a 2025-11-25 session and returns its id.
func openIdleSession(b testing.TB, client *http.Client, url string) string {
	post := func(body, sid string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", mcp.Version20251125)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = bufio.NewReader(resp.Body).WriteTo(discard{})
		_ = resp.Body.Close()
		return resp
	}
	resp := post(string(initializeBody(mcp.Version20251125)), "")
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatalf("initialize: %s", resp.Status)
	}
	if resp := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); resp.StatusCode != http.StatusAccepted {
		b.Fatalf("notifications/initialized: %s", resp.Status)
	}
	return sid
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkIdleListenStreams is BenchmarkIdleGetStreams for 2026-07-28
// subscriptions/listen streams (no session), on Redis.
func BenchmarkIdleListenStreams(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("MCP_IDLE_STREAMS")); err == nil && v > 0 {
		n = v
	}
	url := idleStreamServer(b, "redis")
	for b.Loop() {
		c := measureIdle(b, n, func(int) net.Conn { return openIdleListen(b, url) })
		b.ReportMetric(c.heap, "heap-B/stream")
		b.ReportMetric(c.stack, "stack-B/stream")
		b.ReportMetric(c.goroutines, "goroutines/stream")
	}
}

// openIdleListen opens a subscriptions/listen stream on a raw connection
// and returns once its acknowledgement arrived.
func openIdleListen(b testing.TB, url string) net.Conn {
	params := modernParams(map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	msg, err := jsonrpc.Request(jsonrpc.IntID(1), "subscriptions/listen", params)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := jsonrpc.Encode(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	modernMod("subscriptions/listen", params, nil)(req)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		b.Fatal(err)
	}
	if err := req.Write(c); err != nil {
		b.Fatal(err)
	}
	return awaitIdle(b, c, "acknowledged")
}

// awaitIdle reads the start of a stream on c until mark and the end of
// a chunk, and returns c.
func awaitIdle(b testing.TB, c net.Conn, mark string) net.Conn {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte(mark)) || !bytes.HasSuffix(got, []byte("\n\n\r\n")) {
		k, err := c.Read(buf)
		if err != nil {
			b.Fatalf("stream: %v after %q", err, got)
		}
		got = append(got, buf[:k]...)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		b.Fatalf("stream: %q", got)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// openIdleGet opens the GET stream of session sid on a raw connection
// and returns once the priming event arrived.
func openIdleGet(b testing.TB, url, sid string) net.Conn {
	host := strings.TrimPrefix(url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n\r\n", host, sid, mcp.Version20251125)
	return awaitIdle(b, c, "\nid: ")
}
