package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// lastEventID returns the id of the last event of st.
func lastEventID(t *testing.T, st *mcptest.Stream) string {
	t.Helper()
	evs := st.Events()
	if len(evs) == 0 || evs[len(evs)-1].ID == "" {
		t.Fatal("no event id to resume from")
	}
	return evs[len(evs)-1].ID
}

// A POST stream cut in the middle is resumed by GET with Last-Event-ID:
// the events produced while disconnected and after the resumption arrive,
// none lost or repeated, ending with the final response.
func TestResumePostStreamAfterCutEveryRevision(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := session(t, n.url, v, nil)
			id, first, last := cutGateCall(t, n, c)
			resumed := getStream(t, c, n.url, last)
			if !resumed.WaitFor(5*time.Second, countAtLeast("notifications/progress", 3)) {
				t.Fatal("second phase not replayed")
			}
			n.probe.release <- struct{}{} // the third phase is produced live
			select {
			case <-resumed.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the resumed stream did not end after the final response")
			}
			got := append(first, mcptest.ProgressValues(resumed.Messages())...)
			want := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
			if !slices.Equal(got, want) {
				t.Fatalf("progress %v, want %v exactly once", got, want)
			}
			ms := resumed.Messages()
			if f := ms[len(ms)-1]; f.Kind() != jsonrpc.KindResponse || f.ID != id || f.Error != nil {
				t.Fatalf("the resumed stream ends with %+v, want the result of %v", f, id)
			}
		})
	}
}

// cutGateCall calls gate {phases: [3, 3, 4]} on c, cuts its stream after
// the first phase and lets the second be produced while disconnected. It
// returns the call's id, the progress received before the cut and the
// id of the last event received, to resume from; the third phase waits
// for n.probe.release.
func cutGateCall(t *testing.T, n *node, c *mcptest.Client) (jsonrpc.ID, []float64, string) {
	t.Helper()
	st, id := openLegacy(t, c, n.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{3, 3, 4}}, true))
	n.probe.waitReached(t, 0)
	if !st.WaitFor(5*time.Second, countAtLeast("notifications/progress", 3)) {
		t.Fatal("first phase not received")
	}
	first := mcptest.ProgressValues(st.Messages())
	last := lastEventID(t, st)
	st.Close()                    // the cut
	n.probe.release <- struct{}{} // the second phase is produced while disconnected
	n.probe.waitReached(t, 1)
	return id, first, last
}

// finishGateCall lets the third phase of cutGateCall's call be produced
// live and checks that resumed, the stream resumed after the cut, ends
// with the call's result and that every step arrived exactly once.
func finishGateCall(t *testing.T, n *node, resumed *mcptest.Stream, id jsonrpc.ID, first []float64) {
	t.Helper()
	n.probe.release <- struct{}{}
	select {
	case <-resumed.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the resumed stream did not end after the final response")
	}
	got := append(first, mcptest.ProgressValues(resumed.Messages())...)
	if want := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("progress %v, want %v exactly once", got, want)
	}
	if ms := resumed.Messages(); ms[len(ms)-1].Kind() != jsonrpc.KindResponse || ms[len(ms)-1].ID != id || ms[len(ms)-1].Error != nil {
		t.Fatalf("the resumed stream ends with %+v, want the result of %v", ms[len(ms)-1], id)
	}
}

// testNotes returns the n params of notifications/test messages.
func testNotes(ms []*jsonrpc.Message) []int {
	var out []int
	for _, m := range ms {
		if m.Method != "notifications/test" {
			continue
		}
		var p struct {
			N int `json:"n"`
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, p.N)
	}
	return out
}

