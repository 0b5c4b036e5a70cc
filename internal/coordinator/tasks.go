package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Durable tasks (flow 10). The record lives in cluster.TaskStore, so any
// node answers for a task; the process that runs the handler is named in
// the record (Runner) and holds the task under its membership lease.
//
//   - Every change of a task is published as TaskChanged: it wakes the
//     waiters of the task on any node (WaitTask) and the runner (a cancel,
//     or input responses). A lost message is caught by polling the record
//     (waiters every poll interval, the runner every LeaseTTL/3).
//   - A reader that finds the run's hold gone (Reap, called by GetTask and
//     WaitTask; the hold is a claim that lives as long as the runner's
//     membership lease, see holdTask) fails the task with CodeNodeLost, or, for an
//     idempotent task under its attempt bound, takes it over: it becomes
//     the runner (conditioned on the dead runner, so only one reader wins)
//     and takes the run's hold with that change (cluster.TaskUpdate.Take,
//     so a reader that lost never touches it), and runs the request
//     again here.
//   - Drain waits for the running tasks, then hands the idempotent ones
//     over (their runner becomes "" and their hold is released with the
//     change, so readers treat them as gone).

// TaskFunc runs a task's request: run.Input asks the client for input
// (the task is input_required until the answer arrives through any
// node); ctx ends when the task is cancelled or the node closes. It
// returns the request's result, or the JSON-RPC error that fails the task
// (both: the task fails and keeps the result, as a 2025-11-25 tool
// result with isError does).
type TaskFunc func(ctx context.Context, run *TaskRun) (json.RawMessage, *jsonrpc.Error)

// TaskOptions configures the node's task runner.
type TaskOptions struct {
	// Resolve returns the function that runs a task's stored request on
	// this node (for a take-over); nil when it cannot run it here.
	Resolve func(t cluster.Task) TaskFunc
	// MaxAttempts bounds the runs of an idempotent task (DefaultTaskAttempts
	// when 0).
	MaxAttempts int
	// MaxResultBytes bounds a task's result or error (DefaultTaskResultBytes
	// when 0): a larger one fails the task.
	MaxResultBytes int
	// MaxWaiters bounds the WaitTask calls waiting on this node at once
	// (DefaultMaxWaiters when 0).
	MaxWaiters int
	// FinishTimeout bounds how long a run keeps trying to record its
	// outcome while the store fails (DefaultTaskFinishTimeout when 0);
	// past it the run lets go of the task, which readers then reap.
	FinishTimeout time.Duration
	// Changed, when set, is told of each change of a task this node
	// recorded (the record after it), in the background: it tells the
	// task's requestor (2025-11-25 notifications/tasks/status).
	Changed func(ctx context.Context, t cluster.Task)
	// MaxPerOwner bounds the live tasks of one owner key
	// (cluster.DefaultMaxTasks when 0; see Tasks.Start).
	MaxPerOwner int
	// SweepBatch bounds the tasks of dead runners one sweep reaps
	// (DefaultTaskSweepBatch when 0; see tasks_sweep.go).
	SweepBatch int
	// ListenMethod, when set, is the notification this node's listen
	// streams are told of when a task changes (with the task id as uri).
	ListenMethod string
	// CacheBytes bounds the records of terminal tasks this node keeps
	// (DefaultTaskCacheBytes when 0; negative keeps none): reading one
	// again here costs no round trip (see doneTasks).
	CacheBytes int
}

// Defaults of TaskOptions.
const (
	DefaultTaskAttempts    = 3
	DefaultTaskResultBytes = 1 << 20
	// DefaultTaskFinishTimeout is TaskOptions.FinishTimeout's default.
	DefaultTaskFinishTimeout = 30 * time.Second
)

// ErrTaskWaiters answers WaitTask when too many wait on this node.
var ErrTaskWaiters = errors.New("coordinator: too many task waiters")

// TaskChanged tells every node that a task's record changed.
type TaskChanged struct{ ID string }

func (m TaskChanged) wireForm() wire { return wire{T: "task", I: m.ID} }

// tasks is the node's runner state.
type tasks struct {
	opts TaskOptions

	done atomic.Pointer[doneTasks] // nil: none kept

	mu      sync.Mutex
	running map[string]*TaskRun                   // task id → run on this node
	waiters map[string]map[chan struct{}]struct{} // task id → WaitTask wake-ups
	nwait   int
}

// TaskRun is one run of a task on this node.
type TaskRun struct {
	n      *Node
	Task   cluster.Task // the record when the run started
	cancel context.CancelFunc
	wake   chan struct{}
	hold   *claimHold // the run's hold, released with its outcome
}

