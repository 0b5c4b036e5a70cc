package memory

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// events implements cluster.EventLog over the shared store.
type events store

var _ cluster.EventLog = (*events)(nil)

// stream is one stream's bounded history. events holds the newest
// MaxEvents events in seq order.
type stream struct {
	id      string
	meta    cluster.StreamMeta
	events  []cluster.Event
	last    uint64
	done    bool
	expires time.Time
	elem    *list.Element // in its group's lru
	tokens  []batchToken  // of the latest batches, oldest first
}

// group is the set of streams of one session, most recently used first.
type group struct {
	lru *list.List
}

func (st *stream) info() cluster.StreamInfo {
	return cluster.StreamInfo{StreamMeta: st.meta, Last: st.last, Done: st.done}
}

// first is the seq of the oldest event still held.
func (st *stream) first() uint64 {
	if len(st.events) == 0 {
		return st.last + 1
	}
	return st.events[0].Seq
}

// liveStreamLocked returns the stream if it exists and has not expired.
func (s *store) liveStreamLocked(id string, now time.Time) *stream {
	st := s.streams[id]
	if st == nil {
		return nil
	}
	if expired(st.expires, now) {
		s.removeStreamLocked(id, st)
		return nil
	}
	return st
}

// removeStreamLocked drops a stream's history and hints its followers to
// re-read (they will get ErrNotFound).
func (s *store) removeStreamLocked(id string, st *stream) {
	delete(s.streams, id)
	if g := s.groups[st.meta.Session]; g != nil {
		g.lru.Remove(st.elem)
		if g.lru.Len() == 0 {
			delete(s.groups, st.meta.Session)
		}
	}
	s.notifyLocked(id, cluster.Event{})
}

// useLocked makes st the most recently used stream of its session and
// evicts the least recently used ended ones beyond max. Streams that
// have not ended are kept: they may have live connections.
func (s *store) useLocked(st *stream, max int) {
	g := s.groups[st.meta.Session]
	if g == nil {
		g = &group{lru: list.New()}
		s.groups[st.meta.Session] = g
	}
	if st.elem == nil {
		st.elem = g.lru.PushFront(st)
	} else {
		g.lru.MoveToFront(st.elem)
	}
	excess := g.lru.Len() - max
	for e := g.lru.Back(); e != st.elem && excess > 0; {
		old := e.Value.(*stream)
		e = e.Prev()
		if old.done {
			s.removeStreamLocked(old.id, old)
			excess--
		}
	}
}

// ownedLocked returns the live stream if it belongs to session.
func (s *store) ownedLocked(session, id string, now time.Time) (*stream, error) {
	st := s.liveStreamLocked(id, now)
	if st == nil {
		return nil, fmt.Errorf("stream %q: %w", id, cluster.ErrNotFound)
	}
	if st.meta.Session != session {
		return nil, fmt.Errorf("stream %q: %w", id, cluster.ErrForbidden)
	}
	return st, nil
}

func (m *events) Open(ctx context.Context, id string, meta cluster.StreamMeta, lim cluster.Limits) error {
	s := (*store)(m)
	if err := s.check(ctx, "Events.Open"); err != nil {
		return err
	}
	lim = lim.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openLocked(id, meta, lim, s.now())
}

// openLocked opens stream id unless it exists (ErrForbidden when it is
// another session's).
func (s *store) openLocked(id string, meta cluster.StreamMeta, lim cluster.Limits, now time.Time) error {
	if st := s.liveStreamLocked(id, now); st != nil {
		if st.meta.Session != meta.Session {
			return fmt.Errorf("stream %q: %w", id, cluster.ErrForbidden)
		}
		return nil
	}
	st := &stream{id: id, meta: meta, expires: now.Add(lim.TTL)}
	s.streams[id] = st
	s.useLocked(st, lim.MaxStreams)
	return nil
}

func (m *events) Append(ctx context.Context, session, id string, data []byte, final bool, lim cluster.Limits) (uint64, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Events.Append"); err != nil {
		return 0, err
	}
	lim = lim.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	st, err := s.ownedLocked(session, id, now)
	if err != nil {
		return 0, err
	}
	if st.done {
		return 0, fmt.Errorf("stream %q: %w", id, errDone)
	}
	return s.appendLocked(st, data, final, lim, now), nil
}

// appendLocked adds an event to st, which has not ended, and returns its
// seq. The history keeps its own copy of data.
func (s *store) appendLocked(st *stream, data []byte, final bool, lim cluster.Limits, now time.Time) uint64 {
	data = append(data[:0:0], data...)
	st.last++
	ev := cluster.Event{Seq: st.last, Data: data, Final: final}
	st.events = append(st.events, ev)
	if n := len(st.events) - lim.MaxEvents; n > 0 {
		clear(st.events[:n])
		st.events = st.events[n:]
	}
	st.done = final
	st.expires = now.Add(lim.TTL)
	s.useLocked(st, lim.MaxStreams)
	s.notifyLocked(st.id, ev)
	return ev.Seq
}

