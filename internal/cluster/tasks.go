package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Task statuses. Working and InputRequired are live; the other three are
// terminal and final.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// Terminal reports whether the task's status is terminal (see
// TaskTerminal).
func (t Task) Terminal() bool { return TaskTerminal(t.Status) }

// TaskTerminal reports whether status is terminal (completed, failed or
// cancelled).
func TaskTerminal(status string) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// TaskTransitionLegal reports whether a task may move from one status to
// another: working ⇄ input_required, either of them to a terminal status,
// and a status to itself while live. Terminal statuses are final.
func TaskTransitionLegal(from, to string) bool {
	switch from {
	case TaskWorking, TaskInputRequired:
		return to == TaskWorking || to == TaskInputRequired || TaskTerminal(to)
	}
	return false
}

// ErrTaskFinal: the task is terminal, so the change was refused.
var ErrTaskFinal = errors.New("cluster: task is terminal")

// ErrTaskRunner: the change was conditioned on a running process that no
// longer runs the task (another node took it over, or it ended).
var ErrTaskRunner = errors.New("cluster: task runs elsewhere")

// Task is the shared record of one durable task. Any node can load it;
// the node that runs it (Runner) writes its progress through TaskStore.
type Task struct {
	// ID is unguessable (128 random bits): without authentication it is
	// the only thing that gives access to the task.
	ID string
	// Owner is the principal id that created the task ("" without
	// authentication); OwnerKey is the key the per-owner bound counts
	// under (the principal id, or the client address without one).
	Owner, OwnerKey string
	Status          string
	Message         string
	Created         time.Time
	Updated         time.Time
	// TTL is how long the record lives after Created.
	TTL          time.Duration
	PollInterval time.Duration
	// Method and Params are the request that runs the task again when it
	// is taken over.
	Method string
	Params []byte
	// Meta is opaque to the store: what the adapter needs to run Params
	// again (protocol revision, negotiated capabilities).
	Meta []byte
	// Result (completed) or Error (failed, a JSON-RPC error object) once
	// terminal. A failed task may keep a Result too: the result of a run
	// that counts as a failure (a 2025-11-25 tool result with isError).
	Result, Error []byte
	// Runner is the process running the task, as it holds its membership
	// lease ("<node>.<incarnation>"); "" while nobody runs it.
	Runner string
	// Attempt counts the runs started (1 for the first).
	Attempt int
	// Idempotent tasks are run again on a live node when their runner
	// dies; the others fail.
	Idempotent bool
	// Inputs are the pending input requests by key; Responses the
	// responses received for keys not consumed yet by the runner. Keys
	// are unique over the task's lifetime (see TaskUpdate.AddInputs).
	Inputs, Responses map[string][]byte
}

// TaskUpdate is one atomic change of a task record. Zero fields change
// nothing.
type TaskUpdate struct {
	// IfRunner applies the change only while the task's Runner is this
	// value (ErrTaskRunner otherwise); "" means unconditional.
	IfRunner string
	// Status moves the task (legal transitions only: ErrTaskFinal once
	// terminal). Message replaces the status message when Status is set.
	Status, Message string
	// Result or Error is stored with a terminal Status (Result also with
	// failed, when given).
	Result, Error []byte
	// SetRunner replaces the runner and NextAttempt adds one to Attempt
	// (a run starts).
	SetRunner   *string
	NextAttempt bool
	// ClearInputs drops the pending input requests and unread responses
	// (a new run asks again); their keys stay used.
	ClearInputs bool
	// AddInputs records pending input requests and moves a working task
	// to input_required. A key that the task ever had is refused
	// (ErrTaskKey): keys are unique over the task's lifetime.
	AddInputs map[string][]byte
	// Respond delivers responses: each for a pending key moves the
	// request from Inputs to Responses (other keys are ignored). Once no
	// input is pending, an input_required task is working again.
	Respond map[string][]byte
	// Consume drops responses the runner has read.
	Consume []string
	// Release, when not nil, is released (as Claims.Release would) once
	// the update applied, in the same round trip where the backend
	// allows; never when Update fails.
	Release *TaskClaim
	// Take, when not nil, is the claim of a take-over: taken (as
	// Claims.Claim would) by the update that applies, and only while
	// nobody holds it or TakeFrom or Take.Owner does; another holder
	// refuses the update (ErrTaskRunner). TakeFrom is the holder the
	// caller found gone (its process lost its lease), whose claim a
	// take-over may drop even when refused. Of concurrent take-overs
	// conditioned on one runner, the one whose update applies holds the
	// claim, and the others never touch it. A refused update
	// (ErrNotFound, ErrTaskFinal, ErrTaskRunner, ErrTaskKey) leaves no
	// claim of Take.Owner; after any other error it may have been
	// taken. Where the claim's key cannot go with the task's change
	// (Redis Cluster), the backend takes it first, on the same
	// condition, and releases it when the update is refused. Not with
	// Release.
	Take     *TaskClaim
	TakeFrom string
	// Announce, when not nil, is published on the bus (as Bus.Publish
	// would) once the update applied, in the same round trip where the
	// backend allows; never when Update fails. A retried call that finds
	// its change applied does not publish again. Where the backend sends
	// the release or the announcement on its own, after the update, it
	// does so best effort: Update's error is the update's (a claim left
	// behind ends with its TTL, a lost announcement is a lost bus
	// message).
	Announce *Notice
}

