package memory

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// sessions implements cluster.SessionStore over the shared store.
type sessions store

var _ cluster.SessionStore = (*sessions)(nil)

// session is one live session. It sits in store.expiry, a min-heap on
// expires, so pruning costs O(log n) per expired session and the live
// count is len(store.sessions) after a prune.
type session struct {
	id      string
	fields  map[string]string
	expires time.Time
	subs    map[string]struct{}
	holders map[string]time.Time // see cluster.Holders
	index   int                  // position in store.expiry
}

// hold records holder (when not empty) as holding a copy of ss at now.
func (ss *session) hold(holder string, now time.Time) {
	if holder == "" {
		return
	}
	if ss.holders == nil {
		ss.holders = make(map[string]time.Time)
	}
	ss.holders[holder] = now
}

// dropHolders forgets the holders recorded more than ttl before now
// (none when ttl is 0).
func (ss *session) dropHolders(now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	for h, at := range ss.holders {
		if now.Sub(at) > ttl {
			delete(ss.holders, h)
		}
	}
}

// takeHolders clears the holders of ss and returns them, as of now.
func (ss *session) takeHolders(now time.Time) []cluster.Holder {
	out := make([]cluster.Holder, 0, len(ss.holders))
	for h, at := range ss.holders {
		out = append(out, cluster.Holder{Name: h, Age: now.Sub(at)})
	}
	ss.holders = nil
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type sessionHeap []*session

func (h sessionHeap) Len() int           { return len(h) }
func (h sessionHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h sessionHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *sessionHeap) Push(x any) {
	s := x.(*session)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.index = -1
	return s
}

// pruneSessionsLocked drops every expired session and returns how many.
func (s *store) pruneSessionsLocked(now time.Time) int {
	n := 0
	for len(s.expiry) > 0 && expired(s.expiry[0].expires, now) {
		s.dropSessionLocked(s.expiry[0])
		n++
	}
	return n
}

// dropSessionLocked removes a session and its subscriptions. Its streams
// and claims are left to their own TTL (End removes them too).
func (s *store) dropSessionLocked(ss *session) {
	if ss.index >= 0 {
		heap.Remove(&s.expiry, ss.index)
	}
	delete(s.sessions, ss.id)
	for uri := range ss.subs {
		if ids := s.byURI[uri]; ids != nil {
			delete(ids, ss.id)
			if len(ids) == 0 {
				delete(s.byURI, uri)
			}
		}
	}
}

// liveLocked returns the session if it is live at now, dropping it when
// it has expired.
func (s *store) liveLocked(id string, now time.Time) *session {
	ss := s.sessions[id]
	if ss == nil {
		return nil
	}
	if expired(ss.expires, now) {
		s.dropSessionLocked(ss)
		return nil
	}
	return ss
}

func (s *store) slideLocked(ss *session, now time.Time, ttl time.Duration) {
	ss.expires = now.Add(ttl)
	heap.Fix(&s.expiry, ss.index)
}

func notFound(id string) error {
	return fmt.Errorf("session %q: %w", id, cluster.ErrNotFound)
}

func (m *sessions) Create(ctx context.Context, id string, fields map[string]string, ttl time.Duration, max int, opts cluster.CreateOptions) error {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Create"); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("session %q: ttl must be positive", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.pruneSessionsLocked(now)
	if _, ok := s.sessions[id]; ok {
		return fmt.Errorf("session %q already exists", id)
	}
	if l := opts.Lease; l != nil {
		if l.TTL <= 0 {
			return fmt.Errorf("session %q: lease ttl must be positive", id)
		}
		ok, wait, err := s.acquireLocked(l.Key, id, l.TTL, l.Max, now)
		if err != nil {
			return err
		}
		if !ok {
			return &cluster.LeaseRefused{Wait: wait}
		}
	}
	if max > 0 && len(s.sessions) >= max {
		if opts.Lease != nil {
			s.releaseLocked(opts.Lease.Key, id)
		}
		return fmt.Errorf("%d live sessions: %w", len(s.sessions), cluster.ErrLimit)
	}
	ss := &session{id: id, fields: maps.Clone(fields), expires: now.Add(ttl)}
	if ss.fields == nil {
		ss.fields = make(map[string]string)
	}
	ss.hold(opts.Holder, now)
	s.sessions[id] = ss
	heap.Push(&s.expiry, ss)
	return nil
}

func (m *sessions) Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Load"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ss := s.liveLocked(id, now)
	if ss == nil {
		return nil, notFound(id)
	}
	if ttl > 0 {
		s.slideLocked(ss, now, ttl)
	}
	if holder != "" {
		ss.dropHolders(now, ttl)
		ss.hold(holder, now)
	}
	return maps.Clone(ss.fields), nil
}

func (m *sessions) Touch(ctx context.Context, id string, ttl time.Duration) error {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Touch"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ss := s.liveLocked(id, now)
	if ss == nil {
		return notFound(id)
	}
	if ttl > 0 {
		s.slideLocked(ss, now, ttl)
	}
	return nil
}

