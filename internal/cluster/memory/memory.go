// Package memory is the single-node cluster backend: every seam of package
// cluster kept in process memory. It is the embedded default of a node run
// without Redis, so it is complete and bounded rather than a test double:
// sessions expire on a sliding TTL (lazily on access and by a periodic
// sweep), the session cap is enforced, event histories are trimmed per
// stream and evicted per session (LRU), and every table has a bound.
//
// Conventions shared with the Redis backend:
//
//   - Claim keys of the form "session:<id>:<rest>" (where <id> holds no
//     ':') belong to session <id>: SessionStore.End releases them. Once
//     tokens live in their own namespace and are never released by End.
//   - Zero fields of cluster.Limits take the defaults cluster.DefaultMaxEvents,
//     cluster.DefaultMaxStreams and cluster.DefaultStreamTTL.
//   - Streams are grouped for MaxStreams by StreamMeta.Session, whether or
//     not that session exists in the SessionStore; a session's expiry drops
//     the session and its subscriptions, while its streams live on until
//     their own TTL (End drops them at once).
//   - Follow may deliver an Event with Seq 0: a hint that the stream
//     changed out of band (removed, or deliveries were dropped) and that
//     the follower should Read. cluster.Tail handles it.
//
// Fault injection: Options.Fault is consulted at the start of every
// operation with the operation's name ("Sessions.Load", "Events.Append",
// "Bus.Publish", ...) and, per delivery, with "Events.deliver" and
// "Bus.deliver"; a non-nil result fails the operation (or drops the
// delivery). Tests use it to simulate an unreachable store or a lossy bus.
// View gives one backend several views of the same state, each with a
// hook of its own (the in-process cluster harness gives each node one),
// consulted with the same names after Options.Fault; a delivery consults
// the hook of the view that subscribed or followed.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Defaults for zero fields of Options and cluster.Limits.
const (
	DefaultSweepInterval = 10 * time.Second
	DefaultMaxKeys       = 1 << 20
	DefaultMaxListeners  = 1 << 16
	DefaultQueueLen      = 1024
)

// Options configures the memory backend. The zero value is ready to use.
type Options struct {
	// Now is the clock (time.Now when nil). Tests inject a fake clock to
	// drive expiry without sleeping.
	Now func() time.Time
	// Logger receives debug messages (dropped deliveries, sweeps).
	// The zero Logger discards everything.
	Logger zerolog.Logger
	// SweepInterval is how often expired entries are reclaimed in the
	// background (DefaultSweepInterval when 0; negative disables the
	// sweeper, leaving lazy expiry on access only).
	SweepInterval time.Duration
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (cluster.DefaultMaxSubscriptions when 0); past it Subscribe returns
	// cluster.ErrLimit.
	MaxSubscriptions int
	// MaxKeys bounds the live claims plus once tokens (DefaultMaxKeys when
	// 0); past it Claim and Once return cluster.ErrLimit. The limiter's
	// buckets plus sets have a budget of the same size of their own.
	MaxKeys int
	// MaxListeners bounds the open Follow plus Bus subscriptions
	// (DefaultMaxListeners when 0); past it they return cluster.ErrLimit.
	MaxListeners int
	// QueueLen bounds each follower's and bus subscriber's delivery queue
	// (DefaultQueueLen when 0). Deliveries beyond it are dropped.
	QueueLen int
	// Fault, when set, is called with the operation name before each
	// operation; a non-nil error is returned instead of performing it.
	// See the package documentation for names.
	Fault func(op string) error
}

