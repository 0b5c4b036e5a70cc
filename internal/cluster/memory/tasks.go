package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// tasks implements cluster.TaskStore.
type tasks store

var _ cluster.TaskStore = (*tasks)(nil)

// taskRec is a stored task: the record plus every input key it ever had.
type taskRec struct {
	t       cluster.Task
	expires time.Time
	used    map[string]struct{}
}

func taskNotFound(id string) error {
	return fmt.Errorf("task %q: %w", id, cluster.ErrNotFound)
}

// copyTask returns a deep copy, so callers never share the stored maps.
func copyTask(t cluster.Task) cluster.Task {
	t.Params = slices.Clone(t.Params)
	t.Meta = slices.Clone(t.Meta)
	t.Result = slices.Clone(t.Result)
	t.Error = slices.Clone(t.Error)
	t.Inputs = maps.Clone(t.Inputs)
	t.Responses = maps.Clone(t.Responses)
	return t
}

// taskLocked returns the live record of id (dropping it when expired).
func (s *store) taskLocked(id string, now time.Time) *taskRec {
	r := s.tasks[id]
	if r != nil && expired(r.expires, now) {
		delete(s.tasks, id)
		return nil
	}
	return r
}

// pruneTasksLocked drops expired tasks.
func (s *store) pruneTasksLocked(now time.Time) {
	for id, r := range s.tasks {
		if expired(r.expires, now) {
			delete(s.tasks, id)
		}
	}
}

