package coordinator

import (
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// DefaultTaskCacheBytes is TaskOptions.CacheBytes' default.
const DefaultTaskCacheBytes = 8 << 20

// doneTasks keeps the records of terminal tasks this node recorded or
// read. A terminal record never changes (no change applies to it) and
// nothing removes it before its TTL ends, so a read of one here needs no
// round trip: a client polling a task to completion, then reading its
// result, reads the store once the task ended instead of twice or more.
// The records' sizes (result, error, request) are bounded by max bytes
// together, the oldest dropped first; a record larger than an eighth of
// it is not kept.
type doneTasks struct {
	mu    sync.Mutex
	max   int
	bytes int
	byID  map[string]doneTask
	order []string // ids, oldest first (an id whose entry went is skipped)
}

type doneTask struct {
	t       cluster.Task
	size    int
	expires time.Time
}

// taskSize is what a record holds in memory, roughly.
func taskSize(t cluster.Task) int {
	n := 256 + len(t.ID) + len(t.Owner) + len(t.OwnerKey) + len(t.Message) + len(t.Method) + len(t.Runner) +
		len(t.Params) + len(t.Meta) + len(t.Result) + len(t.Error)
	return n
}

// put keeps t when it is terminal and fits.
func (d *doneTasks) put(t cluster.Task, now time.Time) {
	if d == nil || !cluster.TaskTerminal(t.Status) {
		return
	}
	size := taskSize(t)
	expires := t.Created.Add(t.TTL)
	if size > d.max/8 || !now.Before(expires) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.byID[t.ID]; ok {
		return
	}
	for d.bytes+size > d.max && len(d.order) > 0 {
		d.dropOldest()
	}
	if d.byID == nil {
		d.byID = make(map[string]doneTask)
	}
	d.byID[t.ID] = doneTask{t: t, size: size, expires: expires}
	if len(d.order) > 2*len(d.byID)+64 {
		// Ids of entries that expired: keep the order of the others.
		live := d.order[:0]
		for _, id := range d.order {
			if _, ok := d.byID[id]; ok {
				live = append(live, id)
			}
		}
		clear(d.order[len(live):])
		d.order = live
	}
	d.order = append(d.order, t.ID)
	d.bytes += size
}

// dropOldest drops the oldest entry; d.mu is held.
func (d *doneTasks) dropOldest() {
	id := d.order[0]
	d.order[0] = ""
	d.order = d.order[1:]
	if e, ok := d.byID[id]; ok {
		delete(d.byID, id)
		d.bytes -= e.size
	}
	if len(d.order) == 0 {
		d.order = nil // let the array go
	}
}

// get returns the kept record of task id while it lives. The record is
// shared: do not change it.
func (d *doneTasks) get(id string, now time.Time) (cluster.Task, bool) {
	if d == nil {
		return cluster.Task{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byID[id]
	if !ok {
		return cluster.Task{}, false
	}
	if !now.Before(e.expires) {
		delete(d.byID, id)
		d.bytes -= e.size
		return cluster.Task{}, false
	}
	return e.t, true
}
