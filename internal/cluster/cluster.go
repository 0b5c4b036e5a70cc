// Package cluster defines the seams through which nodes share state: the
// session store, the per-stream event log, the message bus, membership
// leases, claims, the registry of features enabled at run time, the
// per-caller limiter and the records of durable tasks. Each seam has an
// in-memory implementation (package cluster/memory, a complete
// single-node backend) and a Redis one (package cluster/redis). Nothing above this package may assume one process: every
// piece of state that must survive a node or be seen by another node goes
// through these interfaces.
//
// Errors: implementations return ErrNotFound, ErrLimit, ErrEvicted and
// ErrForbidden (possibly wrapped) for the conditions callers branch on, and
// wrap every transport failure of the shared store in ErrUnavailable so the
// edge can answer 503.
package cluster

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrNotFound: the session, stream or key does not exist (never
	// existed, expired, or was ended).
	ErrNotFound = errors.New("cluster: not found")
	// ErrLimit: a configured bound (e.g. live sessions) is reached.
	ErrLimit = errors.New("cluster: limit reached")
	// ErrEvicted: the stream exists but events after the requested cursor
	// were trimmed from its history.
	ErrEvicted = errors.New("cluster: history evicted")
	// ErrForbidden: the stream belongs to another session.
	ErrForbidden = errors.New("cluster: stream belongs to another session")
	// ErrUnavailable: the shared store could not be reached.
	ErrUnavailable = errors.New("cluster: backend unavailable")
	// ErrDiverged: a stream's history no longer holds every event its
	// producer saw recorded (Batch.Next), as when the store failed over
	// to a replica that had not received them.
	ErrDiverged = errors.New("cluster: history lost recorded events")
)

// Backend bundles every seam. A node holds exactly one.
type Backend struct {
	Sessions SessionStore
	Events   EventLog
	Bus      Bus
	Members  Membership
	Claims   Claims
	Registry Registry
	Limiter  Limiter
	Tasks    TaskStore
	// Close releases the backend's resources (connections, goroutines).
	Close func() error
	// Ping checks that the shared store is reachable (readiness).
	Ping func(ctx context.Context) error
	// Ready reports, without I/O, whether the backend's live connections
	// (the bus) are up: while it is false, messages between nodes may be
	// lost, so work that depends on them must be refused. nil means
	// always ready.
	Ready func() bool
	// Current reports, at the call and without a round trip, whether
	// this node has received every bus message published up to
	// BusFresh ago and its bus connection is not known to be broken
	// (see BusFresh): what lets a node answer from a copy of shared
	// state that bus messages invalidate. It implies Ready. nil means
	// always (a backend whose bus is in-process).
	Current func() bool
	// Memory reports, without I/O, what the backend last read of the
	// store's memory policy (see StoreMemory); nil for a store that
	// never evicts what it holds.
	Memory func() StoreMemory
	// AppendLinger is how long a producer may hold a stream's
	// notifications for more of its events, and the store for other
	// writes, to share one round trip (see Batch.LingerUntil); 0: none.
	AppendLinger time.Duration
	// Name is "memory" or "redis".
	Name string
	// FollowPoll is how long a follower goes without re-reading a
	// stream's history when no event arrives (TailOptions.Poll); 0 means
	// DefaultTailPoll. A backend whose Follow never drops an event
	// without a re-read hint sets it long (LosslessFollowPoll): the poll
	// then only notices a stream that expired, and an idle follower
	// costs the store little.
	FollowPoll time.Duration
	// Remote is true when each call is a network round trip, so that
	// independent calls are worth running side by side. A backend in
	// the process (false) answers at once: a goroutine to overlap its
	// calls only queues the caller behind the node's other work.
	Remote bool
}

// StoreMemory is what a backend read of its store's memory policy.
// Every key of the deployment has a time to live, so a store that
// evicts such keys under memory pressure (Redis's volatile-* and
// allkeys-* policies with a maxmemory) loses sessions, streams, claims,
// leases and tasks to it.
type StoreMemory struct {
	// Policy is the eviction policy (Redis's maxmemory_policy) and
	// MaxMemory the limit in bytes (0: none): of a server that may
	// evict when there is one, else of the first server read.
	Policy    string
	MaxMemory int64
	// Evicting is true when a server's policy may evict the
	// deployment's keys.
	Evicting bool
	// Accepted is true when the operator accepted an evicting policy:
	// the node stays ready.
	Accepted bool
	// EvictedKeys is the keys the servers evicted since they started
	// (Redis's evicted_keys, summed).
	EvictedKeys int64
	// Checked is when the policy was read (zero: never yet).
	Checked time.Time
}

