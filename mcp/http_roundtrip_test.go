package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// TestRedisRoundTripsPerToolCall counts the commands a node sends to
// Redis (MONITOR: one round trip each, scripts counted once) for a
// legacy tools/call answered with JSON, without a session cache (every
// call loads its session) and with one: the budget is one or two round trips, and
// the session load is the one. The per-caller rate adds one batched
// debit per 20ms window, whatever the number of requests in it.
func TestRedisRoundTripsPerToolCall(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name     string
		cacheTTL time.Duration
		max      float64
	}{
		{"uncached", 0, 1},
		{"cached", time.Hour, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A long lease keeps the heartbeat out of the window.
			n := newRedisRoundTripNode(t, srv.URL(), mcp.HTTPOptions{SessionCacheTTL: c.cacheTTL, NoSessionCache: c.cacheTTL == 0, LeaseTTL: time.Minute})
			hdr := n.initialize(t)
			n.call(t, hdr) // warms the cache when there is one
			perCall, debits := roundTripsPerCall(t, srv.URL(), func() { n.call(t, hdr) })
			t.Logf("%s: %.2f round trips per tools/call", c.name, perCall)
			// Background work (a heartbeat, the janitor) may add a
			// command or two to the window, and the rate debits theirs.
			if perCall > c.max+float64(2+debits)/roundTripCalls {
				t.Errorf("got %.2f round trips per tools/call, want at most %v", perCall, c.max)
			}
		})
	}
}

// TestRedisRoundTripsPerStreamedCall counts the round trips of a legacy
// tools/call whose answer is an SSE stream (progress, 2 steps) on a
// cached session: the group commits of its events (2 progress
// notifications, the tool's log message and the result), the stream's
// open folded into the first: with the handler not waiting for its
// notifications, two or three. The priming event costs none: its id is
// the open stream's start.
func TestRedisRoundTripsPerStreamedCall(t *testing.T) {
	srv := redistest.Start(t)
	n := newRedisRoundTripNode(t, srv.URL(), mcp.HTTPOptions{SessionCacheTTL: time.Hour, LeaseTTL: time.Minute})
	hdr := n.initialize(t)
	call := func() {
		rec := n.post([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"delayMs":0},"_meta":{"progressToken":1}}}`), hdr)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || bytes.Count(rec.Body.Bytes(), []byte("notifications/progress")) != 2 {
			t.Fatalf("tools/call progress: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	call()
	const want = 3
	perCall, debits := roundTripsPerCall(t, srv.URL(), call)
	t.Logf("%.2f round trips per streamed tools/call", perCall)
	if perCall > want+float64(2+debits)/roundTripCalls {
		t.Errorf("got %.2f round trips per streamed tools/call, want at most %d", perCall, want)
	}
}

// roundTripCalls is how many calls roundTripsPerCall makes.
const roundTripCalls = 50

// roundTripsPerCall counts the commands nodes send to the Redis at url
// (MONITOR: one round trip each, scripts counted once) while call runs
// roundTripCalls times, and returns them per call, with the number of
// per-caller rate debits the window may hold (one batch per 20ms
// window, not per request).
func roundTripsPerCall(t *testing.T, url string, call func()) (float64, int64) {
	t.Helper()
	c := costPerCall(t, url, call)
	return c.roundTrips, c.debits
}

// callCost is what a call costs in Redis (see costPerCall).
type callCost struct {
	roundTrips float64 // commands sent per call
	commands   float64 // commands executed per call: sent, and run by their scripts
	scripts    float64 // EVALSHA per call
	evals      int64   // EVAL in the window: the per-caller rate debits
	debits     int64   // the per-caller rate debits the window may hold
}

// costPerCall is roundTripsPerCall that also returns the commands Redis
// executed.
func costPerCall(t *testing.T, url string, call func()) callCost {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	mon, err := bench.StartMonitor(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	mon.Begin()
	start := time.Now()
	for range roundTripCalls {
		call()
	}
	debits := int64(time.Since(start)/(20*time.Millisecond)) + 1
	client, script, err := mon.End(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var sent, ran int64
	for _, v := range client {
		sent += v
	}
	for _, v := range script {
		ran += v
	}
	t.Logf("client commands %v, in scripts %v", client, script)
	return callCost{roundTrips: float64(sent) / roundTripCalls, commands: float64(sent+ran) / roundTripCalls,
		scripts: float64(client["evalsha"]) / roundTripCalls, evals: client["eval"], debits: debits}
}

type roundTripNode struct{ *benchNode }

// newRedisRoundTripNode is a roundTripNode on a backend of its own on the
// Redis at url.
func newRedisRoundTripNode(t *testing.T, url string, opts mcp.HTTPOptions) roundTripNode {
	t.Helper()
	opts.Backend = redisBackend(t, url)
	return newRoundTripNode(t, &opts)
}

func newRoundTripNode(t *testing.T, opts *mcp.HTTPOptions) roundTripNode {
	t.Helper()
	s := mcp.NewServer(mcp.Implementation{Name: "rt", Version: "1"}, &mcp.ServerOptions{StateKeys: testStateKeys})
	demo.Register(s)
	h, err := s.NewHTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return roundTripNode{&benchNode{h: h}}
}

func (n roundTripNode) initialize(t *testing.T) map[string]string {
	t.Helper()
	init := n.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"rt","version":"1"}}}`), nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
}

