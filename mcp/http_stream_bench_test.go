package mcp_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkStreamedCall measures a 2025-11-25 tools/call answered on an
// SSE stream, the server side of it: progress with 10 notifications and
// the result, every event recorded in the stream's history before it is
// written (group commits), on a cached session. On Redis it reports the
// scripts (round trips) and the commands Redis executed per call; the
// session keeps more streams than MaxStreams, so each call also evicts
// an older one's history, as in a long-lived session. It reports the
// response's writes and flushes per call (each a syscall or more on a
// real connection).
func BenchmarkStreamedCall(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":10},"_meta":{"progressToken":"p"}}}`)
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend+"/progress", func(b *testing.B) {
			n := newBenchNode(b, backend, 2*time.Second)
			hdr := n.legacySession(b)
			var writes, flushes atomic.Int64
			serve := func() {
				rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder(), writes: &writes, flushes: &flushes}
				n.postTo(rec, call, hdr)
				if rec.Code != http.StatusOK || bytes.Count(rec.Body.Bytes(), []byte("notifications/progress")) != 10 {
					b.Fatalf("tools/call progress: %d %s", rec.Code, rec.Body)
				}
			}
			for range 101 { // past the default MaxStreams (100)
				serve()
			}
			b.ReportAllocs()
			scripts, commands := n.redisScripts(b), n.redisCommands(b)
			writes.Store(0)
			flushes.Store(0)
			for b.Loop() {
				serve()
			}
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
			b.ReportMetric(float64(flushes.Load())/float64(b.N), "flushes/op")
			if n.rdb != nil {
				b.ReportMetric((n.redisScripts(b)-scripts)/float64(b.N), "scripts/op")
				b.ReportMetric((n.redisCommands(b)-commands)/float64(b.N), "commands/op")
			}
		})
	}
}

// countingRecorder is a ResponseRecorder that counts its writes and
// flushes.
type countingRecorder struct {
	*httptest.ResponseRecorder
	writes, flushes *atomic.Int64
}

func (r *countingRecorder) Write(p []byte) (int, error) {
	r.writes.Add(1)
	return r.ResponseRecorder.Write(p)
}

func (r *countingRecorder) Flush() {
	r.flushes.Add(1)
	r.ResponseRecorder.Flush()
}