// BusFresh bounds how old the newest bus message a node is known to
// have received may be while Backend.Current reports true: every message
// published more than BusFresh before a call for which Current reported
// true had been handed to its subscribers by then. (The Redis backend
// pings its pub/sub connection every BusTick and counts a PING as
// answered once the hub dispatched its answer, which Redis sends after
// every message published before the PING.) It is shorter than
// coordinator.EchoWait on purpose: see the coordinator's echo.
const BusFresh = 250 * time.Millisecond

// BusTick is how often a backend with a remote bus proves its bus
// connection current (Backend.Current): a fraction of BusFresh, so that
// a late tick or two does not stop the answers.
const BusTick = 100 * time.Millisecond

// LosslessFollowPoll is the FollowPoll of a backend whose Follow drops
// no event without a re-read hint.
const LosslessFollowPoll = time.Minute

// SessionStore keeps legacy-era sessions as small string maps that any
// node can load. Fields are opaque to the store except for the reserved
// ones documented on the session package.
type SessionStore interface {
	// Create records a new live session. ttl is its idle timeout (sliding:
	// Load and Touch extend it). max caps the number of live sessions in
	// the whole deployment (0 = no cap); past it Create returns ErrLimit.
	// Creating an id that exists is an error. See CreateOptions.
	Create(ctx context.Context, id string, fields map[string]string, ttl time.Duration, max int, opts CreateOptions) error
	// Load returns a copy of the fields of a live session and slides its
	// expiry to now+ttl. ErrNotFound when unknown, expired or ended.
	// A holder that is not empty is recorded as holding a copy of the
	// session, atomically with the read (see Holders).
	Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error)
	// Touch slides the expiry without reading. ErrNotFound when not live.
	Touch(ctx context.Context, id string, ttl time.Duration) error
	// TouchMany is Touch of every id in one batch (one round trip where
	// the backend allows): live[i] is false when ids[i] is not live. An
	// error means none is known to have been touched.
	TouchMany(ctx context.Context, ids []string, ttl time.Duration) (live []bool, err error)
	// Set merges fields into a live session (other fields are kept),
	// clears its holders and returns them, atomically (see Holders).
	// ErrNotFound when not live; it never resurrects an ended session.
	Set(ctx context.Context, id string, fields map[string]string) (holders []Holder, err error)
	// End removes the session and everything stored under it: its event
	// histories, its subscriptions and its claims. It reports whether the
	// session was live. Ending an unknown session is not an error. See
	// EndOptions (and Holders: EndOptions.Holders receives them).
	End(ctx context.Context, id string, opts EndOptions) (bool, error)
	// Subscribe records that session id wants notifications/resources/updated
	// for uri; Unsubscribe removes that. Both need a live session
	// (ErrNotFound otherwise) and are idempotent.
	Subscribe(ctx context.Context, id, uri string) error
	Unsubscribe(ctx context.Context, id, uri string) error
	// Subscribers lists the live sessions subscribed to uri (any order).
	Subscribers(ctx context.Context, uri string) ([]string, error)
	// Scan lists live session ids page by page. Start with cursor "";
	// next == "" means the scan is complete. count is a hint. Every
	// session live for the whole scan is returned at least once.
	Scan(ctx context.Context, cursor string, count int) (ids []string, next string, err error)
	// Count returns the number of live sessions.
	Count(ctx context.Context) (int, error)
}

// Holders: a node that keeps a copy of a session (to answer from it
// without reading the store) names itself when it reads it (Load's
// holder, CreateOptions.Holder), in the same atomic step as the read.
// A change to the session (Set, End) clears the holders and returns
// them in its own atomic step, so the node that changes a session learns
// exactly which nodes may hold a copy read before the change, and need
// tell only those: a node absent from the set read the session after
// the change, or holds no copy. Holders are not fields: Load does not
// return them. A session has at most one entry per holder, the latest.
// Each comes with its age (on the store's clock), so that the changer
// can leave out those whose copies have expired. A Load that records a
// holder also forgets the holders recorded more than its ttl ago (a
// copy never outlives the session's idle timeout), so the holders of a
// long-lived session served by nodes that come and go stay bounded.

