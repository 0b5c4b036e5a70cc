package coordinator_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// syncBuf is a log sink safe for the bus goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testNode struct {
	*coordinator.Node
	sessions *session.Store
	log      *syncBuf
	metrics  *telemetry.Metrics
}

// startNodes starts n nodes on one memory backend.
func startNodes(t *testing.T, n int) (*cluster.Backend, []testNode) {
	return startNodesAs(t, slices.Repeat([]string{"inc"}, n), 0)
}

// startNodesAs starts a node of each incarnation on one memory backend,
// with a session cache of cacheTTL (0: none); wrap, if any, changes the
// backend before the nodes start (a test counting calls).
func startNodesAs(t *testing.T, incarnations []string, cacheTTL time.Duration, wrap ...func(*cluster.Backend)) (*cluster.Backend, []testNode) {
	t.Helper()
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	for _, w := range wrap {
		w(be)
	}
	return be, startNodesOn(t, be, incarnations, cacheTTL)
}

// startNodesOn starts a node of each incarnation on be, as startNodesAs.
func startNodesOn(t *testing.T, be *cluster.Backend, incarnations []string, cacheTTL time.Duration) []testNode {
	t.Helper()
	var out []testNode
	for i, inc := range incarnations {
		id := string(rune('a' + i))
		waiters := coordinator.New(id, inc, be.Bus, 0)
		store := session.NewStore(be.Sessions, session.Options{TTL: time.Minute, CacheTTL: cacheTTL, Holder: waiters.Instance()})
		buf := &syncBuf{}
		metrics := telemetry.NewMetrics(id)
		node := coordinator.NewNode(coordinator.Config{
			Backend: be, Waiters: waiters, Sessions: store,
			LeaseTTL: 3 * time.Second, SessionTTL: 200 * time.Millisecond, HistoryTTL: time.Minute, MaxFanOuts: 2,
			Log: zerolog.New(buf), Metrics: metrics,
		})
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close(errors.New("closed")); node.Leave() })
		out = append(out, testNode{node, store, buf, metrics})
	}
	// Each node counts the others once their MemberJoined arrived: a wait
	// for acknowledgements (Echo) before that waits for nobody.
	for _, a := range out {
		for _, b := range out {
			waitFor(t, "every node to count every other", func() bool { return a.KnowsMember(b.Instance()) })
		}
	}
	return out
}

func newSession(t *testing.T, st *session.Store) string {
	t.Helper()
	sid := "S" + strings.Repeat("x", 8) + time.Now().Format("150405.000000000")
	if err := st.Create(context.Background(), &session.Session{ID: sid, Version: "2025-06-18"}, nil); err != nil {
		t.Fatal(err)
	}
	return sid
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Flow 6: a cancellation sent from one node reaches the request running
// on another, and only that request.
func TestNodeCancelReachesTheRunningRequest(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer b.Local.AddInflight("S1", "n:1", cancel)()
	other, cancelOther := context.WithCancel(context.Background())
	defer b.Local.AddInflight("S2", "n:1", cancelOther)()
	a.CancelRequest(context.Background(), "S1", "n:1")
	waitFor(t, "the cancellation", func() bool { return ctx.Err() != nil })
	if other.Err() != nil {
		t.Fatal("another session's request with the same id was cancelled")
	}
}

// Flow 8: a session ended on one node ends another node's streams,
// running requests and waiters of that session.
func TestNodeEndSessionEndsEverythingOfItElsewhere(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	sid := newSession(t, b.sessions)
	reqCtx, reqCancel := context.WithCancel(context.Background())
	defer b.Local.AddInflight(sid, "n:7", reqCancel)()
	connCtx, connCancel := context.WithCancelCause(context.Background())
	defer b.Local.AddConn(sid, &coordinator.Conn{ID: "c1", Cancel: connCancel})()
	w, err := b.Waiters.Register(sid, "", b.Waiters.NewID(), "post")
	if err != nil {
		t.Fatal(err)
	}
	if live, err := a.EndSession(context.Background(), sid, "", ""); err != nil || !live {
		t.Fatalf("EndSession: live %v, %v", live, err)
	}
	waitFor(t, "the session's request to be cancelled", func() bool { return reqCtx.Err() != nil })
	waitFor(t, "the session's stream to end", func() bool { return connCtx.Err() != nil })
	if cause := context.Cause(connCtx); !errors.Is(cause, coordinator.ErrSessionEnded) {
		t.Fatalf("stream ended with %v", cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.Wait(ctx); err == nil || b.Waiters.Pending() != 0 {
		t.Fatalf("waiter: %v, %d pending", err, b.Waiters.Pending())
	}
}

// fakeListener records what a listen stream receives.
type fakeListener struct {
	method string
	mu     sync.Mutex
	got    []string
	ended  []bool
}

func (f *fakeListener) Wants(method, _ string) bool { return method == f.method }

func (f *fakeListener) Notify(method, uri string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, method+" "+uri)
}

func (f *fakeListener) End(abrupt bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, abrupt)
}

func (f *fakeListener) snapshot() ([]string, []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...), append([]bool(nil), f.ended...)
}