func (m *events) AppendBatch(ctx context.Context, session, id string, data [][]byte, final bool, b cluster.Batch, lim cluster.Limits) (uint64, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Events.Append"); err != nil {
		return 0, err
	}
	if len(data) == 0 {
		return 0, fmt.Errorf("stream %q: an empty batch", id)
	}
	lim = lim.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if b.Open != nil {
		_ = s.openLocked(id, *b.Open, lim, now) // another session's: ownedLocked says so
	}
	st, err := s.ownedLocked(session, id, now)
	if err != nil {
		return 0, err
	}
	if b.Token != "" {
		for _, t := range st.tokens {
			if t.token == b.Token {
				return t.first, nil
			}
		}
	}
	if st.done {
		return 0, fmt.Errorf("stream %q: %w", id, errDone)
	}
	first := st.last + 1
	if b.Next != 0 && b.Next != first {
		return 0, fmt.Errorf("stream %q: the batch was to start at %d, the history ends at %d: %w", id, b.Next, st.last, cluster.ErrDiverged)
	}
	for i, d := range data {
		s.appendLocked(st, d, final && i == len(data)-1, lim, now)
	}
	if b.Token != "" {
		if len(st.tokens) == maxTokens {
			st.tokens = append(st.tokens[:0], st.tokens[1:]...)
		}
		st.tokens = append(st.tokens, batchToken{b.Token, first})
	}
	return first, nil
}

// maxTokens bounds the batch tokens a stream remembers (Batch.Token).
const maxTokens = 8

// batchToken is a recorded batch's Token and first seq.
type batchToken struct {
	token string
	first uint64
}

func (m *events) Read(ctx context.Context, session, id string, after uint64) ([]cluster.Event, cluster.StreamInfo, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Events.Read"); err != nil {
		return nil, cluster.StreamInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.ownedLocked(session, id, s.now())
	if err != nil {
		return nil, cluster.StreamInfo{}, err
	}
	info := st.info()
	if after >= st.last {
		return nil, info, nil
	}
	first := st.first()
	if after+1 < first {
		return nil, info, fmt.Errorf("stream %q: events %d..%d trimmed: %w", id, after+1, first-1, cluster.ErrEvicted)
	}
	return append([]cluster.Event(nil), st.events[after+1-first:]...), info, nil
}

func (m *events) SlideMany(ctx context.Context, streams []cluster.StreamRef, ttl time.Duration) error {
	s := (*store)(m)
	if err := s.check(ctx, "Events.SlideMany"); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("slide streams: ttl must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, ref := range streams {
		if st, err := s.ownedLocked(ref.Session, ref.Stream, now); err == nil {
			st.expires = now.Add(ttl)
		}
	}
	return nil
}

// Follow registers fn before returning, so every event appended after
// Follow returns is queued for it. Delivery runs on a goroutine of the
// follower's while it has events queued; when its queue overflows, events are dropped and fn then
// gets an Event with Seq 0 (re-read hint). Follow does not check that the
// stream exists: authorize with Read (cluster.Tail does).
func (m *events) Follow(ctx context.Context, _, id string, fn func(cluster.Event)) (func(), error) {
	s := (*store)(m)
	if err := s.check(ctx, "Events.Follow"); err != nil {
		return nil, err
	}
	q := newQueue(s.opts.QueueLen, fn, func() { fn(cluster.Event{}) })
	s.fmu.Lock()
	if s.listeners >= s.opts.MaxListeners {
		s.fmu.Unlock()
		return nil, fmt.Errorf("%d listeners: %w", s.opts.MaxListeners, cluster.ErrLimit)
	}
	set := s.followers[id]
	if set == nil {
		set = make(map[*queue[cluster.Event]]*store)
		s.followers[id] = set
	}
	set[q] = s
	s.listeners++
	s.fmu.Unlock()

	var once sync.Once
	cancel := func() {
		once.Do(func() {
			s.fmu.Lock()
			if set := s.followers[id]; set != nil {
				if _, ok := set[q]; ok {
					delete(set, q)
					s.listeners--
					if len(set) == 0 {
						delete(s.followers, id)
					}
				}
			}
			s.fmu.Unlock()
			q.close()
		})
	}
	stop := context.AfterFunc(ctx, cancel)
	return func() { stop(); cancel() }, nil
}

// notifyLocked queues ev for the stream's followers. It runs under s.mu,
// so followers see events in seq order; queue.push never blocks.
func (s *store) notifyLocked(id string, ev cluster.Event) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	for q, view := range s.followers[id] {
		if view.dropped("Events.deliver") {
			continue // a silent loss, as on a bus hiccup
		}
		if !q.push(ev) {
			s.log.Debug().Str("stream", id).Msg("follower queue full: event dropped")
		}
	}
}