// Holder is a node recorded as holding a copy of a session, Age ago.
type Holder struct {
	Name string
	Age  time.Duration
}

// CreateOptions qualify SessionStore.Create.
type CreateOptions struct {
	// Holder, when not empty, is recorded as holding a copy of the new
	// session (see Holders).
	Holder string
	// Lease, when not nil, is a Limiter lease the session takes as it is
	// created, in the same round trip where the backend allows: the
	// session id leased in set Lease.Key for Lease.TTL, unless the set
	// holds Lease.Max unexpired members already (Limiter.Acquire). A
	// refused lease creates no session (Create returns a *LeaseRefused),
	// and a Create that fails leaves no lease behind (where the store
	// can still be reached).
	Lease *SessionLease
}

// SessionLease names a session's lease in a Limiter set.
type SessionLease struct {
	Key string
	TTL time.Duration
	Max int
}

// LeaseRefused is the error of a Create whose lease was refused: the
// set was full, and Wait is how long until its earliest member expires.
type LeaseRefused struct{ Wait time.Duration }

func (e *LeaseRefused) Error() string {
	return "lease refused: the set is full for " + e.Wait.String()
}

// EndOptions qualify SessionStore.End.
type EndOptions struct {
	// Match, when not empty, names fields a live session must have to be
	// ended (a missing field counts as ""); one that differs is left as
	// it is and reported as not live: a caller that must own a session
	// ends it without reading it first.
	Match map[string]string
	// Announce, when not nil, is published on the bus (as Bus.Publish
	// would) when this call ends a live session, in the same round trip
	// where the backend allows it; never when the session was not live.
	Announce *Notice
	// Lease, when not empty, names the Limiter set whose lease of the
	// session (member: its id) this call releases when it ends a live
	// session, in the same round trip where the backend allows, as
	// Limiter.Release would; never when the session was not live.
	Lease string
	// Holders, when not nil, is set to the holders the session had
	// when this call ended it (see Holders); nil when it was not live.
	Holders *[]Holder
}

// Notice is a bus message: Bus.Publish(ctx, Topic, Msg).
type Notice struct {
	Topic string
	Msg   []byte
}

// StreamMeta describes a stream when it is opened.
type StreamMeta struct {
	// Session owns the stream; only that session may read it.
	Session string
	// Owner names the process producing the stream's events, as it holds
	// its membership lease (node id and incarnation); "" for a stream any
	// node appends to, such as a session's GET stream.
	Owner string
	// Request is the JSON-RPC id key (jsonrpc.ID.Key) of the request whose
	// response ends the stream ("" for a GET stream).
	Request string
}

// Event is one entry of a stream's history.
type Event struct {
	// Seq numbers events of one stream from 1 without gaps.
	Seq uint64
	// Data is the payload (a JSON-RPC message); empty for a priming event.
	Data []byte
	// Final marks the event that ends the stream (the final response).
	Final bool
}

// StreamInfo is what Read returns besides the events.
type StreamInfo struct {
	StreamMeta
	// Last is the seq of the newest event (0 when none).
	Last uint64
	// Done is true once the final event has been appended.
	Done bool
}

// Limits bound the event log.
type Limits struct {
	// MaxEvents is the number of events kept per stream; older ones are
	// trimmed (reading before them gives ErrEvicted).
	MaxEvents int
	// MaxStreams is the number of streams per session that keep history;
	// appending to a stream makes it most recently used and the least
	// recently used ended streams (final event appended) beyond the
	// bound lose their history entirely. A stream that has not ended (a
	// GET stream, a POST stream before its final) is never evicted for
	// the bound, since a live connection may be reading it: it goes with
	// its TTL or its session. Their number is bounded by the requests a
	// session may run at once, plus its one GET stream.
	MaxStreams int
	// TTL is how long a stream's history lives after its last append
	// (a backend may refresh expiries lazily: at least 7/8 of it).
	TTL time.Duration
}

// Defaults of Limits, used for zero fields. They are the documented
// defaults of the node (mcp.HTTPOptions MaxEvents, MaxStreams and
// HistoryTTL take them from here).
const (
	DefaultMaxEvents  = 1000
	DefaultMaxStreams = 100
	DefaultStreamTTL  = 10 * time.Minute
)

// DefaultMaxSubscriptions bounds the resource subscriptions of one
// session when a backend's options leave it zero.
const DefaultMaxSubscriptions = 1024

