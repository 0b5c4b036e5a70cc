package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Event ids are unique across all the streams of a session (POST streams
// and the GET stream), parse as sse.EventID, name their stream, and
// increase within it.
func TestSSEEventIDsUniqueAcrossStreams(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := session(t, n.url, v, nil)
			get := getStream(t, c, n.url, "")
			var wg sync.WaitGroup
			resps := make([]*mcptest.Response, 4)
			for i := range resps {
				b, _ := encodeRequest(t, c, "tools/call", toolCall("progress", map[string]any{"steps": 3}, true))
				wg.Go(func() {
					resps[i], _ = c.PostRaw(context.Background(), n.url, b, nil, nil)
				})
			}
			for i := range 3 {
				if err := n.h.NotifySession(context.Background(), c.Session, "notifications/test", map[string]any{"n": i}); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			if !get.WaitFor(5*time.Second, countAtLeast("notifications/test", 3)) {
				t.Fatal("GET stream: notifications missing")
			}
			seen := map[string]bool{}
			streams := map[string]string{} // stream id → where it was seen
			check := func(where string, evs []sse.Event) {
				t.Helper()
				stream, last := "", uint64(0)
				for _, ev := range evs {
					if ev.ID != "" && len(ev.Data) == 0 && where == "GET" {
						continue // a GET priming event repeats the resume cursor
					}
					id, err := sse.ParseEventID(ev.ID)
					if err != nil {
						t.Fatalf("%s: event id %q: %v", where, ev.ID, err)
					}
					if seen[ev.ID] {
						t.Fatalf("%s: event id %q used twice", where, ev.ID)
					}
					seen[ev.ID] = true
					if stream == "" {
						stream = id.Stream
						if other, dup := streams[stream]; dup {
							t.Fatalf("%s and %s share the stream id %q", where, other, stream)
						}
						streams[stream] = where
					} else if id.Stream != stream {
						t.Fatalf("%s: event ids name streams %q and %q", where, stream, id.Stream)
					}
					// A POST stream's priming event is its start, seq 0.
					if id.Seq <= last && (id.Seq != 0 || where != "POST" || len(ev.Data) != 0) {
						t.Fatalf("%s: seq %d after %d", where, id.Seq, last)
					}
					last = id.Seq
				}
			}
			for i, r := range resps {
				if r == nil || !r.SSE || len(r.Events) < 4 {
					t.Fatalf("POST %d: want a stream of at least 4 events", i)
				}
				check("POST", r.Events)
			}
			check("GET", get.Events())
		})
	}
}