// configureTasks sets the task options; call it before tasks run.
func (n *Node) configureTasks(o TaskOptions) {
	o = o.WithDefaults()
	n.tasks.mu.Lock()
	n.tasks.opts = o
	n.tasks.mu.Unlock()
	var done *doneTasks
	if o.CacheBytes > 0 {
		done = &doneTasks{max: o.CacheBytes}
	}
	n.tasks.done.Store(done)
}

// WithDefaults returns o with every zero bound at its default.
func (o TaskOptions) WithDefaults() TaskOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultTaskAttempts
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultTaskResultBytes
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = DefaultMaxWaiters
	}
	if o.FinishTimeout <= 0 {
		o.FinishTimeout = DefaultTaskFinishTimeout
	}
	if o.MaxPerOwner <= 0 {
		o.MaxPerOwner = cluster.DefaultMaxTasks
	}
	if o.SweepBatch <= 0 {
		o.SweepBatch = DefaultTaskSweepBatch
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultTaskCacheBytes
	}
	return o
}

func (t *tasks) options() TaskOptions {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opts
}

// NewTaskID returns an unguessable task id (128 random bits).
func NewTaskID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// startTask records t (status working, run by this process, attempt 1)
// and runs f in the background. It returns once the record is durable.
// max bounds the live tasks of t.OwnerKey.
func (n *Node) startTask(ctx context.Context, t cluster.Task, max int, f TaskFunc) (cluster.Task, error) {
	if n.draining.Load() {
		return cluster.Task{}, jsonrpc.NewError(jsonrpc.CodeDraining, "the node is shutting down; retry", nil)
	}
	t.Status, t.Runner, t.Attempt = cluster.TaskWorking, n.instance, 1
	// The store takes the run's hold with the record (before it, where
	// it takes it on its own), so no reader ever sees the record without
	// it.
	hold := n.holdTask(t.ID)
	rec, err := n.be.Tasks.Create(ctx, t, max, &hold.claim)
	if err != nil {
		if errors.Is(err, cluster.ErrLimit) {
			// Refused at the bound: the store took no claim.
			hold.releasedWith()
		}
		hold.release()
		return cluster.Task{}, err
	}
	hold.taken()
	n.run(rec, f, hold)
	return rec, nil
}

// holdTask prepares the hold on the run of a task for this process: the
// claim lives as long as the process's membership lease (claimHold),
// and the run's outcome releases it (cluster.TaskUpdate.Release). A run
// that ends without recording its outcome (the store failed past
// FinishTimeout) releases it on its own, so readers reap the task
// although this process lives.
func (n *Node) holdTask(id string) *claimHold { return n.newClaimHold(taskKey(id)) }

// taskKey names the claim on the run of a task.
func taskKey(id string) string { return "produce:" + taskStream(id) }

func taskStream(id string) string { return "task:" + id }

// run starts f for rec on this node, which holds its run (hold taken).
func (n *Node) run(rec cluster.Task, f TaskFunc, hold *claimHold) {
	ctx, cancel := context.WithCancel(n.ctx)
	r := &TaskRun{n: n, Task: rec, cancel: cancel, wake: make(chan struct{}, 1), hold: hold}
	n.tasks.mu.Lock()
	if n.tasks.running == nil {
		n.tasks.running = map[string]*TaskRun{}
	}
	n.tasks.running[rec.ID] = r
	n.tasks.mu.Unlock()
	n.Go(func(context.Context) {
		defer func() {
			cancel()
			hold.release()
			n.tasks.mu.Lock()
			if n.tasks.running[rec.ID] == r {
				delete(n.tasks.running, rec.ID)
			}
			n.tasks.mu.Unlock()
		}()
		go r.watch(ctx)
		res, rerr := f(ctx, r)
		n.finish(r, res, rerr)
	})
}

// watch is the runner's backstop for a lost TaskChanged: it reads the
// record every LeaseTTL/3 and cancels the run once the task is terminal
// or runs elsewhere.
func (r *TaskRun) watch(ctx context.Context) {
	t := time.NewTicker(r.n.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		rec, err := r.n.be.Tasks.Get(ctx, r.Task.ID)
		if errors.Is(err, cluster.ErrNotFound) || err == nil && (cluster.TaskTerminal(rec.Status) || rec.Runner != r.n.instance) {
			r.cancel()
			return
		}
		r.n.wakeTask(r.Task.ID)
	}
}