// Create takes the claim in the same critical section as it writes the
// record, so no reader sees the record without it.
func (m *tasks) Create(ctx context.Context, t cluster.Task, max int, claim *cluster.TaskClaim) (cluster.Task, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Create"); err != nil {
		return cluster.Task{}, err
	}
	if claim != nil && claim.TTL <= 0 {
		return cluster.Task{}, fmt.Errorf("claim %q: ttl must be positive", claim.Key)
	}
	if t.TTL <= 0 {
		return cluster.Task{}, fmt.Errorf("task %q: ttl must be positive", t.ID)
	}
	if t.Status != cluster.TaskWorking && t.Status != cluster.TaskInputRequired {
		return cluster.Task{}, fmt.Errorf("task %q: created with status %q", t.ID, t.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.taskLocked(t.ID, now) != nil {
		return cluster.Task{}, fmt.Errorf("task %q already exists", t.ID)
	}
	if len(s.tasks) >= s.opts.MaxKeys {
		s.pruneTasksLocked(now)
		if len(s.tasks) >= s.opts.MaxKeys {
			return cluster.Task{}, fmt.Errorf("%d tasks: %w", s.opts.MaxKeys, cluster.ErrLimit)
		}
	}
	if max > 0 {
		n := 0
		for _, r := range s.tasks {
			if r.t.OwnerKey == t.OwnerKey && !expired(r.expires, now) {
				n++
			}
		}
		if n >= max {
			return cluster.Task{}, fmt.Errorf("live tasks of this owner at the cap of %d: %w", max, cluster.ErrLimit)
		}
	}
	if s.tasks == nil {
		s.tasks = make(map[string]*taskRec)
	}
	t = copyTask(t)
	used := make(map[string]struct{}, len(t.Inputs))
	for k := range t.Inputs {
		used[k] = struct{}{}
	}
	if claim != nil {
		if err := s.claimLocked(claim.Key, claim.Owner, claim.TTL, now); err != nil {
			return cluster.Task{}, err
		}
	}
	t.Created = now
	t.Updated = t.Created
	s.tasks[t.ID] = &taskRec{t: t, expires: t.Created.Add(t.TTL), used: used}
	s.indexLocked(t.Runner, t.ID, t.Created.Add(t.TTL))
	return copyTask(t), nil
}

func (m *tasks) Get(ctx context.Context, id string) (cluster.Task, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Get"); err != nil {
		return cluster.Task{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.taskLocked(id, s.now())
	if r == nil {
		return cluster.Task{}, taskNotFound(id)
	}
	return copyTask(r.t), nil
}

func (m *tasks) Update(ctx context.Context, id string, u cluster.TaskUpdate) (cluster.Task, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Update"); err != nil {
		return cluster.Task{}, err
	}
	if err := u.CheckClaims(); err != nil {
		return cluster.Task{}, fmt.Errorf("task %q: %w", id, err)
	}
	t, err := s.updateTask(id, u)
	if err == nil && u.Announce != nil {
		// The change is recorded either way: a lost announcement is what
		// a lost bus message is elsewhere.
		if _, perr := s.bus.Publish(ctx, u.Announce.Topic, u.Announce.Msg); perr != nil {
			s.log.Warn().Err(perr).Msg("task change not announced")
		}
	}
	return t, err
}

// updateTask applies u to task id with the claim it takes (u.Take) or
// releases (u.Release), in one critical section.
func (s *store) updateTask(id string, u cluster.TaskUpdate) (cluster.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.taskLocked(id, now)
	if r == nil {
		return cluster.Task{}, taskNotFound(id)
	}
	if c := u.Take; c != nil {
		// Checked before the record changes: a refused take refuses
		// the update.
		if err := s.mayTakeLocked(c, u.TakeFrom, now); err != nil {
			return cluster.Task{}, fmt.Errorf("task %q: %w", id, err)
		}
	}
	if err := applyTaskUpdate(r, u, now); err != nil {
		return cluster.Task{}, fmt.Errorf("task %q: %w", id, err)
	}
	if u.SetRunner != nil {
		s.indexLocked(r.t.Runner, id, r.expires)
	}
	if c := u.Take; c != nil {
		if err := s.claimLocked(c.Key, c.Owner, c.TTL, now); err != nil {
			return cluster.Task{}, err // not reached: mayTakeLocked made room
		}
	}
	if c := u.Release; c != nil {
		s.releaseClaimLocked(c.Key, c.Owner, now)
	}
	return copyTask(r.t), nil
}

// mayTakeLocked checks that c may be taken (see cluster.TaskUpdate.Take)
// and that a new claim fits; s.mu is held.
func (s *store) mayTakeLocked(c *cluster.TaskClaim, from string, now time.Time) error {
	h := s.holderLocked(c.Key, now)
	if h == nil {
		return s.roomLocked(now)
	}
	if h.owner != from && h.owner != c.Owner {
		return fmt.Errorf("claim %q held by another: %w", c.Key, cluster.ErrTaskRunner)
	}
	return nil
}

// applyTaskUpdate checks every condition first, then changes r: the
// update applies entirely or not at all.
func applyTaskUpdate(r *taskRec, u cluster.TaskUpdate, now time.Time) error {
	t := &r.t
	if u.IfRunner != "" && t.Runner != u.IfRunner {
		return cluster.ErrTaskRunner
	}
	final := cluster.TaskTerminal(t.Status)
	if u.Status != "" && !cluster.TaskTransitionLegal(t.Status, u.Status) {
		return cluster.ErrTaskFinal
	}
	if len(u.AddInputs) > 0 {
		if final {
			return cluster.ErrTaskFinal
		}
		for k := range u.AddInputs {
			if _, ok := r.used[k]; ok {
				return fmt.Errorf("%q: %w", k, cluster.ErrTaskKey)
			}
		}
	}
	if (u.SetRunner != nil || u.NextAttempt || u.ClearInputs) && final {
		return cluster.ErrTaskFinal
	}
	changed := false
	if u.ClearInputs && (len(t.Inputs) > 0 || len(t.Responses) > 0) {
		t.Inputs, t.Responses = nil, nil
		changed = true
	}
	if u.SetRunner != nil {
		t.Runner = *u.SetRunner
		changed = true
	}
	if u.NextAttempt {
		t.Attempt++
		changed = true
	}
	for k, v := range u.AddInputs {
		if t.Inputs == nil {
			t.Inputs = make(map[string][]byte)
		}
		t.Inputs[k] = slices.Clone(v)
		r.used[k] = struct{}{}
		changed = true
	}
	if !final {
		for k, v := range u.Respond {
			if _, ok := t.Inputs[k]; !ok {
				continue
			}
			delete(t.Inputs, k)
			if t.Responses == nil {
				t.Responses = make(map[string][]byte)
			}
			t.Responses[k] = slices.Clone(v)
			changed = true
		}
	}
	for _, k := range u.Consume {
		if _, ok := t.Responses[k]; ok {
			delete(t.Responses, k)
			changed = true
		}
	}
	if u.Status != "" {
		t.Status, t.Message = u.Status, u.Message
		if u.Status == cluster.TaskCompleted {
			t.Result = slices.Clone(u.Result)
		}
		if u.Status == cluster.TaskFailed {
			t.Error = slices.Clone(u.Error)
			if len(u.Result) > 0 {
				t.Result = slices.Clone(u.Result)
			}
		}
		if cluster.TaskTerminal(u.Status) {
			t.Inputs, t.Responses = nil, nil
		}
		changed = true
	}
	if !cluster.TaskTerminal(t.Status) {
		if len(t.Inputs) > 0 && len(u.AddInputs) > 0 {
			t.Status = cluster.TaskInputRequired
		} else if len(t.Inputs) == 0 && t.Status == cluster.TaskInputRequired && u.Status == "" {
			t.Status = cluster.TaskWorking
		}
	}
	if changed {
		t.Updated = now
	}
	return nil
}

func (m *tasks) Delete(ctx context.Context, id string) error {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Delete"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, id)
	return nil
}

func (m *tasks) List(ctx context.Context, ownerKey, owner, cursor string, limit int) ([]cluster.Task, string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.List"); err != nil {
		return nil, "", err
	}
	var cms int64
	var cid string
	if cursor != "" {
		var err error
		if cms, cid, err = cluster.ParseTaskCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var recs []*taskRec
	for _, r := range s.tasks {
		if r.t.OwnerKey == ownerKey && r.t.Owner == owner && !expired(r.expires, now) &&
			(cursor == "" || cluster.TaskAfter(r.expires.UnixMilli(), r.t.ID, cms, cid)) {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b *taskRec) int {
		if c := a.expires.UnixMilli() - b.expires.UnixMilli(); c != 0 {
			return int(max(min(c, 1), -1))
		}
		return strings.Compare(a.t.ID, b.t.ID)
	})
	next := ""
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		next = cluster.TaskCursor(last.expires.UnixMilli(), last.t.ID)
	}
	out := make([]cluster.Task, len(recs))
	for i, r := range recs {
		out[i] = copyTask(r.t)
	}
	return out, next, nil
}

