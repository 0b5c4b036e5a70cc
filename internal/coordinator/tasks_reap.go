package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Reading a task: the record from this node's copy of an ended task or
// from the store, and the reap of a live task whose runner is gone.

// getTask returns a task's record, after reaping it if its runner is
// gone (see Reap).
func (n *Node) getTask(ctx context.Context, id string) (cluster.Task, error) {
	if t, ok := n.tasks.done.Load().get(id, time.Now()); ok {
		return t, nil
	}
	t, err := n.be.Tasks.Get(ctx, id)
	if err != nil {
		return t, err
	}
	t, err = n.reapTask(ctx, t)
	if err == nil {
		n.tasks.done.Load().put(t, time.Now())
	}
	return t, err
}

// reapTask checks a live task's runner: when its hold is gone (its process
// died, or its run ended without recording an outcome) or nobody runs it,
// the task is taken over here (idempotent, attempts left, and
// this node can run it) or failed. It returns the record after that.
func (n *Node) reapTask(ctx context.Context, t cluster.Task) (cluster.Task, error) {
	if cluster.TaskTerminal(t.Status) || t.Runner == n.instance && n.runsHere(t.ID) {
		return t, nil
	}
	// The run's hold lives as long as its process's membership lease,
	// and ends at once when the run let go of it (also when it handed
	// the task over, runner ""). A take-over takes it before or as the
	// record names its new runner.
	gone, live, err := n.claimHolder(ctx, taskKey(t.ID))
	if err != nil || live {
		return t, nil
	}
	opts := n.tasks.options()
	var f TaskFunc
	if t.Idempotent && t.Attempt < opts.MaxAttempts && opts.Resolve != nil && !n.draining.Load() {
		f = opts.Resolve(t)
	}
	if f != nil {
		// The hold is taken with the change, by the one reaper whose
		// change applies: one that lost holds nothing and lets go of
		// nothing.
		me := n.instance
		hold := n.holdTask(t.ID)
		rec, err := n.changeTask(ctx, t.ID, cluster.TaskUpdate{IfRunner: t.Runner, SetRunner: &me, NextAttempt: true,
			ClearInputs: true, Status: cluster.TaskWorking, Message: fmt.Sprintf("attempt %d, taken over from a lost node", t.Attempt+1),
			Take: &hold.claim, TakeFrom: gone})
		if err != nil {
			if !taskRefused(err) {
				hold.release() // the store may have taken it
			}
			return n.reread(ctx, t, err)
		}
		hold.taken()
		n.run(rec, f, hold)
		n.told(rec)
		return rec, nil
	}
	msg := "the node running this task stopped"
	if t.Idempotent && t.Attempt >= opts.MaxAttempts {
		msg = fmt.Sprintf("the node running this task stopped after %d attempts", t.Attempt)
	}
	e, _ := json.Marshal(jsonrpc.NewError(jsonrpc.CodeNodeLost, msg, map[string]any{"node": NodeOf(t.Runner), "attempt": t.Attempt}))
	rec, err := n.changeTask(ctx, t.ID, cluster.TaskUpdate{IfRunner: t.Runner, Status: cluster.TaskFailed, Message: msg, Error: e})
	if err != nil {
		return n.reread(ctx, t, err)
	}
	n.told(rec)
	return rec, nil
}

// reread answers a reap that lost a race: someone else changed the task.
func (n *Node) reread(ctx context.Context, t cluster.Task, err error) (cluster.Task, error) {
	if errors.Is(err, cluster.ErrTaskRunner) || errors.Is(err, cluster.ErrTaskFinal) {
		return n.be.Tasks.Get(ctx, t.ID)
	}
	return t, err
}

// taskRefused reports an update the store refused, which changed
// nothing and took no claim (cluster.TaskUpdate.Take).
func taskRefused(err error) bool {
	return errors.Is(err, cluster.ErrTaskRunner) || errors.Is(err, cluster.ErrTaskFinal) ||
		errors.Is(err, cluster.ErrNotFound) || errors.Is(err, cluster.ErrTaskKey)
}

func (n *Node) runsHere(id string) bool {
	n.tasks.mu.Lock()
	defer n.tasks.mu.Unlock()
	return n.tasks.running[id] != nil
}