// Flow 7: a fan-out on one node lands once on the GET stream of every
// session, and on the listen streams of every node that asked for it.
func TestNodeFanOutReachesEverySessionAndListener(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	var sids []string
	for range 3 {
		sid := newSession(t, a.sessions)
		if err := be.Events.Open(ctx, coordinator.GetStreamID(sid), cluster.StreamMeta{Session: sid}, cluster.Limits{}); err != nil {
			t.Fatal(err)
		}
		sids = append(sids, sid)
	}
	want := &fakeListener{method: "notifications/tools/list_changed"}
	defer b.Local.AddListener(want)()
	other := &fakeListener{method: "notifications/prompts/list_changed"}
	defer b.Local.AddListener(other)()
	a.FanOut("notifications/tools/list_changed", "", []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	waitFor(t, "the listen stream", func() bool { got, _ := want.snapshot(); return len(got) == 1 })
	for _, sid := range sids {
		sid := sid
		var got []string
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := b.TailGet(tctx, sid, coordinator.GetCursor{}, func(ev cluster.Event, cur coordinator.GetCursor, broadcast bool) error {
			got = append(got, string(ev.Data))
			if !broadcast || cur.Broadcast != ev.Seq {
				t.Errorf("event %d of %s: broadcast %v at %+v", ev.Seq, sid, broadcast, cur)
			}
			cancel()
			return nil
		}, nil)
		cancel()
		if !errors.Is(err, context.Canceled) || len(got) != 1 {
			t.Fatalf("the GET stream of %s: %v, %q", sid, err, got)
		}
	}
	if got, _ := other.snapshot(); len(got) != 0 {
		t.Fatalf("a listener that did not ask got %v", got)
	}
}

// Flow 9: Drain fails readiness, ends streams with ErrDrain and listen
// streams with their result, and waits for running requests.
func TestNodeDrain(t *testing.T) {
	_, nodes := startNodes(t, 1)
	n := nodes[0]
	if err := n.Ready(context.Background()); err != nil {
		t.Fatalf("ready before drain: %v", err)
	}
	connCtx, connCancel := context.WithCancelCause(context.Background())
	defer n.Local.AddConn("S1", &coordinator.Conn{ID: "c1", Cancel: connCancel})()
	l := &fakeListener{}
	defer n.Local.AddListener(l)()
	done := n.Local.AddInflight("S1", "n:1", func() {})
	drained := make(chan struct{})
	go func() {
		n.Drain(context.Background())
		close(drained)
	}()
	waitFor(t, "draining", n.Draining)
	if err := n.Ready(context.Background()); err == nil {
		t.Fatal("ready while draining")
	}
	waitFor(t, "the stream to end", func() bool { return connCtx.Err() != nil })
	if !errors.Is(context.Cause(connCtx), coordinator.ErrDrain) {
		t.Fatalf("stream ended with %v", context.Cause(connCtx))
	}
	if _, ended := l.snapshot(); len(ended) != 1 || ended[0] {
		t.Fatalf("listen stream ends: %v (want one, with its result)", ended)
	}
	select {
	case <-drained:
		t.Fatal("Drain returned while a request ran")
	case <-time.After(50 * time.Millisecond):
	}
	done()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the last request ended")
	}
}