// A POST stream starts with a priming event (an id, empty data, the
// retry hint) on 2025-11-25 only; a GET stream starts with the retry
// hint, and on 2025-11-25 with a priming event whose id is the resume
// cursor; 2026-07-28 streams carry no event ids.
func TestSSEPrimingAndRetryHint(t *testing.T) {
	const hint = 70 * time.Millisecond
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{RetryHint: hint}})
			c := mcptest.New(t, n.url)
			modern := v == mcp.Version20260728
			var resp *mcptest.Response
			if modern {
				resp = postModern(t, c, n.url, "tools/call", toolCall("progress", map[string]any{"steps": 2}, true), nil)
			} else {
				c.Initialize(v, nil)
				resp = post(t, c, n.url, "tools/call", toolCall("progress", map[string]any{"steps": 2}, true), nil)
			}
			if !resp.SSE || len(resp.Events) == 0 {
				t.Fatalf("want an event stream, got %d events", len(resp.Events))
			}
			first := resp.Events[0]
			primed := first.ID != "" && len(first.Data) == 0
			if want := v == mcp.Version20251125; primed != want {
				t.Fatalf("priming event: got %v, want %v", primed, want)
			}
			if primed && first.Retry != hint {
				t.Fatalf("priming event retry: got %v, want %v", first.Retry, hint)
			}
			for _, ev := range resp.Events[1:] {
				if len(ev.Data) == 0 {
					t.Fatalf("a second event without data: %+v", ev)
				}
			}
			for _, ev := range resp.Events {
				if hasID := ev.ID != ""; hasID == modern {
					t.Fatalf("event id %q on %s", ev.ID, v)
				}
			}
			if modern {
				return
			}
			get := getStream(t, c, n.url, "")
			if err := n.h.NotifySession(context.Background(), c.Session, "notifications/test", nil); err != nil {
				t.Fatal(err)
			}
			if !get.WaitFor(5*time.Second, hasMethod("notifications/test")) {
				t.Fatal("GET stream: notification missing")
			}
			rs := get.Retries()
			if len(rs) == 0 || rs[0].Value != hint || rs[0].After != 0 {
				t.Fatalf("GET stream retry hints %+v, want %v before any event", rs, hint)
			}
			// On 2025-11-25 the GET stream opens with a priming event: an
			// id (the resume cursor) and no data. Older revisions get
			// none, and nothing else is ever empty.
			getEvs := get.Events()
			getPrimed := len(getEvs) > 0 && len(getEvs[0].Data) == 0 && getEvs[0].ID != ""
			if want := v >= mcp.Version20251125; getPrimed != want {
				t.Fatalf("GET stream priming event present = %v, want %v (events %+v)", getPrimed, want, getEvs)
			}
			for i, ev := range getEvs {
				if len(ev.Data) == 0 && !(getPrimed && i == 0) {
					t.Fatalf("GET stream has an event without data: %+v", ev)
				}
			}
		})
	}
}

// wantSSEHeaders checks the headers of an event-stream response.
func wantSSEHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	if got := h.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("%s: Content-Type %q", what, got)
	}
	if got := h.Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("%s: X-Accel-Buffering %q, want no", what, got)
	}
	if got := h.Get("Cache-Control"); !strings.Contains(got, "no-cache") {
		t.Errorf("%s: Cache-Control %q, want no-cache", what, got)
	}
}

// Every event stream (POST, GET, resumed, 2026-07-28 POST and listen) is
// sent with X-Accel-Buffering: no and Cache-Control: no-cache, and sends
// comment keep-alives while it is quiet.
func TestSSEHeadersAndKeepAlive(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{KeepAlive: 20 * time.Millisecond}})
	keepAlive := func(what string, st *mcptest.Stream) {
		t.Helper()
		wantSSEHeaders(t, what, st.Resp.Header)
		if !st.WaitUntil(5*time.Second, func() bool { return st.Comments() >= 3 }) {
			t.Errorf("%s: %d keep-alive comments, want >= 3", what, st.Comments())
		}
	}
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			c := session(t, n.url, v, nil)
			keepAlive("GET", getStream(t, c, n.url, ""))

			st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
			n.probe.waitStarted(t)
			keepAlive("POST", st)
			var lastID string
			for _, ev := range st.Events() {
				lastID = ev.ID
			}
			st.Close()
			resumed := getStream(t, c, n.url, lastID)
			keepAlive("resumed POST", resumed)
			n.probe.release <- struct{}{}
			if !resumed.WaitFor(5*time.Second, finalResponse) {
				t.Fatal("resumed stream: no final response")
			}
		})
	}
	t.Run(mcp.Version20260728, func(t *testing.T) {
		c := mcptest.New(t, n.url)
		st := openModern(t, c, n.url, "tools/call", c.NextID(), toolCall("block", map[string]any{"progress": true}, true), nil)
		n.probe.waitStarted(t)
		keepAlive("modern POST", st)
		n.probe.release <- struct{}{}
		if !st.WaitFor(5*time.Second, finalResponse) {
			t.Fatal("modern POST: no final response")
		}
		listen := openModern(t, c, n.url, "subscriptions/listen", c.NextID(), map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
		keepAlive("listen", listen)
	})
}
