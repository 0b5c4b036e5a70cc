package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// DefaultMaxCached is Options.MaxCached when zero.
const DefaultMaxCached = 50000

// Options configure a Store.
type Options struct {
	// TTL is the idle timeout of a session: Create sets it, and Load and
	// Touch slide it. It must be positive.
	TTL time.Duration
	// MaxSessions caps live sessions in the deployment (0: no cap);
	// past it Create fails with an error wrapping cluster.ErrLimit.
	MaxSessions int
	// CacheTTL, when positive, lets Load answer from a node-local copy
	// of a session read (or created) at most that long ago, instead of
	// reading the store (see Store). It is capped at TTL/4, so a copy
	// never outlives the stored session's idle timeout.
	CacheTTL time.Duration
	// MaxCached bounds the cached sessions (default DefaultMaxCached);
	// past it an arbitrary one is dropped.
	MaxCached int
	// Live reports whether Invalidate reaches this node for changes made
	// on the others (the bus is up). While it is false the cache is
	// neither filled nor used. nil means always.
	Live func() bool
	// Current reports, before each answer from the cache, whether
	// Invalidate has reached this node for every change made on the
	// others up to a bound ago (coordinator.Node.BusCurrent: the bus
	// connection open, not known broken, and proven current within
	// cluster.BusFresh). While it is false Load reads the store. nil means
	// Live.
	Current func() bool
	// Holder names this node in the store's holders of the sessions it
	// caches (cluster.Holders), so that a change made on another node
	// reports it among the nodes to tell. Empty: none recorded.
	Holder string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Store keeps sessions in a cluster.SessionStore. Every method costs one
// call of the underlying store (Load none when it hits the cache).
//
// The cache: with Options.CacheTTL > 0, a session created or read on this
// node is kept that long (at most TTL/4) and Load answers from it. What
// a session holds changes after initialize in two ways only: its log
// level (SetLogLevel) and its end (End, or its idle timeout); the rest
// (version, capabilities, client info, principal, created) is fixed at
// Create, and subscriptions are not read with it. A change made through
// a Store drops this node's copy at once; the caller tells the other
// nodes over the bus, which call Invalidate, and answers its client only
// once every node that may hold a copy has acknowledged that
// (coordinator.Echo), so the client's next request finds the change on
// any node. The store names those nodes: each node caching a session
// records itself as a holder in the read (or Create) that gave it the
// copy (Options.Holder, cluster.Holders), and the change returns the
// holders recorded since the previous change (SetLogLevel, End), less
// those whose copies have expired (liveHolders). A node
// that does not acknowledge within the bounded wait (coordinator.EchoWait:
// it is stalled, or cut off, or its bus is down) does not answer from
// its copy either: Load uses the cache only while Options.Live holds,
// which requires the node to have received every change published up to
// cluster.BusFresh ago, less than EchoWait (the argument is in the
// coordinator's echo.go). A load that an invalidation overtakes (it read
// the store before the change and returns after the invalidation) is not
// cached, so a stale copy never outlives the invalidation that should
// have dropped it.
//
// Outages: Current is asked before every hit, and looks at the bus connection's
// socket then (cluster.Backend.Current), so a Redis that died or closed
// the connection is seen by the very next request, which reads the store
// and fails (never a silent answer from a node-local copy); a connection
// that stops delivering without closing (a partition) stops the hits
// within BusFresh. While Live is false (the bus known down) nothing is
// cached; call Flush when invalidations flow again after a loss.
//
// What remains: a node that joined and is not yet in the changer's view
// of the members, answering from a copy it read before the change, until
// the message reaches it; a copy made before an outage, used between the
// bus's return and the Flush of the node's resync (which runs right
// after); and a session the store drops by itself (eviction under memory
// pressure). The cache's lifetime bounds them (a copy answers at most
// CacheTTL after it was read). The idle timeout is not among them: the
// read (or Create) behind a copy set the session's expiry TTL ahead, and
// a copy lives at most TTL/4.
//
// Idle timeout: a cache hit does not reach the store, so it does not
// slide the session's TTL there. Hits are recorded, and the node's
// upkeep slides them in one batch (Hits, then TouchMany) every TTL/4;
// and as a copy lives at most TTL/4, a session in use is read (and slid)
// again well before its TTL runs out, even when a batch fails.
type Store struct {
	be   cluster.SessionStore
	opts Options

	mu     sync.Mutex
	cached map[string]*Session
	hits   map[string]struct{} // answered from the cache since Hits last ran
	gen    uint64              // counts invalidations: a load overtaken by one is not cached
	// held: when this node last recorded itself as a holder of each
	// session (before the call that recorded it), for Invalidate's
	// answer; entries older than heldFor are pruned.
	held map[string]time.Time
}

// heldMargin is added to CacheTTL in the holders' filter (liveHolders): room
// for the clocks of the store and of the nodes to tick at slightly
// different rates.
const heldMargin = 100 * time.Millisecond

// NewStore returns a Store over be.
func NewStore(be cluster.SessionStore, opts Options) *Store {
	if opts.MaxCached <= 0 {
		opts.MaxCached = DefaultMaxCached
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TTL > 0 {
		opts.CacheTTL = min(opts.CacheTTL, opts.TTL/4)
	}
	return &Store{be: be, opts: opts, cached: map[string]*Session{}, hits: map[string]struct{}{}, held: map[string]time.Time{}}
}

// Create records a new session under s.ID, takes lease with it when not
// nil (cluster.CreateOptions), and caches a copy of it. A zero s.Created
// is set to now. It fails like cluster.SessionStore.Create (ErrLimit past
// MaxSessions, a *cluster.LeaseRefused) or like Encode.
func (st *Store) Create(ctx context.Context, s *Session, lease *cluster.SessionLease) error {
	if s.Created.IsZero() {
		s.Created = st.opts.Now()
	}
	f, err := Encode(s)
	if err != nil {
		return err
	}
	caching := st.caching()
	co := cluster.CreateOptions{Lease: lease}
	start := st.opts.Now()
	if caching {
		co.Holder = st.hold(s.ID, start)
	}
	if err := st.be.Create(ctx, s.ID, f, st.opts.TTL, st.opts.MaxSessions, co); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.LastUsed = s.Created
	if caching && st.caching() {
		// The requests that follow initialize (notifications/initialized,
		// the first calls) need not read what was just written.
		c := *s
		c.LastUsed = start
		st.mu.Lock()
		st.keep(&c)
		st.mu.Unlock()
	}
	return nil
}

// Load returns session id and slides its idle timeout (or answers from
// the cache). An unknown, expired or ended session is an error wrapping
// cluster.ErrNotFound; a record that does not decode one wrapping
// ErrCorrupt or ErrFormat. The session is shared with the cache: do not
// change it.
func (st *Store) Load(ctx context.Context, id string) (*Session, error) {
	caching := st.caching()
	var gen uint64
	if caching {
		now := st.opts.Now()
		st.mu.Lock()
		gen = st.gen
		s := st.cached[id]
		st.mu.Unlock()
		// Current after the lookup, so that only a copy pays it, and the
		// copy looked up again after it: an invalidation it vouches for
		// has dropped the copy by the time it returns.
		if s != nil && now.Sub(s.LastUsed) < st.opts.CacheTTL && st.current() {
			st.mu.Lock()
			hit := st.cached[id] == s
			if hit {
				st.hits[id] = struct{}{}
			}
			st.mu.Unlock()
			if hit {
				return s, nil
			}
		}
	}
	holder, start := "", st.opts.Now()
	if caching {
		holder = st.hold(id, start)
	}
	f, err := st.be.Load(ctx, id, st.opts.TTL, holder)
	if err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			st.Invalidate(id)
		}
		return nil, fmt.Errorf("load session: %w", err)
	}
	s, err := Decode(id, f)
	if err != nil {
		return nil, err
	}
	// A copy is as old as the read that began at start: the store's
	// record of this node as a holder is no older (liveHolders).
	s.LastUsed = start
	if caching && st.caching() {
		st.mu.Lock()
		if st.gen == gen {
			st.keep(s)
		}
		st.mu.Unlock()
	}
	return s, nil
}