// TaskClaim names a claim (Claims) that a task's change takes (Create,
// TaskUpdate.Take) or releases (TaskUpdate.Release): Key, held by Owner,
// for TTL once taken.
type TaskClaim struct {
	Key, Owner string
	TTL        time.Duration
}

// CheckClaims reports a Take that has no positive TTL or comes with
// a Release: what a backend refuses before it changes anything.
func (u TaskUpdate) CheckClaims() error {
	switch {
	case u.Take == nil:
		return nil
	case u.Release != nil:
		return errors.New("a task update takes a claim and releases one")
	case u.Take.TTL <= 0:
		return errors.New("claim " + strconv.Quote(u.Take.Key) + ": ttl must be positive")
	}
	return nil
}

// ErrTaskKey: an input request key was used before in this task.
var ErrTaskKey = errors.New("cluster: input request key already used")

// TaskStore keeps task records with their TTL. Every change is atomic,
// and a retried call (a lost reply) is answered as the first one was.
type TaskStore interface {
	// Create records t (its Status must be working or input_required)
	// and returns once the record is durable: a Get that starts after it
	// returns sees it. It returns the record as stored (what such a Get
	// reads: with the store's Created and Updated), so the creator needs
	// no Get of its own. max bounds the live records of t.OwnerKey (0 =
	// no bound): past it Create returns ErrLimit. An existing id is an
	// error. claim, when not nil, is taken (as Claims.Claim would) before
	// the record is written, in the same round trip where the backend
	// allows: no reader sees the record without it. It is not taken when
	// Create reports the id taken or the owner at its bound; after any
	// other error it may have been.
	Create(ctx context.Context, t Task, max int, claim *TaskClaim) (Task, error)
	// Get returns the record. ErrNotFound when unknown or expired.
	Get(ctx context.Context, id string) (Task, error)
	// Update applies u atomically and returns the record after it.
	// ErrNotFound, ErrTaskFinal (a status change of a terminal task),
	// ErrTaskRunner (IfRunner does not hold) or ErrTaskKey.
	Update(ctx context.Context, id string, u TaskUpdate) (Task, error)
	// Delete removes the record at once (unknown ids are not an error).
	Delete(ctx context.Context, id string) error
	// List returns up to limit live records counted under ownerKey whose
	// Owner is owner, in the order of their expiry, after cursor ("" for
	// the first page), and the cursor of the next page ("" at the end).
	// A cursor that names no position is ErrBadCursor.
	List(ctx context.Context, ownerKey, owner, cursor string, limit int) ([]Task, string, error)

	// The run index names the tasks of each runner, so the tasks of a
	// dead process can be found without a reader asking for them. Create
	// indexes a task under its Runner, and an Update with SetRunner under
	// the new runner ("" included). Entries are dropped by Unindex or
	// when the task's TTL ends: a listed task may have ended or moved
	// since (callers check the record).

	// Runners returns up to limit runners that have index entries.
	Runners(ctx context.Context, limit int) ([]string, error)
	// RunnerTasks returns up to limit task ids indexed under runner.
	RunnerTasks(ctx context.Context, runner string, limit int) ([]string, error)
	// Unindex drops ids from runner's index (and runner from Runners
	// once its index is empty).
	Unindex(ctx context.Context, runner string, ids []string) error
}

// ErrBadCursor: a List cursor that this store did not make.
var ErrBadCursor = errors.New("cluster: invalid task list cursor")

// TaskCursor is the position of a record in List order: its expiry in
// ms since the epoch, and its id.
func TaskCursor(expiryMs int64, id string) string {
	return strconv.FormatInt(expiryMs, 10) + ":" + id
}

// ParseTaskCursor reads a TaskCursor.
func ParseTaskCursor(c string) (expiryMs int64, id string, err error) {
	ms, id, ok := strings.Cut(c, ":")
	if !ok || id == "" {
		return 0, "", ErrBadCursor
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	return n, id, nil
}

// TaskAfter reports whether the position (expiryMs, id) comes after the
// cursor position (cms, cid) in List order.
func TaskAfter(expiryMs int64, id string, cms int64, cid string) bool {
	return expiryMs > cms || expiryMs == cms && id > cid
}

// DefaultMaxTasks bounds the live tasks of one owner when no option sets
// it.
const DefaultMaxTasks = 1000
