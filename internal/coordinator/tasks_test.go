package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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

func newTaskRecord(idempotent bool) cluster.Task {
	return cluster.Task{ID: coordinator.NewTaskID(), OwnerKey: "client", TTL: time.Minute,
		PollInterval: time.Hour, Method: "tools/call", Params: []byte(`{}`), Idempotent: idempotent}
}

func terminal(t cluster.Task) bool { return cluster.TaskTerminal(t.Status) }

// A task started on a completes while b waits for it: the bus wakes b at
// once (its poll interval is an hour).
func TestTaskResultWakesWaiterOnAnotherNode(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	release := make(chan struct{})
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-release
		return json.RawMessage(`{"ok":true}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != cluster.TaskWorking || rec.Runner != a.Instance() || rec.Attempt != 1 {
		t.Fatalf("created: %+v", rec)
	}
	got := make(chan cluster.Task, 1)
	go func() {
		r, err := b.Tasks.Wait(context.Background(), rec.ID, time.Hour, terminal)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	select {
	case r := <-got:
		if r.Status != cluster.TaskCompleted || string(r.Result) != `{"ok":true}` {
			t.Fatalf("waiter got %q %s", r.Status, r.Result)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter on b was not woken")
	}
}

// A cancel through b reaches the handler running on a.
func TestTaskCancelReachesHandler(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	stopped := make(chan struct{})
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-ctx.Done()
		close(stopped)
		return nil, jsonrpc.NewError(jsonrpc.CodeCancelled, "cancelled", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tasks.Cancel(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	r, err := b.Tasks.Get(t.Context(), rec.ID)
	if err != nil || r.Status != cluster.TaskCancelled {
		t.Fatalf("after cancel: %q, %v", r.Status, err)
	}
	// Cancelling a terminal task leaves it as it is.
	if r, err := b.Tasks.Cancel(t.Context(), rec.ID); err != nil || r.Status != cluster.TaskCancelled {
		t.Fatalf("second cancel: %q, %v", r.Status, err)
	}
}

// Input asked by the handler on a is answered through c.
func TestTaskInputAnsweredThroughAnotherNode(t *testing.T) {
	_, nodes := startNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		resp, err := run.Input(ctx, []byte(`{"method":"elicitation/create"}`))
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, err.Error(), nil)
		}
		return resp, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Tasks.Wait(t.Context(), rec.ID, 10*time.Millisecond, func(t cluster.Task) bool { return t.Status != cluster.TaskWorking })
	if err != nil || r.Status != cluster.TaskInputRequired || len(r.Inputs) != 1 {
		t.Fatalf("waiting for input: %+v, %v", r, err)
	}
	responses := map[string][]byte{}
	for k := range r.Inputs {
		responses[k] = []byte(`{"action":"accept"}`)
	}
	if _, err := c.Tasks.Respond(t.Context(), rec.ID, responses); err != nil {
		t.Fatal(err)
	}
	r, err = b.Tasks.Wait(t.Context(), rec.ID, time.Hour, terminal)
	if err != nil || r.Status != cluster.TaskCompleted || string(r.Result) != `{"action":"accept"}` {
		t.Fatalf("after the response: %q %s, %v", r.Status, r.Result, err)
	}
}

// A task whose node is gone fails (not idempotent) or runs again on the
// reader's node (idempotent), with the attempt counted.
func TestTaskNodeLost(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(map[bool]string{false: "fails", true: "taken over"}[idempotent], func(t *testing.T) {
			_, nodes := startNodes(t, 2)
			a, b := nodes[0], nodes[1]
			b.Tasks.Configure(coordinator.TaskOptions{Resolve: func(rec cluster.Task) coordinator.TaskFunc {
				return func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
					return json.RawMessage(`"again"`), nil
				}
			}})
			rec, err := a.Tasks.Start(t.Context(), newTaskRecord(idempotent), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
				<-ctx.Done()
				return json.RawMessage(`"first"`), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := b.Tasks.Get(t.Context(), rec.ID); r.Status != cluster.TaskWorking {
				t.Fatalf("while a runs it: %q", r.Status)
			}
			a.Close(errors.New("killed"))
			a.Leave()
			r, err := b.Tasks.Wait(t.Context(), rec.ID, 10*time.Millisecond, terminal)
			if err != nil {
				t.Fatal(err)
			}
			if !idempotent {
				var e jsonrpc.Error
				_ = json.Unmarshal(r.Error, &e)
				if r.Status != cluster.TaskFailed || e.Code != jsonrpc.CodeNodeLost {
					t.Fatalf("got %q %s, want failed with the node-lost code", r.Status, r.Error)
				}
				return
			}
			if r.Status != cluster.TaskCompleted || string(r.Result) != `"again"` || r.Attempt != 2 || r.Runner != b.Instance() ||
				!strings.Contains(r.Message, "attempt 2") {
				t.Fatalf("got %q %s attempt %d runner %q, want completed again on b", r.Status, r.Result, r.Attempt, r.Runner)
			}
		})
	}
}

// A result past the bound fails the task with a clear error.
func TestTaskResultBound(t *testing.T) {
	_, nodes := startNodes(t, 1)
	a := nodes[0]
	a.Tasks.Configure(coordinator.TaskOptions{MaxResultBytes: 8})
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`"far too long a result"`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Tasks.Wait(t.Context(), rec.ID, 10*time.Millisecond, terminal)
	if err != nil || r.Status != cluster.TaskFailed || len(r.Result) != 0 {
		t.Fatalf("got %q result %s, %v; want failed", r.Status, r.Result, err)
	}
}

// releaseCounter counts the claim releases a node sends.
type releaseCounter struct {
	cluster.Claims
	n atomic.Int64
}

func (c *releaseCounter) Release(ctx context.Context, key, owner string) error {
	c.n.Add(1)
	return c.Claims.Release(ctx, key, owner)
}

// A create refused at the owner's bound took no claim, and the node
// sends no release for it; a task that ran releases its claim with its
// outcome (in the update), not with a call of its own.
func TestTaskRefusedAtBoundReleasesNothing(t *testing.T) {
	counter := &releaseCounter{}
	_, nodes := startNodesAs(t, []string{"inc"}, 0, func(be *cluster.Backend) {
		counter.Claims = be.Claims
		be.Claims = counter
	})
	a := nodes[0]
	release := make(chan struct{})
	run := func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-release
		return json.RawMessage(`{}`), nil
	}
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 1, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 1, run); !errors.Is(err, cluster.ErrLimit) {
		t.Fatalf("second task of the owner at a bound of 1: %v, want ErrLimit", err)
	}
	if n := counter.n.Load(); n != 0 {
		t.Errorf("%d claim releases after a refused create, want 0", n)
	}
	close(release)
	if r, err := a.Tasks.Wait(t.Context(), rec.ID, 10*time.Millisecond, terminal); err != nil || r.Status != cluster.TaskCompleted {
		t.Fatalf("the first task: %q, %v", r.Status, err)
	}
	if n := counter.n.Load(); n != 0 {
		t.Errorf("%d claim releases after a task's outcome, want 0 (the update releases it)", n)
	}
}

// Drain waits for a running task, then hands an idempotent one over.
func TestTaskDrainHandsOver(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	b.Tasks.Configure(coordinator.TaskOptions{Resolve: func(rec cluster.Task) coordinator.TaskFunc {
		return func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`"on b"`), nil
		}
	}})
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(true), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-ctx.Done()
		return nil, jsonrpc.NewError(jsonrpc.CodeCancelled, "stopped", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	a.Drain(ctx)
	r, err := b.Tasks.Wait(t.Context(), rec.ID, 10*time.Millisecond, terminal)
	if err != nil || r.Status != cluster.TaskCompleted || string(r.Result) != `"on b"` || r.Attempt != 2 {
		t.Fatalf("after the drain: %q %s attempt %d, %v", r.Status, r.Result, r.Attempt, err)
	}
}

// With every bus message lost, waiters learn the outcome from the record
// (their poll) and a cancel still reaches the handler (the runner's
// watch).
func TestTaskLostBusMessages(t *testing.T) {
	var drop atomic.Bool
	a, b := faultNodes(t, func(op string) error {
		if op == "Bus.deliver" && drop.Load() {
			return errors.New("dropped")
		}
		return nil
	})
	drop.Store(true)
	release, stopped := make(chan struct{}), make(chan struct{})
	done, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-release
		return json.RawMessage(`1`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	r, err := b.Tasks.Wait(t.Context(), done.ID, 20*time.Millisecond, terminal)
	if err != nil || r.Status != cluster.TaskCompleted {
		t.Fatalf("waiter without the bus: %q, %v", r.Status, err)
	}
	cancelled, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-ctx.Done()
		close(stopped)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tasks.Cancel(t.Context(), cancelled.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel did not reach the handler without the bus")
	}
}

// A run that cannot record its outcome (the store fails past the finish
// timeout) lets go of the task: a reader fails it although its node
// lives, so it never hangs in working.
func TestTaskUnrecordedOutcomeIsReaped(t *testing.T) {
	var fail atomic.Bool
	a, b := faultNodes(t, func(op string) error {
		if op == "Tasks.Update" && fail.Load() {
			return cluster.ErrUnavailable
		}
		return nil
	})
	a.Tasks.Configure(coordinator.TaskOptions{FinishTimeout: 100 * time.Millisecond})
	finished := make(chan struct{})
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(false), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		fail.Store(true)
		defer close(finished)
		return json.RawMessage(`1`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-finished
	time.Sleep(200 * time.Millisecond) // past the finish timeout
	fail.Store(false)
	r, err := b.Tasks.Wait(t.Context(), rec.ID, 20*time.Millisecond, terminal)
	if err != nil || r.Status != cluster.TaskFailed {
		t.Fatalf("got %q, %v; want failed", r.Status, err)
	}
}

// faultNodes starts two nodes, a and b, with a short lease on a memory
// backend that consults fault before each operation.
func faultNodes(t *testing.T, fault func(op string) error) (a, b *coordinator.Node) {
	be := memory.New(memory.Options{Fault: fault})
	t.Cleanup(func() { _ = be.Close() })
	var nodes []*coordinator.Node
	for _, id := range []string{"a", "b"} {
		n := coordinator.NewNode(coordinator.Config{
			Backend: be, Waiters: coordinator.New(id, "inc", be.Bus, 0),
			Sessions: session.NewStore(be.Sessions, session.Options{TTL: time.Minute}),
			LeaseTTL: 300 * time.Millisecond, HistoryTTL: time.Minute, MaxFanOuts: 2,
			Log: zerolog.Nop(), Metrics: telemetry.NewMetrics(id),
		})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(errors.New("closed")); n.Leave() })
		nodes = append(nodes, n)
	}
	return nodes[0], nodes[1]
}
