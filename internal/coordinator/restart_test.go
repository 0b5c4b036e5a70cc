package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// A node killed mid-call and restarted with the same node id: the call's
// stream, resumed on another node, ends with -31003 as the new process
// joins (at the resuming node's next heartbeat, LeaseTTL/3), not when
// the killed process's lease lapses.
func TestRestartWithTheSameIdEndsThePredecessorsCalls(t *testing.T) {
	const leaseTTL = 6 * time.Second
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	start := func(id, inc string) *coordinator.Node {
		t.Helper()
		n := coordinator.NewNode(coordinator.Config{
			Backend: be, Waiters: coordinator.New(id, inc, be.Bus, 0),
			Sessions: session.NewStore(be.Sessions, session.Options{TTL: time.Minute}),
			LeaseTTL: leaseTTL, SessionTTL: time.Minute, HistoryTTL: time.Minute, Log: zerolog.Nop(),
		})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(errors.New("closed")); n.Leave() })
		return n
	}
	a, b := start("a", "one"), start("b", "one")
	ctx := context.Background()
	sid := newSession(t, b.Sessions)
	id := jsonrpc.StringID("call-1")
	post := a.OpenPost(sid, "s1", id.Key(), nil, func() {})
	done, _ := post.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`), false, func(uint64, error) {})
	<-done

	sink := newSink()
	served := make(chan error, 1)
	go func() { served <- b.Resume(ctx, coordinator.StreamOpen{Session: sid}, "s1", 0, sink) }()
	sink.waitEvents(t, 1)

	a.Close(errors.New("killed")) // kill -9: no Leave, its lease runs on
	killed := time.Now()
	start("a", "two")
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(leaseTTL):
		t.Fatal("the resumed stream did not end within the killed process's lease")
	}
	took := time.Since(killed)
	got := sink.events()
	msg, err := jsonrpc.Decode([]byte(got[len(got)-1].data))
	if err != nil || msg.Error == nil || msg.Error.Code != jsonrpc.CodeNodeLost {
		t.Fatalf("the stream ended with %s (%v), want -31003", got[len(got)-1].data, err)
	}
	// The killed process's lease was renewed at most LeaseTTL/3 before
	// the kill, so it lapses at least 2/3 of LeaseTTL after it.
	if limit := leaseTTL / 2; took > limit {
		t.Fatalf("the stream ended %v after the kill, want within %v (the resuming node's heartbeat), before the lease lapses", took, limit)
	}
	t.Logf("ended with -31003 %v after the kill (lease %v)", took.Round(time.Millisecond), leaseTTL)
}