// A take-over message ends the local GET connection only when it lost
// the claim, so a stale message does not end the current holder.
func TestNodeTakeoverHonoursTheClaim(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	oldCtx, oldCancel := context.WithCancelCause(context.Background())
	old := &coordinator.Conn{ID: "old", Cancel: oldCancel, GetFor: "S1"}
	defer b.Local.AddConn("S1", old)()
	// A stale take-over while "old" still holds the claim: nothing ends.
	if _, err := b.TakeGet(oldCtx, "S1", old); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, coordinator.GetTakeover{Session: "S1", Conn: "stale"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if oldCtx.Err() != nil {
		t.Fatal("a stale take-over ended the holder")
	}
	if err := be.Claims.Release(ctx, coordinator.GetKey("S1"), "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Claims.Claim(ctx, coordinator.GetKey("S1"), "new", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, coordinator.GetTakeover{Session: "S1", Conn: "new"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old holder to end", func() bool { return oldCtx.Err() != nil })
	if !errors.Is(context.Cause(oldCtx), coordinator.ErrTakenOver) {
		t.Fatalf("ended with %v", context.Cause(oldCtx))
	}
}

// A GET connection is registered on its node before it claims the
// stream; a take-over message still on its way to that node then (the
// previous holder's, delivered late) must not end it: it claims after
// that holder, so the claim will be its own. Only a connection that
// claimed the stream and lost the claim ends.
func TestNodeTakeoverSparesAConnectionNotYetClaiming(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	conn := func(n testNode, id string) (*coordinator.Conn, context.Context) {
		cctx, cancel := context.WithCancelCause(context.Background())
		c := &coordinator.Conn{ID: id, Cancel: cancel, GetFor: "S1"}
		t.Cleanup(n.Local.AddConn("S1", c))
		return c, cctx
	}
	take := func(n testNode, c *coordinator.Conn, cctx context.Context) {
		t.Helper()
		if _, err := n.TakeGet(cctx, "S1", c); err != nil {
			t.Fatalf("TakeGet %s: %v", c.ID, err)
		}
	}
	// "lost" holds the stream on b; "new", on b too, is set up and has
	// yet to claim when "old" takes the stream over on a.
	lost, lostCtx := conn(b, "lost")
	take(b, lost, lostCtx)
	newConn, newCtx := conn(b, "new")
	old, oldCtx := conn(a, "old")
	take(a, old, oldCtx)
	waitFor(t, "the take-over by old to end lost", func() bool { return lostCtx.Err() != nil })
	if cause := context.Cause(newCtx); cause != nil {
		t.Fatalf("a connection that had not claimed the stream yet was ended by an earlier take-over: %v", cause)
	}
	take(b, newConn, newCtx)
	waitFor(t, "the take-over by new to end old", func() bool { return oldCtx.Err() != nil })
	if !errors.Is(context.Cause(oldCtx), coordinator.ErrTakenOver) {
		t.Fatalf("old ended with %v", context.Cause(oldCtx))
	}
	if newCtx.Err() != nil {
		t.Fatalf("the holder ended: %v", context.Cause(newCtx))
	}
}

// A payload on the broadcast topic that is not a message is logged (and
// counted), never handled.
func TestNodeLogsUndecodableBusPayloads(t *testing.T) {
	be, nodes := startNodes(t, 1)
	if _, err := be.Bus.Publish(context.Background(), coordinator.TopicAll, []byte(`{"t":"end"}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log line", func() bool { return strings.Contains(nodes[0].log.String(), "bus message skipped") })
	rec := httptest.NewRecorder()
	nodes[0].metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `mcp_bus_undecodable_total{node="a"} 1`) {
		t.Fatalf("undecodable payload not counted:\n%s", rec.Body.String())
	}
}

// Flows 3 and 7: a request sent on a session's GET stream from one node
// is answered by a reply that lands on another; a reply of another
// session never reaches it; with no GET stream open it fails at once.
func TestNodeRequestOnGetAnsweredThroughAnotherNode(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	sid := newSession(t, a.sessions)
	if _, err := a.RequestOnGet(ctx, sid, "", "ping", nil, time.Second); !errors.Is(err, coordinator.ErrNoGetStream) {
		t.Fatalf("no GET stream: %v", err)
	}
	stream := coordinator.GetStreamID(sid)
	if err := be.Events.Open(ctx, stream, cluster.StreamMeta{Session: sid}, cluster.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Claims.Claim(ctx, coordinator.GetKey(sid), "conn1", time.Minute); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.RequestOnGet(ctx, sid, "", "ping", nil, 5*time.Second)
		done <- result{res, err}
	}()
	var req *jsonrpc.Message
	waitFor(t, "the request on the GET stream", func() bool {
		evs, _, err := be.Events.Read(ctx, sid, stream, 0)
		if err != nil || len(evs) == 0 {
			return false
		}
		req, err = jsonrpc.Decode(evs[0].Data)
		return err == nil
	})
	reply := &jsonrpc.Message{ID: req.ID, Result: []byte(`{"pong":1}`)}
	forged := &jsonrpc.Message{ID: req.ID, Result: []byte(`{"forged":1}`)}
	if err := b.RouteReply(ctx, "another session", "", forged); err != nil {
		t.Fatalf("reply on another session: %v", err)
	}
	if err := b.RouteReply(ctx, sid, "", reply); err != nil {
		t.Fatalf("reply: %v", err)
	}
	select {
	case r := <-done:
		if r.err != nil || string(r.res) != `{"pong":1}` {
			t.Fatalf("RequestOnGet = %s, %v", r.res, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not wake")
	}
}

// Go may race Close (a final recorded late as the handler shuts down):
// work started after Close still runs, on the ended context, and nothing
// is left running. Under -race this failed with a WaitGroup misuse.
func TestNodeGoRacesClose(t *testing.T) {
	for range 20 {
		_, nodes := startNodes(t, 1)
		n := nodes[0]
		var ran sync.WaitGroup
		var ended atomic.Int32
		start := make(chan struct{})
		for range 8 {
			ran.Add(1)
			go func() {
				<-start
				n.Go(func(ctx context.Context) {
					defer ran.Done()
					<-ctx.Done()
					ended.Add(1)
				})
			}()
		}
		close(start)
		n.Close(errors.New("closed"))
		ran.Wait()
		if got := ended.Load(); got != 8 {
			t.Fatalf("ended %d of 8 background tasks", got)
		}
	}
}
