package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// benchNode is a handler serving the demo pack, driven in process
// (ServeHTTP with a recorder: no sockets, no client).
type benchNode struct {
	h *mcp.HTTPHandler
}

func newBenchNode(b *testing.B, backend string, cacheTTL time.Duration) *benchNode {
	b.Helper()
	var be *mcp.Backend
	switch backend {
	case "memory":
		be = mcp.NewMemoryBackend()
	case "redis":
		srv := redistest.Start(b)
		var err error
		if be, err = redisbackend.Open(context.Background(), srv.URL(), nil); err != nil {
			b.Fatal(err)
		}
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
	return &benchNode{h: h}
}

// post serves one POST and returns the recorder.
func (n *benchNode) post(body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
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