// WithDefaults fills zero (or negative) fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxEvents <= 0 {
		l.MaxEvents = DefaultMaxEvents
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultMaxStreams
	}
	if l.TTL <= 0 {
		l.TTL = DefaultStreamTTL
	}
	return l
}

// EventLog is the shared, bounded history of every SSE stream. Appends
// also notify followers (see Follow), so a stream produced on one node
// can be followed live from another.
type EventLog interface {
	// Open creates a stream with the given id (unique per deployment) for
	// meta.Session. Opening an existing stream of the same session is a
	// no-op; of another session, ErrForbidden.
	Open(ctx context.Context, stream string, meta StreamMeta, lim Limits) error
	// Append adds an event to an open stream of session and returns its
	// seq. Seqs are allocated atomically, so any number of nodes may
	// append to one stream concurrently. final marks the end of the
	// stream; appending after the final event is an error. ErrNotFound
	// when the stream is unknown (never opened, expired, evicted or its
	// session ended); ErrForbidden when it is another session's.
	Append(ctx context.Context, session, stream string, data []byte, final bool, lim Limits) (uint64, error)
	// AppendBatch appends events (data, nil for a priming event) in
	// order, as many Appends would, in one round trip where the backend
	// allows, and returns the seq of the first; the others follow it
	// without a gap. final ends the stream with the last event. b opens
	// the stream first, checks where the batch lands and names it for
	// retries (see Batch). A call the backend retries appends once.
	AppendBatch(ctx context.Context, session, stream string, data [][]byte, final bool, b Batch, lim Limits) (uint64, error)
	// Read returns the events with Seq > after, oldest first, and the
	// stream's info (also returned with ErrEvicted). ErrNotFound when the stream is unknown; ErrForbidden
	// when it is another session's (so a caller cannot probe streams);
	// ErrEvicted when events after `after` were trimmed. Reading a
	// stream marks it followed (see Follow).
	Read(ctx context.Context, session, stream string, after uint64) ([]Event, StreamInfo, error)
	// Follow delivers, in order, events appended to stream to fn, until
	// cancel is called or ctx ends: every event appended after the call
	// returned and a Read of the stream (by anyone) then returned. A
	// backend may skip notifying a stream nobody has read (Redis
	// publishes nothing for it), so a follower Reads after it follows,
	// as Tail does. Delivery is best effort (a bus hiccup can drop
	// events): callers combine it with Read and fill gaps by seq; see
	// Tail. An event with Seq 0 is a hint that the follower missed
	// something (overflow, reconnect, the stream was removed) and must
	// Read again. Follow does not authorise: callers Read, which checks
	// the session. fn must not block for long. session is the stream's
	// (a backend may name the stream's channel after it).
	Follow(ctx context.Context, session, stream string, fn func(Event)) (cancel func(), err error)
	// SlideMany makes the history of each stream that still exists live
	// ttl from now, as an append would (missing streams are skipped, not
	// recreated), in one batch: a node slides the streams its open
	// connections read, so an idle stream's history outlives it by ttl.
	// The keys of one stream stay in one slot (Redis Cluster).
	SlideMany(ctx context.Context, streams []StreamRef, ttl time.Duration) error
}

// Batch qualifies an AppendBatch; the zero Batch appends as Append does.
type Batch struct {
	// Open, when set, opens the stream first as Open would (of session
	// Open.Session), so a producer folds its stream's creation into its
	// first append.
	Open *StreamMeta
	// Next, when not 0, is the seq the batch's first event must get: a
	// stream whose last event is not Next-1 refuses the batch with
	// ErrDiverged (and a stream that is gone, with ErrNotFound). The
	// only writer of a stream names it, so that a history that lost
	// events it saw recorded (the store failed over to a replica that
	// had not received them) is noticed at the next append, not carried
	// on with a gap.
	Next uint64
	// Token names the batch. When an error leaves it unknown whether a
	// try was recorded (its reply was lost), a retry with the same Token
	// returns the seq the recorded try got instead of appending again,
	// for the stream's recent batches (a few hundred bytes of tokens).
	// Empty: the backend names each call.
	Token string
	// LingerUntil, when set, lets the backend hold the append until then
	// for other writes to share its round trip (Backend.AppendLinger):
	// the batch holds only notifications, which nothing waits on.
	LingerUntil time.Time
	// Hurry, when closed, ends that wait at once (the producer got an
	// event that may not wait, such as a server→client request, and it
	// goes after this batch).
	Hurry <-chan struct{}
}