// finish records the outcome of a run, unless the task ended meanwhile
// (cancelled) or runs elsewhere now.
func (n *Node) finish(r *TaskRun, res json.RawMessage, rerr *jsonrpc.Error) {
	if n.ctx.Err() != nil {
		// The node closed under the run: the outcome is the node's end,
		// not the handler's. Readers reap the task once the lease is gone.
		return
	}
	opts := n.tasks.options()
	ctx, cancel := context.WithTimeout(n.ctx, opts.FinishTimeout)
	defer cancel()
	limit := opts.MaxResultBytes
	u := cluster.TaskUpdate{IfRunner: n.instance, Status: cluster.TaskCompleted, Result: res}
	if rerr == nil && len(res) > limit {
		rerr = jsonrpc.NewError(jsonrpc.CodeInternalError, fmt.Sprintf("the task's result is %d bytes, over the bound of %d", len(res), limit), nil)
	}
	if rerr != nil {
		b, _ := json.Marshal(rerr)
		if len(b) > limit {
			b, _ = json.Marshal(jsonrpc.NewError(rerr.Code, "the task failed (error too large to keep)", nil))
		}
		u = cluster.TaskUpdate{IfRunner: n.instance, Status: cluster.TaskFailed, Message: rerr.Message, Error: b}
		if len(res) <= limit {
			u.Result = res
		}
	}
	if r.Task.Attempt > 1 {
		// A run after a take-over says so in its status message.
		if u.Message == "" {
			u.Message = "completed"
		}
		u.Message = fmt.Sprintf("%s (attempt %d, taken over from a lost node)", u.Message, r.Task.Attempt)
	}
	// The outcome releases the run's hold, in the same round trip where
	// the store allows; the notice is made once for every try.
	u.Release = &r.hold.claim
	u.Announce = n.taskNotice(r.Task.ID)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		rec, err := n.changeTask(ctx, r.Task.ID, u)
		switch {
		case err == nil:
			r.hold.releasedWith()
			n.told(rec)
			return
		case taskRefused(err):
			return
		}
		select {
		case <-ctx.Done():
			// The hold is released after this: readers reap the task.
			n.log.Warn().Err(err).Str("task", r.Task.ID).Msg("task outcome not recorded")
			return
		case <-time.After(wait):
		}
	}
}

// changeTask applies u to task id and tells every node of the change
// (TaskChanged, best effort: readers poll), which the store publishes
// with the change (cluster.TaskUpdate.Announce, taskNotice when u has
// none), in the same round trip where it allows; never when the update
// fails.
func (n *Node) changeTask(ctx context.Context, id string, u cluster.TaskUpdate) (cluster.Task, error) {
	if u.Announce == nil {
		u.Announce = n.taskNotice(id)
	}
	rec, err := n.be.Tasks.Update(ctx, id, u)
	if err == nil && u.Announce != nil {
		n.metrics.BusSent()
	}
	return rec, err
}

// taskNotice is TaskChanged as a bus message for the store to publish;
// nil when it does not encode.
func (n *Node) taskNotice(id string) *cluster.Notice {
	b, err := Encode(TaskChanged{ID: id})
	if err != nil {
		n.log.Debug().Err(err).Str("task", id).Msg("task change not encoded")
		return nil
	}
	return &cluster.Notice{Topic: TopicAll, Msg: b}
}

// told keeps a terminal record this node recorded (doneTasks) and hands
// the change to TaskOptions.Changed, in the background.
func (n *Node) told(t cluster.Task) {
	n.tasks.done.Load().put(t, time.Now())
	f := n.tasks.options().Changed
	if f == nil {
		return
	}
	n.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, n.leaseTTL)
		defer cancel()
		f(ctx, t)
	})
}

// onTaskChanged wakes the local waiters and run of a task, and tells the
// listen streams here.
func (n *Node) onTaskChanged(id string) {
	if listen := n.wakeTask(id); listen != "" {
		n.notifyListeners(ListenNotify{Method: listen, URI: id})
	}
}

