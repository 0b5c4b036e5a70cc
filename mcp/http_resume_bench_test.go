package mcp_test

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkResumeFirstEvent measures a POST stream resumed with GET and
// Last-Event-ID over a loopback connection: first-event-µs is the median
// time from sending the GET to reading the first replayed event (what
// mcpbench's resume scenario measures, here without its concurrent
// load), on the memory backend and on a Redis the benchmark starts. Each
// operation first runs a progress call of 3 steps (not timed), then
// resumes it after its first progress notification.
func BenchmarkResumeFirstEvent(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":"p"}}}`)
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			n := newBenchNode(b, backend, 2*time.Second)
			ts := httptest.NewServer(n.h)
			b.Cleanup(ts.Close)
			hdr := n.legacySession(b)
			client := ts.Client()
			var firsts []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				rec := n.post(call, hdr)
				last := firstProgressID(rec.Body.Bytes())
				if last == "" {
					b.Fatalf("progress call: %d %s", rec.Code, rec.Body)
				}
				req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Last-Event-ID", last)
				b.StartTimer()
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() && !strings.HasPrefix(sc.Text(), "data:") {
				}
				firsts = append(firsts, time.Since(start))
				for sc.Scan() { // the rest of the replay, to the response
				}
				resp.Body.Close()
			}
			slices.Sort(firsts)
			b.ReportMetric(float64(firsts[len(firsts)/2].Microseconds()), "first-event-µs")
		})
	}
}

// firstProgressID returns the event id of the first progress
// notification of an SSE body.
func firstProgressID(body []byte) string {
	for block := range bytes.SplitSeq(body, []byte("\n\n")) {
		if !bytes.Contains(block, []byte("notifications/progress")) {
			continue
		}
		for line := range bytes.SplitSeq(block, []byte("\n")) {
			if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
				return string(id)
			}
		}
	}
	return ""
}