// StreamRef names a stream of a session.
type StreamRef struct{ Session, Stream string }

// ReceiversUnknown is what Bus.Publish reports when the backend cannot
// count the subscribers that received a message.
const ReceiversUnknown = -1

// Bus carries small messages between nodes. Delivery is at most once and
// only to subscribers connected at the time of Publish.
type Bus interface {
	// Publish sends msg to every current subscriber of topic on any node
	// and reports how many received it. 0 means nobody did (no
	// subscriber, or the subscriber's connection is down): a message
	// someone waits for was lost, and the caller must say so. A backend
	// that multiplexes a process's subscriptions over one connection
	// (Redis) counts that process once. ReceiversUnknown means the backend
	// cannot tell (Redis Cluster, whose PUBLISH counts only the
	// subscribers of the shard it reached).
	Publish(ctx context.Context, topic string, msg []byte) (int, error)
	// Subscribe calls fn for each message published to topic until
	// cancel is called. Subscribe returns once the subscription is
	// active, so a Publish that starts after it returns is seen. fn runs
	// on the bus's own goroutine: it must not block for long.
	Subscribe(ctx context.Context, topic string, fn func([]byte)) (cancel func(), err error)
	// OnReconnect registers fn to run after the bus lost and regained its
	// connection (messages in between may be lost): caches must be
	// flushed and streams re-read. The memory bus never calls it.
	OnReconnect(fn func())
}

// Membership tracks live nodes through leases. A lease names one
// process, not a node id that a restarted process may reuse: callers
// pass the node id with an incarnation drawn at start, so a restarted
// node's heartbeats never keep its previous process alive.
type Membership interface {
	// Heartbeat registers or renews node's lease for ttl.
	Heartbeat(ctx context.Context, node string, ttl time.Duration) error
	// Alive reports whether node holds an unexpired lease.
	Alive(ctx context.Context, node string) (bool, error)
	// Leave drops node's lease at once (graceful shutdown).
	Leave(ctx context.Context, node string) error
	// Members lists nodes with unexpired leases.
	Members(ctx context.Context) ([]string, error)
}

// Registry records the enabled state of features (tools, prompts,
// resources) that a deployment changed at run time, so that every node
// serves the same lists. Keys are opaque to the store; callers bound how
// many there are (one per registered feature). Entries do not expire:
// they are the deployment's configuration, not a client's state.
type Registry interface {
	// Swap records key as enabled (on) or disabled and returns the state
	// it had before, atomically: concurrent calls are applied one after
	// the other, so of two Swap(on) from different nodes exactly one sees
	// was != on. A key with nothing recorded has the state unset (the
	// default every node registers).
	Swap(ctx context.Context, key string, on, unset bool) (was bool, err error)
	// Toggle flips the state of key atomically (from unset when nothing
	// is recorded) and returns the new state: n concurrent calls flip it
	// n times.
	Toggle(ctx context.Context, key string, unset bool) (on bool, err error)
	// All returns every recorded state.
	All(ctx context.Context) (map[string]bool, error)
}

// Held names a claim and the owner that holds it.
type Held struct{ Key, Owner string }

// Claims are leased, named ownership records: which connection holds a
// session's GET stream, which node follows a stream, one-time tokens.
// A key of the form "session:<id>:<rest>" (no ':' inside the id) belongs
// to that session: SessionStore.End releases it. Once tokens live in a
// namespace of their own and outlive sessions until their ttl.
type Claims interface {
	// Claim makes owner the holder of key for ttl, replacing any holder
	// (take-over), and returns the previous holder ("" if none or expired).
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (prev string, err error)
	// Renew extends owner's claim; false when owner no longer holds it.
	Renew(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	// RenewMany is Renew of every claim in one batch (one round trip
	// where the backend allows): held[i] is false when claims[i].Owner no
	// longer holds claims[i].Key.
	RenewMany(ctx context.Context, claims []Held, ttl time.Duration) (held []bool, err error)
	// Release drops the claim if owner holds it.
	Release(ctx context.Context, key, owner string) error
	// Holder returns the current holder ("" if none).
	Holder(ctx context.Context, key string) (string, error)
	// Once returns true the first time key is seen within ttl, false
	// after (single-use tokens).
	Once(ctx context.Context, key string, ttl time.Duration) (bool, error)
}
