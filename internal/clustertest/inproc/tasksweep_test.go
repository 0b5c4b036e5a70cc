package inproc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
)

// storeStatus reads the task's record from the shared store (no node
// reaps it on this read) until it is terminal, and returns it.
func storeStatus(t *testing.T, b *cluster.Backend, id string, within time.Duration) cluster.Task {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, err := b.Tasks.Get(context.Background(), id)
		if err == nil && cluster.TaskTerminal(rec.Status) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: status %q runner %q, %v; want terminal within %v", id, rec.Status, rec.Runner, err, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A killed node's tasks end although no client reads them: the sweep of
// a live node fails the non-idempotent one and runs the idempotent one
// again, within about the lease time.
func TestTaskSweptWithoutReaders(t *testing.T) {
	r := newTaskRig(t)
	cl := mcptest.New(t)
	lost := r.start(t, cl, 0, "work")
	expect(t, r.started, "n0", "work start")
	redo := r.start(t, cl, 0, "redo")
	expect(t, r.started, "n0", "redo start")
	r.Nodes[0].Kill()
	killed := time.Now()
	bound := 2*inproc.DefaultLeaseTTL + time.Second
	failed := storeStatus(t, r.Backend, lost, 3*inproc.DefaultLeaseTTL)
	if failed.Status != cluster.TaskFailed || !strings.Contains(string(failed.Error), "stopped") {
		t.Fatalf("non-idempotent task: %s %q error %s, want failed with the node-lost error", failed.Status, failed.Message, failed.Error)
	}
	done := storeStatus(t, r.Backend, redo, 3*inproc.DefaultLeaseTTL)
	if done.Status != cluster.TaskCompleted || done.Attempt != 2 || !strings.Contains(string(done.Result), "redone on n") {
		t.Fatalf("idempotent task: %s attempt %d result %s, want completed by attempt 2 on a live node", done.Status, done.Attempt, done.Result)
	}
	for _, rec := range []cluster.Task{failed, done} {
		if d := rec.Updated.Sub(killed); d > bound {
			t.Fatalf("task %s ended %v after the kill, want within %v", rec.ID, d, bound)
		}
	}
}
