package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Two processes of one node id (a restart) on one bus: each mints ids
// that name its incarnation, a reply is routed to the process that sent
// the request, and a reply to a process that no longer listens is
// reported undelivered instead of being taken for delivered.
func TestRepliesReachTheIncarnationThatAsked(t *testing.T) {
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	start := func(inc string) (*coordinator.Coordinator, func()) {
		c := coordinator.New("node1", inc, be.Bus, 0)
		stop, err := c.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, stop
	}
	old, stopOld := start("old")
	oldID := old.NewID()
	if _, err := old.Register("s", "", oldID, ""); err != nil {
		t.Fatal(err)
	}
	stopOld() // the old process is gone
	cur, stopCur := start("new")
	defer stopCur()
	curID := cur.NewID()
	if oldID == curID {
		t.Fatalf("both processes minted %v", oldID)
	}
	w, err := cur.Register("s", "", curID, "")
	if err != nil {
		t.Fatal(err)
	}
	if owner, _ := coordinator.Owner(curID); owner != cur.Instance() || owner != "node1.new" {
		t.Fatalf("Owner(%v) = %q, want %q", curID, owner, cur.Instance())
	}

	// A third process receives the client's replies.
	relay := coordinator.New("node2", "x", be.Bus, 0)
	staleReply := &jsonrpc.Message{ID: oldID, Result: []byte(`"stale"`)}
	if _, err := relay.Resolve(ctx, "s", "", staleReply); !errors.Is(err, coordinator.ErrUndelivered) {
		t.Fatalf("reply to the stopped process: got %v, want ErrUndelivered", err)
	}
	// The stale reply reached nobody: the new process's waiter is untouched.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	waitCh := make(chan []byte, 1)
	go func() {
		res, _ := w.Wait(context.Background())
		waitCh <- res
	}()
	<-wctx.Done()
	if len(waitCh) != 0 {
		t.Fatalf("the new process's waiter woke on a reply to the old one")
	}
	if ok, err := relay.Resolve(ctx, "s", "", &jsonrpc.Message{ID: curID, Result: []byte(`"fresh"`)}); err != nil || !ok {
		t.Fatalf("reply to the running process: got %v, %v", ok, err)
	}
	select {
	case res := <-waitCh:
		if string(res) != `"fresh"` {
			t.Fatalf("got %s, want the fresh reply", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter did not wake")
	}
}
