package mcp_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// BenchmarkStreamedCall measures a 2025-11-25 tools/call answered on an
// SSE stream, the server side of it: progress with 10 notifications and
// the result, every event recorded in the stream's history before it is
// written (group commits), on a cached session. On Redis it reports the
// scripts (round trips) and the commands Redis executed per call; the
// session keeps more streams than MaxStreams, so each call also evicts
// an older one's history, as in a long-lived session.
func BenchmarkStreamedCall(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":10},"_meta":{"progressToken":"p"}}}`)
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend+"/progress", func(b *testing.B) {
			n := newBenchNode(b, backend, 2*time.Second)
			init := n.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), nil)
			sid := init.Header().Get("Mcp-Session-Id")
			if sid == "" {
				b.Fatalf("initialize: %d %s", init.Code, init.Body)
			}
			hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}
			serve := func() {
				rec := n.post(call, hdr)
				if rec.Code != http.StatusOK || bytes.Count(rec.Body.Bytes(), []byte("notifications/progress")) != 10 {
					b.Fatalf("tools/call progress: %d %s", rec.Code, rec.Body)
				}
			}
			for range 101 { // past the default MaxStreams (100)
				serve()
			}
			b.ReportAllocs()
			scripts, commands := n.redisScripts(b), n.redisCommands(b)
			for b.Loop() {
				serve()
			}
			if n.rdb != nil {
				b.ReportMetric((n.redisScripts(b)-scripts)/float64(b.N), "scripts/op")
				b.ReportMetric((n.redisCommands(b)-commands)/float64(b.N), "commands/op")
			}
		})
	}
}