// A GET stream resumed after a cut receives the notifications sent while
// it was disconnected exactly once, then the new ones.
func TestResumeGetStreamAfterCut(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			c := session(t, n.url, v, nil)
			notify := func(from, to int) {
				for i := from; i <= to; i++ {
					if err := n.h.NotifySession(context.Background(), c.Session, "notifications/test", map[string]any{"n": i}); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := getStream(t, c, n.url, "")
			notify(1, 3)
			if !st.WaitFor(5*time.Second, countAtLeast("notifications/test", 3)) {
				t.Fatal("first notifications not received")
			}
			first := testNotes(st.Messages())
			last := lastEventID(t, st)
			st.Close()
			notify(4, 6) // while disconnected
			resumed := getStream(t, c, n.url, last)
			notify(7, 9)
			if !resumed.WaitFor(5*time.Second, countAtLeast("notifications/test", 6)) {
				t.Fatalf("resumed stream: got %v", testNotes(resumed.Messages()))
			}
			// A sentinel after the last one shows nothing else is queued.
			notify(10, 10)
			if !resumed.WaitFor(5*time.Second, countAtLeast("notifications/test", 7)) {
				t.Fatal("sentinel not received")
			}
			got := append(first, testNotes(resumed.Messages())...)
			if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v exactly once", got, want)
			}
		})
	}
}

// A Last-Event-ID naming another session's stream (its POST stream or
// its GET stream) is refused with 400 and nothing of that stream leaks;
// malformed ids and ids past the end of a stream get 400 too.
func TestResumeRefused(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, nil)
			a := session(t, n.url, v, nil)
			b := session(t, n.url, v, nil)
			resp := post(t, a, n.url, "tools/call", toolCall("progress", map[string]any{"steps": 3}, true), nil)
			if !resp.SSE || len(resp.Events) < 2 {
				t.Fatal("want a POST stream")
			}
			postID := resp.Events[1].ID
			aGet := getStream(t, a, n.url, "")
			if err := n.h.NotifySession(context.Background(), a.Session, "notifications/test", map[string]any{"secret": "of A"}); err != nil {
				t.Fatal(err)
			}
			if !aGet.WaitFor(5*time.Second, hasMethod("notifications/test")) {
				t.Fatal("A's GET stream: notification missing")
			}
			getID := aGet.Events()[0].ID
			// A itself may resume its POST stream.
			own := getStream(t, a, n.url, postID)
			if !own.WaitFor(5*time.Second, finalResponse) {
				t.Fatal("A could not resume its own stream")
			}
			pastEnd := postID[:strings.LastIndexByte(postID, '_')] + "_999"
			cases := []struct {
				name   string
				c      *mcptest.Client
				lastID string
			}{
				{"other session's POST stream", b, postID},
				{"other session's GET stream", b, getID},
				{"unknown stream", a, "abcdefghijklmnop_1"},
				{"past the end", a, pastEnd},
				{"garbage", a, "garbage"},
				{"no seq", a, "abcdefghijklmnop_"},
				{"leading zero", a, "abcdefghijklmnop_01"},
				{"no stream", a, "_1"},
				{"too long", a, strings.Repeat("a", 100) + "_1"},
				{"bad char", a, "abc.def_1"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, err := tc.c.Raw(context.Background(), http.MethodGet, n.url, nil, header("Last-Event-ID", tc.lastID, "Accept", "text/event-stream"))
					if err != nil {
						t.Fatal(err)
					}
					wantRPCError(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest)
					if strings.Contains(string(resp.Body), "progress") || strings.Contains(string(resp.Body), "of A") {
						t.Fatalf("the refusal leaks the stream: %q", resp.Body)
					}
				})
			}
		})
	}
}