// New returns a memory backend. Close stops its sweeper and every
// follower and subscriber goroutine.
func New(opts Options) *cluster.Backend {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = cluster.DefaultMaxSubscriptions
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	if opts.MaxListeners <= 0 {
		opts.MaxListeners = DefaultMaxListeners
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	s := newStore(opts)
	b := &bus{store: s, subs: &subscriptions{topics: make(map[string]map[*queue[[]byte]]*store)}}
	s.bus = b
	if opts.SweepInterval > 0 {
		s.wg.Add(1)
		go s.sweepLoop(opts.SweepInterval)
	}
	return s.backend(b, func() error {
		s.close()
		b.close()
		s.wg.Wait()
		return nil
	})
}

// View returns another view of b, a backend New (or View) returned: the
// same state, whose every operation also consults fault, after the hooks
// b consults, with the names of Options.Fault ("Sessions.Load", ...,
// "Events.deliver" and "Bus.deliver" for deliveries to the followers and
// subscribers made through the view). Closing the view does nothing;
// closing b ends it too. It reports false when b is not a memory backend.
func View(b *cluster.Backend, fault func(op string) error) (*cluster.Backend, bool) {
	seam, ok := b.Sessions.(*sessions)
	if !ok {
		return nil, false
	}
	parent := (*store)(seam)
	v := &store{state: parent.state, fault: fault}
	if up := parent.fault; up != nil {
		v.fault = func(op string) error {
			if err := up(op); err != nil || fault == nil {
				return err
			}
			return fault(op)
		}
	}
	return v.backend(&bus{store: v, subs: parent.bus.subs}, func() error { return nil }), true
}

// backend returns the seams of view s, with its bus b and its Close.
func (s *store) backend(b *bus, closeFn func() error) *cluster.Backend {
	// A follower's overflow and a removed stream send a re-read hint;
	// only an injected fault drops an event silently.
	followPoll := cluster.LosslessFollowPoll
	if s.opts.Fault != nil || s.fault != nil {
		followPoll = 0
	}
	return &cluster.Backend{
		Sessions:   (*sessions)(s),
		Events:     (*events)(s),
		Bus:        b,
		Members:    (*members)(s),
		Claims:     (*claims)(s),
		Registry:   (*registry)(s),
		Limiter:    (*limiter)(s),
		Tasks:      (*tasks)(s),
		Close:      closeFn,
		Ping:       func(ctx context.Context) error { return s.check(ctx, "Ping") },
		Name:       "memory",
		FollowPoll: followPoll,
	}
}

// errClosed is returned by every operation after Close.
var errClosed = fmt.Errorf("memory backend closed: %w", cluster.ErrUnavailable)

// store is one view of the state behind every seam: the state, and the
// view's own fault hook (nil for the view New returns; see View).
type store struct {
	*state
	fault func(op string) error
}

// state is what every view of a backend shares. One mutex guards it;
// followers have their own (see events.go) so that registering a follower
// never waits for an Append.
type state struct {
	opts Options
	log  zerolog.Logger
	bus  *bus // New's view of the bus: publishes the announcements of Sessions.End

	closed atomic.Bool

	mu       sync.Mutex
	sessions map[string]*session
	expiry   sessionHeap                    // live sessions by expiry
	byURI    map[string]map[string]struct{} // uri → subscribed session ids
	streams  map[string]*stream
	groups   map[string]*group // streams by owning session
	claims   map[string]*claim
	bySess   map[string]map[string]struct{} // session id → its claim keys
	once     map[string]time.Time
	nodes    map[string]time.Time
	features map[string]bool                 // Registry
	buckets  map[string]*bucket              // Limiter token buckets
	sets     map[string]map[string]time.Time // Limiter sets: member → lease expiry
	tasks    map[string]*taskRec
	runIdx   map[string]map[string]time.Time // runner → task id → expiry

	fmu       sync.Mutex
	followers map[string]map[*queue[cluster.Event]]*store // stream → follower → the view it followed through
	listeners int                                         // open followers plus bus subscriptions (under fmu)

	stop chan struct{}
	wg   sync.WaitGroup
}

func newStore(opts Options) *store {
	return &store{state: &state{
		opts:      opts,
		log:       opts.Logger.With().Str("component", "cluster.memory").Logger(),
		sessions:  make(map[string]*session),
		byURI:     make(map[string]map[string]struct{}),
		streams:   make(map[string]*stream),
		groups:    make(map[string]*group),
		claims:    make(map[string]*claim),
		bySess:    make(map[string]map[string]struct{}),
		once:      make(map[string]time.Time),
		nodes:     make(map[string]time.Time),
		buckets:   make(map[string]*bucket),
		sets:      make(map[string]map[string]time.Time),
		followers: make(map[string]map[*queue[cluster.Event]]*store),
		stop:      make(chan struct{}),
	}}
}

// check runs at the start of every operation: it honours ctx, Close and
// the fault hooks (Options.Fault, then the view's).
func (s *store) check(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return errClosed
	}
	return s.faulted(op)
}

// faulted returns the error of the first fault hook that fails op.
func (s *store) faulted(op string) error {
	if s.opts.Fault != nil {
		if err := s.opts.Fault(op); err != nil {
			return err
		}
	}
	if s.fault != nil {
		return s.fault(op)
	}
	return nil
}

// dropped reports whether a fault hook drops a delivery to view s.
func (s *store) dropped(op string) bool { return s.faulted(op) != nil }

func (s *store) now() time.Time { return s.opts.Now() }

// expired reports whether a deadline has passed at now.
func expired(deadline, now time.Time) bool { return !now.Before(deadline) }

func (s *store) close() {
	if s.closed.Swap(true) {
		return
	}
	close(s.stop)

	s.fmu.Lock()
	for id, set := range s.followers {
		for q := range set {
			q.close()
		}
		delete(s.followers, id)
	}
	s.fmu.Unlock()
}

func (s *store) sweepLoop(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep reclaims everything that expired. Access paths expire lazily too,
// so the sweep only bounds memory; it never changes what callers see.
func (s *store) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := s.pruneSessionsLocked(now)
	for uri, ids := range s.byURI {
		for id := range ids {
			if _, ok := s.sessions[id]; !ok {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(s.byURI, uri)
		}
	}
	streams := 0
	for id, st := range s.streams {
		if expired(st.expires, now) {
			s.removeStreamLocked(id, st)
			streams++
		}
	}
	s.pruneKeysLocked(now)
	s.pruneLimiterLocked(now)
	s.pruneTasksLocked(now)
	for node, exp := range s.nodes {
		if expired(exp, now) {
			delete(s.nodes, node)
		}
	}
	if n > 0 || streams > 0 {
		s.log.Debug().Int("sessions", n).Int("streams", streams).Msg("swept expired entries")
	}
}

// errDone is returned by Append after the final event.
var errDone = errors.New("cluster: stream already ended")
