package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// flushRecorder is a ResponseWriter that counts its writes and flushes
// (each a syscall on a real connection).
type flushRecorder struct {
	header http.Header

	mu      sync.Mutex
	status  int
	body    bytes.Buffer
	writes  int
	flushes int
}

func newFlushRecorder() *flushRecorder { return &flushRecorder{header: http.Header{}} }

func (r *flushRecorder) Header() http.Header { return r.header }

func (r *flushRecorder) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = status
	}
}

func (r *flushRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.writes++
	return r.body.Write(p)
}

func (r *flushRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
}

// snapshot returns the body so far, and the writes and flushes.
func (r *flushRecorder) snapshot() (body string, writes, flushes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String(), r.writes, r.flushes
}

// serveCounted serves one request on n's handler (no network) and
// returns its recorder.
func serveCounted(n *node, ctx context.Context, method string, body []byte, hdr map[string]string) *flushRecorder {
	req := httptest.NewRequestWithContext(ctx, method, "/mcp", bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := newFlushRecorder()
	n.h.ServeHTTP(rec, req)
	return rec
}

// initCounted opens a 2025-11-25 session on n and returns the headers
// of its requests, and its id.
func initCounted(t *testing.T, n *node) (map[string]string, string) {
	t.Helper()
	init := serveCounted(n, t.Context(), http.MethodPost, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), nil)
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		body, _, _ := init.snapshot()
		t.Fatalf("initialize: %d %s", init.status, body)
	}
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.Version20251125}, sid
}

// firstEventID returns the id of a stream's first event.
func firstEventID(t *testing.T, body string) string {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			return id
		}
	}
	t.Fatalf("no event id in %q", body)
	return ""
}

// The events a POST stream records together (group commit) are written
// with one write and one flush: a 10-step progress call sends its 13
// events (priming, 10 progress notifications, a log message, the result)
// in a few batches, not one flush each; the headers go out with the first
// batch, and the last batch (the result's) is written without a flush,
// which the response's end does with the end of the body; a resume
// replays the whole history with one flush.
func TestStreamBatchFlushes(t *testing.T) {
	ns, _ := redisNodes(t, 1, nodeOptions{}, nil)
	n := ns[0]
	ctx := t.Context()
	hdr, _ := initCounted(t, n)
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":10,"delayMs":0},"_meta":{"progressToken":"p"}}}`)

	// The batches depend on timing: the best of a few calls.
	best, bestWrites := 1<<30, 0
	var stream string
	for range 5 {
		rec := serveCounted(n, ctx, http.MethodPost, call, hdr)
		body, writes, flushes := rec.snapshot()
		if got := strings.Count(body, "notifications/progress"); got != 10 || !strings.Contains(body, `"id":2,"result"`) {
			t.Fatalf("progress call: %d notifications in %q", got, body)
		}
		if flushes < best {
			best, bestWrites = flushes, writes
		}
		stream = firstEventID(t, body)
	}
	// One write per batch, the first with the headers, and a flush for
	// each but the last: two or three batches (the priming event may go
	// alone, the result with the notifications or after them).
	if best > 2 || bestWrites != best+1 {
		t.Fatalf("a 13-event progress call took %d flushes, %d writes; want one write more than flushes, at most 2 (the batches before the last)", best, bestWrites)
	}

	// A resume from the priming event replays the 12 events after it.
	hdr["Last-Event-ID"] = stream
	rec := serveCounted(n, ctx, http.MethodGet, nil, hdr)
	body, writes, flushes := rec.snapshot()
	if got := strings.Count(body, "notifications/progress"); got != 10 || !strings.Contains(body, `"id":2,"result"`) {
		t.Fatalf("resume: %d status, %d notifications in %q", rec.status, got, body)
	}
	if flushes != 2 || writes != 1 {
		t.Fatalf("a resume replaying 12 events took %d writes, %d flushes; want 1 write, 2 flushes (headers, replay)", writes, flushes)
	}
}

// A GET stream resumed after notifications it missed replays them with
// one flush.
func TestGetStreamReplayFlushesOnce(t *testing.T) {
	ns, _ := redisNodes(t, 1, nodeOptions{}, nil)
	n := ns[0]
	hdr, sid := initCounted(t, n)

	// open serves the GET stream until it holds want events, and returns
	// what it wrote.
	open := func(want int) *flushRecorder {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		recs := make(chan *flushRecorder, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
			req.Header.Set("Accept", "text/event-stream")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := newFlushRecorder()
			recs <- rec
			n.h.ServeHTTP(rec, req)
		}()
		rec := <-recs
		deadline := time.Now().Add(10 * time.Second)
		for {
			body, _, _ := rec.snapshot()
			if strings.Count(body, "\n\n") >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET stream: %d events of %d in %q", strings.Count(body, "\n\n"), want, body)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		return rec
	}
	first, _, _ := open(1).snapshot() // the priming event
	for range 5 {
		if err := n.h.NotifySession(t.Context(), sid, "notifications/message", map[string]any{"level": "info", "data": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	hdr["Last-Event-ID"] = firstEventID(t, first)
	body, writes, flushes := open(6).snapshot() // priming, 5 replayed
	if got := strings.Count(body, "notifications/message"); got != 5 {
		t.Fatalf("replayed %d notifications of 5: %q", got, body)
	}
	// Headers, priming event, replay.
	if flushes != 3 || writes != 2 {
		t.Fatalf("a GET stream replaying 5 events took %d writes, %d flushes; want 2 writes, 3 flushes", writes, flushes)
	}
}