func (n roundTripNode) call(t *testing.T, hdr map[string]string) {
	t.Helper()
	rec := n.post([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`), hdr)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("tools/call: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// TestRedisRoundTripsPerGroupCommit counts the Redis round trips of
// tools/calls answered on an SSE stream over HTTP on Redis (session
// cache on), and the commands Redis executes for them (scripts count
// the commands they run): one that sends 10 progress notifications, and
// one that asks the client for sampling and waits for the answer. The
// stream's events are recorded in group commits (coordinator.Producer)
// with its open folded into the first, so a burst of notifications
// costs a few appends, not one each; nobody follows these streams, so
// the appends publish nothing, and they refresh TTLs only at the open.
// The session keeps few streams, so every call also evicts the history
// of an older one, as a long-lived session does.
func TestRedisRoundTripsPerGroupCommit(t *testing.T) {
	srv := redistest.Start(t)
	// Each call: 2 batches, the opening one (an eviction included) 16
	// commands, the final one 6, and a rate debit now and then. Under
	// load the producer may split a burst of events in more batches:
	// each costs 5 commands.
	const commands, batches, perBatch = 22, 2, 5
	for _, c := range []struct {
		name, call string
		max        float64
	}{
		{"progress", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":10},"_meta":{"progressToken":"p"}}}`, 4},
		{"sampling", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"}}}`, 2.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			const maxStreams = 8
			n := newRedisRoundTripNode(t, srv.URL(), mcp.HTTPOptions{SessionCacheTTL: time.Hour, LeaseTTL: time.Minute, MaxStreams: maxStreams})
			hs := httptest.NewServer(n.h)
			t.Cleanup(hs.Close)
			hdr := n.initialize(t)
			call := func() { streamCall(t, hs.URL, hdr, c.call) }
			for range maxStreams + 1 { // warms the cache, fills the LRU
				call()
			}
			got := costPerCall(t, srv.URL(), call)
			t.Logf("%s: %.2f round trips, %.1f commands per call", c.name, got.roundTrips, got.commands)
			if got.roundTrips > c.max+float64(2+got.debits)/roundTripCalls {
				t.Errorf("got %.2f round trips per call, want at most %v", got.roundTrips, c.max)
			}
			// A rate debit (an EVAL) is 5 commands; background work a
			// few.
			want := commands + perBatch*max(got.scripts-batches, 0)
			if got.commands > want+float64(10+5*got.evals)/roundTripCalls {
				t.Errorf("got %.1f Redis commands per call (%.2f batches), want at most %.1f", got.commands, got.scripts, want)
			}
		})
	}
}

// streamCall POSTs a tools/call that answers on an SSE stream, answers a
// sampling request on it, and reads it to the final response.
func streamCall(t *testing.T, url string, hdr map[string]string, body string) {
	t.Helper()
	post := func(body string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := post(body)
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("tools/call: %d %s", res.StatusCode, ct)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "" { // the priming event has no data
			continue
		}
		var msg jsonrpc.Message
		if err := json.Unmarshal([]byte(data), &msg); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch {
		case msg.Method == "sampling/createMessage":
			id, _ := json.Marshal(msg.ID)
			r := post(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"role":"assistant","content":{"type":"text","text":"hello"},"model":"m"}}`)
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				t.Fatalf("sampling answer: %d", r.StatusCode)
			}
		case msg.Method == "" && (msg.Result != nil || msg.Error != nil):
			if msg.Error != nil {
				t.Fatalf("tools/call: %v", msg.Error)
			}
			return
		}
	}
	t.Fatalf("stream ended without a response: %v", sc.Err())
}