func (m *sessions) Set(ctx context.Context, id string, fields map[string]string) ([]cluster.Holder, error) {
	var holders []cluster.Holder
	err := m.withLive(ctx, "Sessions.Set", id, func(s *store, ss *session) error {
		maps.Copy(ss.fields, fields)
		holders = ss.takeHolders(s.now())
		return nil
	})
	return holders, err
}

func (m *sessions) End(ctx context.Context, id string, opts cluster.EndOptions) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.End"); err != nil {
		return false, err
	}
	live, holders, err := s.end(id, opts.Match, opts.Lease)
	if opts.Holders != nil {
		*opts.Holders = holders
	}
	if live && err == nil && opts.Announce != nil {
		// The session is ended either way: a lost announcement is what a
		// lost bus message is elsewhere.
		if _, perr := s.bus.Publish(ctx, opts.Announce.Topic, opts.Announce.Msg); perr != nil {
			s.log.Warn().Err(perr).Msg("session end not announced")
		}
	}
	return live, err
}

func (s *store) end(id string, match map[string]string, lease string) (bool, []cluster.Holder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ss := s.liveLocked(id, now)
	if ss != nil {
		for f, v := range match {
			if ss.fields[f] != v {
				return false, nil, nil
			}
		}
	}
	var holders []cluster.Holder
	if ss != nil {
		holders = ss.takeHolders(now)
		s.dropSessionLocked(ss)
		if lease != "" {
			s.releaseLocked(lease, id)
		}
	}
	if g := s.groups[id]; g != nil {
		for e := g.lru.Front(); e != nil; {
			next := e.Next()
			st := e.Value.(*stream)
			s.removeStreamLocked(st.id, st)
			e = next
		}
	}
	for key := range s.bySess[id] {
		delete(s.claims, key)
	}
	delete(s.bySess, id)
	return ss != nil, holders, nil
}

func (m *sessions) Subscribe(ctx context.Context, id, uri string) error {
	return m.withLive(ctx, "Sessions.Subscribe", id, func(s *store, ss *session) error {
		if _, ok := ss.subs[uri]; ok {
			return nil
		}
		if len(ss.subs) >= s.opts.MaxSubscriptions {
			return fmt.Errorf("session %q has %d subscriptions: %w", id, len(ss.subs), cluster.ErrLimit)
		}
		if ss.subs == nil {
			ss.subs = make(map[string]struct{})
		}
		ss.subs[uri] = struct{}{}
		ids := s.byURI[uri]
		if ids == nil {
			ids = make(map[string]struct{})
			s.byURI[uri] = ids
		}
		ids[id] = struct{}{}
		return nil
	})
}

func (m *sessions) Unsubscribe(ctx context.Context, id, uri string) error {
	return m.withLive(ctx, "Sessions.Unsubscribe", id, func(s *store, ss *session) error {
		delete(ss.subs, uri)
		if ids := s.byURI[uri]; ids != nil {
			delete(ids, id)
			if len(ids) == 0 {
				delete(s.byURI, uri)
			}
		}
		return nil
	})
}

func (m *sessions) Subscribers(ctx context.Context, uri string) ([]string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Subscribers"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []string
	for id := range s.byURI[uri] {
		if s.liveLocked(id, now) != nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// Scan pages through live sessions in id order; the cursor is the last id
// returned, so sessions created or ended during a scan never make it skip
// a session that stays live.
func (m *sessions) Scan(ctx context.Context, cursor string, count int) ([]string, string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Scan"); err != nil {
		return nil, "", err
	}
	if count <= 0 {
		count = 100
	}
	after, started := strings.CutPrefix(cursor, ">")
	if cursor != "" && !started {
		return nil, "", fmt.Errorf("scan cursor %q: malformed", cursor)
	}
	s.mu.Lock()
	s.pruneSessionsLocked(s.now())
	// Keep the count smallest ids greater than the cursor: one pass over
	// the map, O(n log count).
	page := make([]string, 0, count+1)
	for id := range s.sessions {
		if started && id <= after {
			continue
		}
		if len(page) == count && id >= page[count-1] {
			continue
		}
		i := sort.SearchStrings(page, id)
		page = append(page, "")
		copy(page[i+1:], page[i:])
		page[i] = id
		if len(page) > count {
			page = page[:count]
		}
	}
	s.mu.Unlock()
	if len(page) < count {
		return page, "", nil
	}
	return page, ">" + page[len(page)-1], nil
}

func (m *sessions) Count(ctx context.Context) (int, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Sessions.Count"); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneSessionsLocked(s.now())
	return len(s.sessions), nil
}

// withLive runs fn on the live session id under the store's lock, after
// the fault hook for op; ErrNotFound when the session is not live.
func (m *sessions) withLive(ctx context.Context, op, id string, fn func(s *store, ss *session) error) error {
	s := (*store)(m)
	if err := s.check(ctx, op); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.liveLocked(id, s.now())
	if ss == nil {
		return notFound(id)
	}
	return fn(s, ss)
}

func (m *sessions) TouchMany(ctx context.Context, ids []string, ttl time.Duration) ([]bool, error) {
	live := make([]bool, len(ids))
	for i, id := range ids {
		err := m.Touch(ctx, id, ttl)
		if err != nil && !errors.Is(err, cluster.ErrNotFound) {
			return nil, err
		}
		live[i] = err == nil
	}
	return live, nil
}