// wakeTask wakes the local waiters and the local run of a task; it
// returns the listen method of task changes.
func (n *Node) wakeTask(id string) string {
	n.tasks.mu.Lock()
	r := n.tasks.running[id]
	listen := n.tasks.opts.ListenMethod
	for ch := range n.tasks.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	n.tasks.mu.Unlock()
	if r != nil {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return listen
}

// runningTasks returns the number of tasks running on this node.
func (n *Node) runningTasks() int {
	n.tasks.mu.Lock()
	defer n.tasks.mu.Unlock()
	return len(n.tasks.running)
}

// cancelTask moves a live task to cancelled and tells its runner, which
// cancels the handler's context. A terminal task is left as it is.
func (n *Node) cancelTask(ctx context.Context, id string) (cluster.Task, error) {
	t, err := n.changeTask(ctx, id, cluster.TaskUpdate{Status: cluster.TaskCancelled, Message: "cancelled by the client"})
	if errors.Is(err, cluster.ErrTaskFinal) {
		return n.be.Tasks.Get(ctx, id)
	}
	if err != nil {
		return t, err
	}
	n.told(t)
	return t, nil
}

// respondTask delivers input responses to a task and wakes its runner.
func (n *Node) respondTask(ctx context.Context, id string, responses map[string][]byte) (cluster.Task, error) {
	t, err := n.changeTask(ctx, id, cluster.TaskUpdate{Respond: responses})
	if err != nil {
		return t, err
	}
	n.told(t)
	return t, nil
}

// waitTaskDone returns the task's record once done(record) holds, reaping it
// when its runner is gone. It wakes on TaskChanged and polls the record
// every poll (the backstop for a lost message).
func (n *Node) waitTaskDone(ctx context.Context, id string, poll time.Duration, done func(cluster.Task) bool) (cluster.Task, error) {
	ch, release, err := n.waitTask(id)
	if err != nil {
		return cluster.Task{}, err
	}
	defer release()
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return cluster.Task{}, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		rec, err := n.getTask(ctx, id)
		if err != nil || done(rec) {
			return rec, err
		}
		t.Reset(poll)
	}
}

func (n *Node) waitTask(id string) (chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	n.tasks.mu.Lock()
	defer n.tasks.mu.Unlock()
	if n.tasks.nwait >= max(n.tasks.opts.MaxWaiters, 1) {
		return nil, nil, ErrTaskWaiters
	}
	if n.tasks.waiters == nil {
		n.tasks.waiters = map[string]map[chan struct{}]struct{}{}
	}
	set := n.tasks.waiters[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		n.tasks.waiters[id] = set
	}
	set[ch] = struct{}{}
	n.tasks.nwait++
	return ch, func() {
		n.tasks.mu.Lock()
		delete(set, ch)
		if len(set) == 0 {
			delete(n.tasks.waiters, id)
		}
		n.tasks.nwait--
		n.tasks.mu.Unlock()
	}, nil
}

// Input asks the client for input: request (a server→client request, in
// the adapter's form) is recorded under a fresh key and the task is
// input_required until a response for that key arrives, through any node.
// It returns the response, or an error when ctx ends (the task was
// cancelled) or the task ended. Several Input calls may wait at once:
// their requests are pending together.
func (r *TaskRun) Input(ctx context.Context, request []byte) ([]byte, error) {
	n := r.n
	key := NewTaskID()[:16]
	ch, release, err := n.waitTask(r.Task.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := n.changeTask(ctx, r.Task.ID, cluster.TaskUpdate{IfRunner: n.instance, AddInputs: map[string][]byte{key: request}})
	if err != nil {
		return nil, err
	}
	n.told(rec)
	poll := r.Task.PollInterval
	if poll <= 0 || poll > n.leaseTTL/3 {
		poll = n.leaseTTL / 3
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		rec, err := n.be.Tasks.Get(ctx, r.Task.ID)
		if err != nil {
			return nil, err
		}
		if cluster.TaskTerminal(rec.Status) || rec.Runner != n.instance {
			return nil, context.Canceled
		}
		if v, ok := rec.Responses[key]; ok {
			if _, err := n.be.Tasks.Update(ctx, r.Task.ID, cluster.TaskUpdate{IfRunner: n.instance, Consume: []string{key}}); err != nil {
				return nil, err
			}
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		case <-t.C:
		}
	}
}

// handOver gives up the idempotent tasks running here (drain timed out):
// their runner becomes "" and their hold is released with the change, so
// the next reader takes them over.
func (n *Node) handOver(ctx context.Context) {
	n.tasks.mu.Lock()
	var runs []*TaskRun
	for _, r := range n.tasks.running {
		if r.Task.Idempotent {
			runs = append(runs, r)
		}
	}
	n.tasks.mu.Unlock()
	none := ""
	for _, r := range runs {
		if _, err := n.changeTask(ctx, r.Task.ID, cluster.TaskUpdate{IfRunner: n.instance, SetRunner: &none, Release: &r.hold.claim}); err == nil {
			r.hold.releasedWith()
			r.cancel()
		}
	}
}
