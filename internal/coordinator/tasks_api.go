package coordinator

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Task is a task's record, as the node reads and writes it.
type Task = cluster.Task

// Tasks runs tasks on the node and reads and changes their records
// (tasks.go: the runs, take-overs and waits; tasks_sweep.go: the reaping
// of tasks whose runner died).
type Tasks struct{ n *Node }

// Configure sets the task options; call it before tasks run.
func (t *Tasks) Configure(o TaskOptions) { t.n.configureTasks(o) }

// Start records rec (status working, run by this process, attempt 1; a
// new id when rec has none) and runs f in the background. It returns
// once the record is durable. max bounds the live tasks of rec.OwnerKey
// (TaskOptions.MaxPerOwner when 0).
func (t *Tasks) Start(ctx context.Context, rec Task, max int, f TaskFunc) (Task, error) {
	if rec.ID == "" {
		rec.ID = NewTaskID()
	}
	if max <= 0 {
		max = t.n.tasks.options().MaxPerOwner
	}
	return t.n.startTask(ctx, rec, max, f)
}

// Get returns a task's record, after reaping it if its runner is gone.
func (t *Tasks) Get(ctx context.Context, id string) (Task, error) { return t.n.getTask(ctx, id) }

// List returns a page of the live tasks of ownerKey that owner may see,
// from cursor, and the cursor of the next page ("" at the end).
func (t *Tasks) List(ctx context.Context, ownerKey, owner, cursor string, limit int) ([]Task, string, error) {
	return t.n.listTasks(ctx, ownerKey, owner, cursor, limit)
}

// Cancel moves a live task to cancelled and tells its runner.
func (t *Tasks) Cancel(ctx context.Context, id string) (Task, error) { return t.n.cancelTask(ctx, id) }

// Respond delivers input responses to a task and wakes its runner.
func (t *Tasks) Respond(ctx context.Context, id string, responses map[string][]byte) (Task, error) {
	return t.n.respondTask(ctx, id, responses)
}

// Wait returns the task's record once done(record) holds, looking at
// least every poll.
func (t *Tasks) Wait(ctx context.Context, id string, poll time.Duration, done func(Task) bool) (Task, error) {
	return t.n.waitTaskDone(ctx, id, poll, done)
}