// indexLocked records id under runner in the run index.
func (s *store) indexLocked(runner, id string, expires time.Time) {
	if s.runIdx == nil {
		s.runIdx = make(map[string]map[string]time.Time)
	}
	if s.runIdx[runner] == nil {
		s.runIdx[runner] = make(map[string]time.Time)
	}
	s.runIdx[runner][id] = expires
}

// runnerLocked returns runner's live index entries, dropping expired ones
// (and the runner once it has none).
func (s *store) runnerLocked(runner string, now time.Time) map[string]time.Time {
	return pruneExpired(s.runIdx, runner, now)
}

func (m *tasks) Runners(ctx context.Context, limit int) ([]string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Runners"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []string
	for _, r := range slices.Sorted(maps.Keys(s.runIdx)) {
		if limit > 0 && len(out) == limit {
			break
		}
		if s.runnerLocked(r, now) != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *tasks) RunnerTasks(ctx context.Context, runner string, limit int) ([]string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.RunnerTasks"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.runnerLocked(runner, s.now())))
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

func (m *tasks) Unindex(ctx context.Context, runner string, ids []string) error {
	s := (*store)(m)
	if err := s.check(ctx, "Tasks.Unindex"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.runIdx[runner], id)
	}
	s.runnerLocked(runner, s.now())
	return nil
}