// hold notes that this node records itself (Options.Holder, which it
// returns) as a holder of session id in a call beginning at now.
func (st *Store) hold(id string, now time.Time) string {
	if st.opts.Holder == "" {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.held) >= st.opts.MaxCached {
		st.pruneHeld(now)
	}
	st.held[id] = now
	return st.opts.Holder
}

// heldFor is how long after it recorded itself as a holder of a session
// this node acknowledges its invalidations (Invalidate): longer than the
// changer counts the record (liveHolders), by a CacheTTL and a second, since
// the record is made during the read that began the holding, and that
// read may be slow.
func (st *Store) heldFor() time.Duration { return 2*st.opts.CacheTTL + time.Second }

// pruneHeld drops the holdings older than heldFor, and an arbitrary half
// of those left when still past MaxCached; st.mu is held.
func (st *Store) pruneHeld(now time.Time) {
	for id, at := range st.held {
		if now.Sub(at) >= st.heldFor() {
			delete(st.held, id)
		}
	}
	for id := range st.held {
		if len(st.held) < st.opts.MaxCached/2 {
			break
		}
		delete(st.held, id)
	}
}

// liveHolders returns the names of holders (as returned with a change by the
// store) whose copies may still be in use: those recorded less than
// CacheTTL (and a margin) ago. A copy lives CacheTTL from the start of
// the read that recorded its holder, which is no later than the record.
func (st *Store) liveHolders(holders []cluster.Holder) []string {
	if holders == nil {
		return nil
	}
	out := make([]string, 0, len(holders))
	for _, h := range holders {
		if h.Age < st.opts.CacheTTL+heldMargin {
			out = append(out, h.Name)
		}
	}
	return out
}

// keep caches s, dropping an arbitrary session past MaxCached; st.mu is
// held.
func (st *Store) keep(s *Session) {
	if _, ok := st.cached[s.ID]; !ok && len(st.cached) >= st.opts.MaxCached {
		for k := range st.cached { // an arbitrary one
			delete(st.cached, k)
			break
		}
	}
	st.cached[s.ID] = s
}