// Resuming from an event whose successors were trimmed from the history
// (MaxEvents) gets 410 Gone, for POST and GET streams; resuming from a
// recent event still works.
func TestResumeEvictedHistory(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxEvents: 3}})
			c := session(t, n.url, v, nil)
			resp := post(t, c, n.url, "tools/call", toolCall("progress", map[string]any{"steps": 8}, true), nil)
			if !resp.SSE || len(resp.Events) < 8 {
				t.Fatal("want a POST stream")
			}
			gone := func(lastID string) {
				t.Helper()
				r, err := c.Raw(context.Background(), http.MethodGet, n.url, nil, header("Last-Event-ID", lastID, "Accept", "text/event-stream"))
				if err != nil {
					t.Fatal(err)
				}
				wantRPCError(t, r, http.StatusGone, jsonrpc.CodeInvalidRequest)
			}
			gone(resp.Events[0].ID)
			recent := getStream(t, c, n.url, resp.Events[len(resp.Events)-2].ID)
			if !recent.WaitFor(5*time.Second, finalResponse) || len(recent.Messages()) != 1 {
				t.Fatalf("resuming before the last event: got %d messages, want the final response", len(recent.Messages()))
			}

			st := getStream(t, c, n.url, "")
			for i := range 8 {
				// One at a time: a follower more than MaxEvents behind
				// loses its stream too.
				if err := n.h.NotifySession(context.Background(), c.Session, "notifications/test", map[string]any{"n": i}); err != nil {
					t.Fatal(err)
				}
				if !st.WaitFor(5*time.Second, countAtLeast("notifications/test", i+1)) {
					t.Fatalf("GET stream: notification %d missing", i)
				}
			}
			st.Close()
			gone(st.Events()[0].ID)
		})
	}
}

// SSE polling: a handler that closes its POST stream's connection
// (CloseSSEStream) makes the connection end after a retry hint on
// 2025-11-25; the client resumes with GET and Last-Event-ID and gets the
// rest of the stream and the final response. Older revisions do not
// poll: their POST stream stays open until the response.
func TestPollingCloseSSEStream(t *testing.T) {
	const hint = 60 * time.Millisecond
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{RetryHint: hint}})
			c := session(t, n.url, v, nil)
			st, id := openLegacy(t, c, n.url, "tools/call", toolCall("poll", nil, true))
			n.probe.waitReached(t, 0)
			if v != mcp.Version20251125 {
				n.probe.release <- struct{}{}
				if !st.WaitFor(5*time.Second, finalResponse) {
					t.Fatalf("%s: the POST stream ended without the response: %v", v, st.Err())
				}
				if got := mcptest.ProgressValues(st.Messages()); !slices.Equal(got, []float64{1, 2}) {
					t.Fatalf("progress %v, want [1 2]", got)
				}
				return
			}
			select {
			case <-st.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not close the POST connection")
			}
			events := len(st.Messages())
			if events == 0 || finalResponse(st.Messages()) {
				t.Fatalf("closed POST stream holds %d messages (final %v), want progress only", events, finalResponse(st.Messages()))
			}
			rs := st.Retries()
			if len(rs) == 0 || rs[len(rs)-1].Value != hint || rs[len(rs)-1].After < len(st.Events()) {
				t.Fatalf("retry hints %+v, want %v after the last of %d events", rs, hint, len(st.Events()))
			}
			resumed := getStream(t, c, n.url, lastEventID(t, st))
			n.probe.release <- struct{}{}
			select {
			case <-resumed.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the resumed stream did not end")
			}
			ms := resumed.Messages()
			if got := mcptest.ProgressValues(ms); !slices.Equal(got, []float64{2}) {
				t.Fatalf("resumed progress %v, want [2]", got)
			}
			if f := ms[len(ms)-1]; f.Kind() != jsonrpc.KindResponse || f.ID != id || !strings.Contains(string(f.Result), "polled") {
				t.Fatalf("resumed stream ends with %+v, want the result of %v", f, id)
			}
		})
	}
}

// followGate holds the claims of connections following a stream (their
// keys name ":follow:") until it is opened.
type followGate struct {
	cluster.Claims
	open    chan struct{}
	once    sync.Once
	opened  atomic.Bool
	waiting atomic.Int32
}

func (g *followGate) release() {
	g.once.Do(func() {
		g.opened.Store(true)
		close(g.open)
	})
}

