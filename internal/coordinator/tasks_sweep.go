package coordinator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// The task sweep: a dead process's tasks end (failed, or taken over when
// idempotent) within about LeaseTTL of its death even when no client
// reads them. Every LeaseTTL/3 each node lists the runners of the run
// index (cluster.TaskStore.Runners); for a runner that holds no
// membership lease (or "", the runner of a handed-over task), one node
// wins the sweep of that runner for the period (a Claims.Once key) and
// reaps up to SweepBatch of its tasks (Reap: the store's conditioned
// update lets only one node fail or take over a task, so a second
// sweeper or a reader racing it only rereads). Index entries of tasks
// that ended, moved or expired are dropped.

// DefaultTaskSweepBatch is TaskOptions.SweepBatch's default.
const DefaultTaskSweepBatch = 100

// sweepRunners bounds the runners one sweep looks at.
const sweepRunners = 1000

func sweepKey(runner string) string { return "tasksweep:" + runner }

// sweepTasks runs SweepTasks every LeaseTTL/3 until ctx ends.
func (n *Node) sweepTasks(ctx context.Context) {
	t := time.NewTicker(n.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := n.sweepOnce(ctx); err != nil && ctx.Err() == nil {
			n.log.Debug().Err(err).Msg("task sweep")
		}
	}
}

// sweepOnce reaps the tasks of runners without a membership lease, up
// to SweepBatch tasks, and returns how many it reaped.
func (n *Node) sweepOnce(ctx context.Context) (int, error) {
	if n.draining.Load() {
		return 0, nil
	}
	runners, err := n.be.Tasks.Runners(ctx, sweepRunners)
	if err != nil || len(runners) == 0 {
		return 0, err
	}
	live, err := n.be.Members.Members(ctx)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(live, n.instance) {
		return 0, nil // the leases vanished together: see trustMembers
	}
	budget := n.tasks.options().SweepBatch
	if budget <= 0 {
		budget = DefaultTaskSweepBatch
	}
	reaped := 0
	for _, r := range runners {
		if budget <= 0 {
			break
		}
		if r == n.instance || slices.Contains(live, r) {
			continue
		}
		if first, err := n.be.Claims.Once(ctx, sweepKey(r), n.leaseTTL/3); err != nil || !first {
			continue
		}
		ids, err := n.be.Tasks.RunnerTasks(ctx, r, budget)
		if err != nil {
			return reaped, err
		}
		budget -= len(ids)
		var gone []string
		for _, id := range ids {
			t, err := n.be.Tasks.Get(ctx, id)
			if errors.Is(err, cluster.ErrNotFound) {
				gone = append(gone, id)
				continue
			}
			if err != nil {
				return reaped, err
			}
			if !cluster.TaskTerminal(t.Status) && t.Runner == r {
				if t, err = n.reapTask(ctx, t); err != nil {
					return reaped, err
				}
				if t.Runner == r && !cluster.TaskTerminal(t.Status) {
					continue // its hold has not lapsed yet
				}
				reaped++
			}
			gone = append(gone, id)
		}
		if len(gone) > 0 {
			if err := n.be.Tasks.Unindex(ctx, r, gone); err != nil {
				return reaped, err
			}
		}
	}
	return reaped, nil
}