// Count returns the number of live sessions in the deployment.
func (st *Store) Count(ctx context.Context) (int, error) { return st.be.Count(ctx) }

// Caches reports whether this Store keeps copies of sessions
// (Options.CacheTTL > 0).
func (st *Store) Caches() bool { return st.opts.CacheTTL > 0 }

// Hits returns the sessions Load answered from the cache since the last
// call, which did not slide their idle timeout in the store: the caller
// slides them (TouchMany).
func (st *Store) Hits() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.hits) == 0 {
		return nil
	}
	ids := make([]string, 0, len(st.hits))
	for id := range st.hits {
		ids = append(ids, id)
	}
	clear(st.hits)
	return ids
}

// caching reports whether Load may use the cache now.
func (st *Store) caching() bool {
	return st.opts.CacheTTL > 0 && (st.opts.Live == nil || st.opts.Live())
}

// current reports whether Load may answer from the cache now.
func (st *Store) current() bool {
	if st.opts.Current == nil {
		return st.opts.Live == nil || st.opts.Live()
	}
	return st.opts.Current()
}

// Touch slides the idle timeout of session id without reading it. An
// ended session is an error wrapping cluster.ErrNotFound.
func (st *Store) Touch(ctx context.Context, id string) error {
	if err := st.be.Touch(ctx, id, st.opts.TTL); err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			st.Invalidate(id)
		}
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// TouchMany slides the idle timeout of every session of ids in one
// batch; live[i] is false when ids[i] has ended.
func (st *Store) TouchMany(ctx context.Context, ids []string) (live []bool, err error) {
	live, err = st.be.TouchMany(ctx, ids, st.opts.TTL)
	if err != nil {
		return nil, fmt.Errorf("touch sessions: %w", err)
	}
	for i, ok := range live {
		if !ok {
			st.Invalidate(ids[i])
		}
	}
	return live, nil
}

// SetLogLevel records the log level of session id and drops this node's
// cached copy; the caller tells the other nodes to Invalidate theirs:
// holders are the nodes that may hold one (cluster.Holders, filtered by
// liveHolders).
func (st *Store) SetLogLevel(ctx context.Context, id, level string) (holders []string, err error) {
	if level == "" {
		return nil, fmt.Errorf("session %q: empty log level", id)
	}
	h, err := st.be.Set(ctx, id, map[string]string{fieldLevel: level})
	st.Invalidate(id)
	if err != nil {
		return nil, fmt.Errorf("set log level: %w", err)
	}
	return st.liveHolders(h), nil
}

// Subscribe records that session id wants notifications/resources/updated
// for uri. Past the store's bound it fails wrapping cluster.ErrLimit.
func (st *Store) Subscribe(ctx context.Context, id, uri string) error {
	if err := st.be.Subscribe(ctx, id, uri); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// Unsubscribe removes the subscription of session id to uri.
func (st *Store) Unsubscribe(ctx context.Context, id, uri string) error {
	if err := st.be.Unsubscribe(ctx, id, uri); err != nil {
		return fmt.Errorf("unsubscribe: %w", err)
	}
	return nil
}

// End removes session id and what is stored under it, drops this node's
// cached copy, and reports whether the session was live; the caller
// tells the other nodes, or passes announce (published with the end, see
// cluster.EndOptions), and releases its lease in the Limiter set lease
// when not empty. A session of another principal than principal is
// kept and reported as not live, exactly as one that does not exist. It
// does not read the session: a record that does not decode is ended too.
// holders are the nodes that may hold a copy of the session it ended
// (cluster.Holders; nil when not known).
func (st *Store) End(ctx context.Context, id, principal string, announce *cluster.Notice, lease string) (live bool, holders []string, err error) {
	var h []cluster.Holder
	live, err = st.be.End(ctx, id, cluster.EndOptions{Match: map[string]string{fieldPrincipal: principal}, Announce: announce, Lease: lease, Holders: &h})
	st.Invalidate(id)
	if err != nil {
		return live, nil, fmt.Errorf("end session: %w", err)
	}
	return live, st.liveHolders(h), nil
}

// Invalidate drops this node's cached copy of session id, and keeps a
// load already under way from caching what it read. It reports whether
// this node recorded itself as a holder of the session recently (see
// heldFor), so that the changer may be waiting for its acknowledgement. Its holdings are kept: one recorded by a load that
// ran after the change would otherwise be forgotten while the store
// still names it.
func (st *Store) Invalidate(id string) (held bool) {
	now := st.opts.Now()
	st.mu.Lock()
	st.gen++
	delete(st.cached, id)
	if at, ok := st.held[id]; ok {
		held = now.Sub(at) < st.heldFor()
	}
	st.mu.Unlock()
	return held
}

// Flush drops every cached session (invalidations may have been lost).
func (st *Store) Flush() {
	st.mu.Lock()
	st.gen++
	clear(st.cached)
	st.mu.Unlock()
}