func (g *followGate) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	if strings.Contains(key, ":follow:") {
		g.waiting.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return g.Claims.Claim(ctx, key, owner, ttl)
}

// The replay of a resumed POST stream waits for no store call but its
// read: the claim that keeps the stream's producer going is taken beside
// it, so a slow claim does not hold the first replayed event back. None
// is lost or repeated.
func TestResumeReplayDoesNotWaitForTheFollowClaim(t *testing.T) {
	b := memory.New(memory.Options{})
	gate := &followGate{Claims: b.Claims, open: make(chan struct{})}
	b.Claims = gate
	be := backendwrap.Wrap(b).(*mcp.Backend)
	t.Cleanup(func() { _ = be.Close() })
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: be}})
	c := session(t, n.url, mcp.Version20251125, nil)
	id, first, last := cutGateCall(t, n, c)
	// Opened in any case, so a replay that waits for the claim fails
	// the test rather than hanging it.
	defer time.AfterFunc(3*time.Second, gate.release).Stop()
	resumed := getStream(t, c, n.url, last)
	if !resumed.WaitFor(5*time.Second, countAtLeast("notifications/progress", 3)) {
		t.Fatal("second phase not replayed")
	}
	if gate.opened.Load() {
		t.Fatal("the replay waited for the follow claim")
	}
	if gate.waiting.Load() == 0 {
		t.Fatal("the resumed stream took no follow claim")
	}
	gate.release()
	finishGateCall(t, n, resumed, id, first)
}

// overlapProbe arms a backend whose calls are round trips (Remote) so
// that reading a stream's history waits (up to a few seconds) for a
// stream place to be asked for: it completes at once only when the two
// run side by side.
type overlapProbe struct {
	cluster.EventLog
	armed    atomic.Bool
	asked    chan struct{}
	askOnce  sync.Once
	reads    atomic.Int32 // Reads since armed: the first waits
	waitedUp atomic.Bool
}

func (p *overlapProbe) Read(ctx context.Context, session, stream string, after uint64) ([]cluster.Event, cluster.StreamInfo, error) {
	if p.armed.Load() && p.reads.Add(1) == 1 {
		select {
		case <-p.asked:
		case <-time.After(3 * time.Second):
			p.waitedUp.Store(true)
		}
	}
	return p.EventLog.Read(ctx, session, stream, after)
}

// overlapLimiter tells the probe when a stream place is asked for.
type overlapLimiter struct {
	cluster.Limiter
	p *overlapProbe
}

func (l overlapLimiter) Acquire(ctx context.Context, key, member string, ttl time.Duration, max int) (bool, time.Duration, error) {
	if l.p.armed.Load() {
		l.p.askOnce.Do(func() { close(l.p.asked) })
	}
	return l.Limiter.Acquire(ctx, key, member, ttl, max)
}

// On a backend whose calls are round trips, a resumed stream's history
// is read while the caller's stream place is taken, not before (fails
// on the old code: the place was asked for after the read returned).
func TestResumeReadsHistoryBesideTheStreamPlace(t *testing.T) {
	b := memory.New(memory.Options{})
	b.Remote = true
	p := &overlapProbe{EventLog: b.Events, asked: make(chan struct{})}
	b.Events, b.Limiter = p, overlapLimiter{Limiter: b.Limiter, p: p}
	be := backendwrap.Wrap(b).(*mcp.Backend)
	t.Cleanup(func() { _ = be.Close() })
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: be}})
	c := session(t, n.url, mcp.Version20251125, nil)
	id, first, last := cutGateCall(t, n, c)
	p.armed.Store(true)
	resumed := getStream(t, c, n.url, last)
	if !resumed.WaitFor(5*time.Second, countAtLeast("notifications/progress", 3)) {
		t.Fatal("second phase not replayed")
	}
	if p.waitedUp.Load() {
		t.Fatal("the history was read before the stream place was asked for")
	}
	finishGateCall(t, n, resumed, id, first)
}
