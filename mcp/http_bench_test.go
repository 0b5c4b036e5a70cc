package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// benchNode is a handler serving the demo pack, driven in process
// (ServeHTTP with a recorder: no sockets, no client).
type benchNode struct {
	h   *mcp.HTTPHandler
	rdb *goredis.Client // nil on the memory backend
}

// redisScripts returns the script calls (EVAL, EVALSHA) Redis has
// received: each is one round trip of the backend; 0 on memory.
func (n *benchNode) redisScripts(b *testing.B) float64 {
	calls := n.redisCalls(b)
	return calls["evalsha"] + calls["eval"]
}

// redisCommands returns the commands Redis has executed (those its
// scripts ran included), but for INFO; 0 on memory.
func (n *benchNode) redisCommands(b *testing.B) float64 {
	var total float64
	for name, c := range n.redisCalls(b) {
		if name != "info" {
			total += c
		}
	}
	return total
}

// redisCalls returns INFO commandstats' calls by command.
func (n *benchNode) redisCalls(b *testing.B) map[string]float64 {
	out := map[string]float64{}
	if n.rdb == nil {
		return out
	}
	info, err := n.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		f, err := strconv.ParseFloat(calls, 64)
		if err != nil {
			b.Fatal(err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = f
	}
	return out
}

func newBenchNode(b *testing.B, backend string, cacheTTL time.Duration) *benchNode {
	b.Helper()
	var be *mcp.Backend
	n := &benchNode{}
	switch backend {
	case "memory":
		be = mcp.NewMemoryBackend()
	case "redis":
		srv := redistest.Start(b)
		var err error
		if be, err = redisbackend.Open(context.Background(), srv.URL(), nil); err != nil {
			b.Fatal(err)
		}
		opts, err := goredis.ParseURL(srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		n.rdb = goredis.NewClient(opts)
		b.Cleanup(func() { _ = n.rdb.Close() })
	}
	b.Cleanup(func() { _ = be.Close() })
	s := mcp.NewServer(mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{StateKeys: [][]byte{bytes.Repeat([]byte{7}, 32)}})
	demo.Register(s)
	// The per-caller rate is checked (and debited) on every call, at a
	// rate the benchmark never reaches.
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: be, SessionCacheTTL: cacheTTL, CallerRate: 1 << 30, CallerBurst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	n.h = h
	return n
}

// legacySession opens a 2025-11-25 session and returns the headers of
// its requests.
func (n *benchNode) legacySession(b *testing.B) map[string]string {
	b.Helper()
	init := n.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
	if rec := n.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), hdr); rec.Code != http.StatusAccepted {
		b.Fatalf("notifications/initialized: %d", rec.Code)
	}
	return hdr
}

// post serves one POST and returns the recorder.
func (n *benchNode) post(body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	n.postTo(rec, body, hdr)
	return rec
}

// postTo serves one POST, answered on w.
func (n *benchNode) postTo(w http.ResponseWriter, body []byte, hdr map[string]string) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	n.h.ServeHTTP(w, req)
}

// del serves one DELETE and returns the recorder.
func (n *benchNode) del(hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	return rec
}

// BenchmarkToolCall measures one tools/call of echo answered as JSON, the
// whole server side of it (header checks, decoding, session load,
// dispatch, encoding) without the network: on a 2025-11-25 session with
// a node session cache (legacy/session-cached, SessionCacheTTL 2s: the
// session is read from the store once per 2s) and without one
// (legacy/session-uncached, SessionCacheTTL 1ns: every call loads the
// session from the store), and as a stateless 2026-07-28 request. The
// difference between the two legacy cases is the cost of a session load
// from the backend.
func BenchmarkToolCall(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	modern := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`)
	for _, backend := range []string{"memory", "redis"} {
		for _, c := range []struct {
			name string
			ttl  time.Duration
		}{{"legacy/session-cached", 2 * time.Second}, {"legacy/session-uncached", time.Nanosecond}, {"modern", 0}} {
			b.Run(backend+"/"+c.name, func(b *testing.B) {
				n := newBenchNode(b, backend, c.ttl)
				hdr := map[string]string{"Mcp-Protocol-Version": mcp.Version20260728, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
				body := modern
				if c.name != "modern" {
					init := n.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), nil)
					sid := init.Header().Get("Mcp-Session-Id")
					if sid == "" {
						b.Fatalf("initialize: %d %s", init.Code, init.Body)
					}
					hdr = map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
					if rec := n.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), hdr); rec.Code != http.StatusAccepted {
						b.Fatalf("notifications/initialized: %d", rec.Code)
					}
					body = call
				}
				b.ReportAllocs()
				for b.Loop() {
					rec := n.post(body, hdr)
					if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"hello"`)) {
						b.Fatalf("tools/call: %d %s", rec.Code, rec.Body)
					}
				}
			})
		}
	}
}

// BenchmarkSessionChurn measures a whole 2025-11-25 session per
// operation, the server side of it: initialize, notifications/initialized,
// one tools/call of echo and DELETE.
func BenchmarkSessionChurn(b *testing.B) {
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			n := newBenchNode(b, backend, 0)
			initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			initialized := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
			b.ReportAllocs()
			before := n.redisScripts(b)
			for b.Loop() {
				rec := n.post(initialize, nil)
				sid := rec.Header().Get("Mcp-Session-Id")
				if sid == "" {
					b.Fatalf("initialize: %d %s", rec.Code, rec.Body)
				}
				hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
				if rec := n.post(initialized, hdr); rec.Code != http.StatusAccepted {
					b.Fatalf("notifications/initialized: %d", rec.Code)
				}
				if rec := n.post(call, hdr); rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"hello"`)) {
					b.Fatalf("tools/call: %d %s", rec.Code, rec.Body)
				}
				if del := n.del(hdr); del.Code != http.StatusNoContent {
					b.Fatalf("DELETE: %d %s", del.Code, del.Body)
				}
			}
			if n.rdb != nil {
				b.ReportMetric((n.redisScripts(b)-before)/float64(b.N), "scripts/op")
			}
		})
	}
}
