package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// A lost node's idempotent task, swept by b while c's readers reap it and
// c sweeps too: the store's conditioned update lets exactly one of them
// take it over, so it runs again exactly once; the runner's index entry
// is dropped once the task moved.
func TestTaskSweepTakesOverOnce(t *testing.T) {
	be, nodes := startNodes(t, 3)
	sweepTakesOverOnce(t, be, nodes)
}

// The same on a Redis Cluster of three shards, where the run's claim is
// in another slot than the task's record: the take-over's claim goes
// first, on the condition that the holder found gone still has it.
func TestTaskSweepOnClusterTakesOverOnce(t *testing.T) {
	srvs := redistest.StartCluster(t, 3)
	opts, err := redis.ParseURL("redis-cluster://" + srvs[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	be := redisBackend(t, goredis.NewUniversalClient(opts), redis.Options{Prefix: "sweep"})
	sweepTakesOverOnce(t, be, startNodesOn(t, be, []string{"inc", "inc", "inc"}, 0))
}

func sweepTakesOverOnce(t *testing.T, be *cluster.Backend, nodes []testNode) {
	a, b, c := nodes[0], nodes[1], nodes[2]
	var runs atomic.Int32
	resolve := coordinator.TaskOptions{Resolve: func(rec cluster.Task) coordinator.TaskFunc {
		return func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
			runs.Add(1)
			time.Sleep(50 * time.Millisecond)
			return json.RawMessage(`"again"`), nil
		}
	}}
	b.Tasks.Configure(resolve)
	c.Tasks.Configure(resolve)
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(true), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-ctx.Done()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dead := a.Instance()
	a.Close(errors.New("killed"))
	a.Leave()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, race := range []func(){
		func() { _, _ = b.SweepTasks(ctx) },
		func() { _, _ = c.SweepTasks(ctx) },
		func() { _, _ = c.Tasks.Get(ctx, rec.ID) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				race()
				if r, err := be.Tasks.Get(ctx, rec.ID); err == nil && terminal(r) {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	r, err := be.Tasks.Get(t.Context(), rec.ID)
	if err != nil || r.Status != cluster.TaskCompleted || r.Attempt != 2 {
		t.Fatalf("got %+v, %v; want completed by attempt 2", r, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("taken over %d times, want once", n)
	}
	// One sweep of the dead runner per LeaseTTL/3 (1 s here) drops its
	// entry of the moved task.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := b.SweepTasks(t.Context()); err != nil {
			t.Fatal(err)
		}
		ids, err := be.Tasks.RunnerTasks(t.Context(), dead, 0)
		if err == nil && len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead runner's index: %v, %v; want it empty", ids, err)
		}
	}
}

// A drained node's hand-over releases the run's hold with the change,
// so another node takes the task over although the handler ignores its
// cancellation and has not returned; the hand-over sends no release of
// its own.
func TestTaskHandOverReleasesTheHold(t *testing.T) {
	counter := &releaseCounter{}
	_, nodes := startNodesAs(t, []string{"inc", "inc"}, 0, func(be *cluster.Backend) {
		counter.Claims = be.Claims
		be.Claims = counter
	})
	a, b := nodes[0], nodes[1]
	b.Tasks.Configure(coordinator.TaskOptions{Resolve: func(rec cluster.Task) coordinator.TaskFunc {
		return func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`"on b"`), nil
		}
	}})
	stuck := make(chan struct{})
	defer close(stuck)
	rec, err := a.Tasks.Start(t.Context(), newTaskRecord(true), 0, func(ctx context.Context, run *coordinator.TaskRun) (json.RawMessage, *jsonrpc.Error) {
		<-stuck
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	a.Drain(ctx)
	if n := counter.n.Load(); n != 0 {
		t.Errorf("%d claim releases by the hand-over, want 0 (the change releases the hold)", n)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	r, err := b.Tasks.Wait(wctx, rec.ID, 10*time.Millisecond, terminal)
	if err != nil || r.Status != cluster.TaskCompleted || string(r.Result) != `"on b"` || r.Attempt != 2 {
		t.Fatalf("after the hand-over: %q %s attempt %d, %v", r.Status, r.Result, r.Attempt, err)
	}
}
