package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Flow 5: a stream whose producing process holds no membership lease is
// ended with a node-lost error for its request; one whose producer is
// alive and holds it is left alone.
func TestNodeOwnerLostEndsTheStream(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	w := heldStream(t, be, a)
	sid, id := w.Session, jsonrpc.StringID("r1")
	if b.OwnerLost(ctx, w) {
		t.Fatal("a held stream of a live node was taken for lost")
	}
	a.Leave() // as if its lease lapsed
	if !b.OwnerLost(ctx, w) {
		t.Fatal("the stream of a gone node was not ended")
	}
	evs, info, err := be.Events.Read(ctx, sid, "stream1", 0)
	if err != nil || !info.Done || len(evs) != 1 {
		t.Fatalf("history after node loss: %d events, done %v, %v", len(evs), info.Done, err)
	}
	msg, err := jsonrpc.Decode(evs[0].Data)
	if err != nil || msg.Error == nil || msg.Error.Code != jsonrpc.CodeNodeLost || msg.ID.Key() != id.Key() {
		t.Fatalf("final event %s (%v)", evs[0].Data, err)
	}
}

// A stream's chores end it when it loses its claim (taken over by a
// connection on another node) or its session (ended).
func TestNodeUpkeepEndsStreams(t *testing.T) {
	be, nodes := startNodes(t, 2)
	n := nodes[0]
	ctx := context.Background()

	sid := newSession(t, n.sessions)
	take := func(n *coordinator.Node) (context.Context, *coordinator.Conn) {
		connCtx, cancel := context.WithCancelCause(ctx)
		t.Cleanup(func() { cancel(nil) })
		conn := &coordinator.Conn{ID: n.NewConnID(), Cancel: cancel, GetFor: sid}
		t.Cleanup(n.Local.AddConn(sid, conn))
		if _, err := n.TakeGet(connCtx, sid, conn); err != nil {
			t.Fatal(err)
		}
		go n.RunUpkeep(connCtx, coordinator.Upkeep{Conn: conn, Claim: coordinator.GetKey(sid)})
		return connCtx, conn
	}
	connCtx, _ := take(n.Node)
	_, newer := take(nodes[1].Node)
	waitFor(t, "the stream to lose its claim", func() bool { return connCtx.Err() != nil })
	if !errors.Is(context.Cause(connCtx), coordinator.ErrTakenOver) {
		t.Fatalf("ended with %v", context.Cause(connCtx))
	}
	if h, err := be.Claims.Holder(ctx, coordinator.GetKey(sid)); err != nil || h != newer.ID {
		t.Fatalf("holder %q, %v; want the newer connection %q", h, err, newer.ID)
	}

	sid = newSession(t, n.sessions)
	connCtx, cancel := context.WithCancelCause(ctx)
	conn := &coordinator.Conn{ID: "c2", Cancel: cancel}
	go n.RunUpkeep(connCtx, coordinator.Upkeep{Conn: conn, Session: sid})
	if _, _, err := n.sessions.End(ctx, sid, "", nil, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream of an ended session to end", func() bool { return connCtx.Err() != nil })
	if !errors.Is(context.Cause(connCtx), coordinator.ErrSessionEnded) {
		t.Fatalf("ended with %v", context.Cause(connCtx))
	}

}

// A final response the store refused is recorded by RecordLater, and a
// drain waits for it like for a running request.
func TestNodeRecordLater(t *testing.T) {
	be, nodes := startNodes(t, 1)
	n := nodes[0]
	ctx := context.Background()
	sid := newSession(t, n.sessions)
	unhold, err := n.OpenStream(ctx, sid, "s1", "s:r1")
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	n.RecordLater(sid, "s1", []byte(`{"jsonrpc":"2.0","id":"r1","result":{}}`), func() { unhold(); close(released) }, 5*time.Second)
	if n.Local.Running() != 1 {
		t.Fatalf("running = %d, want the recording counted", n.Local.Running())
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the recording did not finish")
	}
	evs, info, err := be.Events.Read(ctx, sid, "s1", 0)
	if err != nil || !info.Done || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"r1"`) {
		t.Fatalf("history: %d events, done %v, %v", len(evs), info.Done, err)
	}
}

// A producer that stops without recording its stream's final ends the
// stream itself with -31003; one that recorded it adds nothing.
func TestNodeUnholdWithoutFinalAbandons(t *testing.T) {
	be, nodes := startNodes(t, 1)
	n := nodes[0]
	ctx := context.Background()
	sid := newSession(t, n.sessions)
	id := jsonrpc.StringID("r1")
	unhold, err := n.OpenStream(ctx, sid, "done", id.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Record(ctx, sid, "done", []byte(`{"jsonrpc":"2.0","id":"r1","result":{}}`), true); err != nil {
		t.Fatal(err)
	}
	unhold()
	unhold, err = n.OpenStream(ctx, sid, "dropped", id.Key())
	if err != nil {
		t.Fatal(err)
	}
	unhold()
	waitFor(t, "the dropped stream to end", func() bool {
		_, info, err := be.Events.Read(ctx, sid, "dropped", 0)
		return err == nil && info.Done
	})
	evs, _, _ := be.Events.Read(ctx, sid, "dropped", 0)
	msg, err := jsonrpc.Decode(evs[len(evs)-1].Data)
	if err != nil || msg.Error == nil || msg.Error.Code != jsonrpc.CodeNodeLost || msg.ID.Key() != id.Key() {
		t.Fatalf("final of the dropped stream: %s (%v)", evs[len(evs)-1].Data, err)
	}
	if evs, info, err := be.Events.Read(ctx, sid, "done", 0); err != nil || len(evs) != 1 || !info.Done {
		t.Fatalf("stream with its final: %d events, %+v, %v", len(evs), info, err)
	}
}

// A connection's claim is held only while its process holds its
// membership lease: once the lease is gone, nobody holds the session's
// GET stream, although the claim's key is still there.
func TestNodeClaimLapsesWithItsNodesLease(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	sid := newSession(t, a.sessions)
	connCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conn := &coordinator.Conn{ID: a.NewConnID(), Cancel: cancel, GetFor: sid}
	if _, err := a.TakeGet(connCtx, sid, conn); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := b.RequestOnGet(rctx, sid, "", "ping", nil, time.Second)
	rcancel()
	if errors.Is(err, coordinator.ErrNoGetStream) {
		t.Fatal("the GET stream of a live node was taken for gone")
	}
	a.Close(errors.New("killed")) // no more heartbeats
	a.Leave()
	waitFor(t, "the claim to lapse with the lease", func() bool {
		_, err := b.RequestOnGet(ctx, sid, "", "ping", nil, time.Second)
		return errors.Is(err, coordinator.ErrNoGetStream)
	})
	if h, err := be.Claims.Holder(ctx, coordinator.GetKey(sid)); err != nil || h != conn.ID {
		t.Fatalf("claim key: holder %q, %v; want it kept until its safety TTL", h, err)
	}
}

// The membership key vanishes with every lease in it (Redis evicted it,
// or lost its data): until each node's next heartbeat every node looks
// lost. A node that misses its own lease judges no one then: a live
// producer's resumed stream is not ended, its claims not taken for
// free, and its tasks not swept.
func TestLeasesLostTogetherJudgeNoOne(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	w := heldStream(t, be, a)
	if _, err := a.Tasks.Start(ctx, newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-ctx.Done()
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Both leases go at once, as with the key that holds them.
	for _, n := range []testNode{a, b} {
		if err := be.Members.Leave(ctx, n.Instance()); err != nil {
			t.Fatal(err)
		}
	}
	if b.OwnerLost(ctx, w) {
		t.Error("a live producer's stream was ended while every lease was missing")
	}
	if n, err := b.SweepTasks(ctx); err != nil || n != 0 {
		t.Errorf("sweep while every lease was missing: %d reaped, %v; want none", n, err)
	}
	// Once b holds its lease again, a missing a is lost indeed.
	if err := be.Members.Heartbeat(ctx, b.Instance(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !b.OwnerLost(ctx, w) {
		t.Error("the stream of a producer without a lease, judged by a node with one, was not ended")
	}
}

// heldStream opens "stream1", the stream of request "r1" on a new
// session, produced by n until the test ends, and returns its watch.
func heldStream(t *testing.T, be *cluster.Backend, n testNode) *coordinator.OwnerWatch {
	t.Helper()
	ctx := context.Background()
	sid := newSession(t, n.sessions)
	unhold, err := n.OpenStream(ctx, sid, "stream1", jsonrpc.StringID("r1").Key())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unhold)
	_, info, err := be.Events.Read(ctx, sid, "stream1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &coordinator.OwnerWatch{Session: sid, Stream: "stream1", Info: info}
}
