package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/callers"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Config wires a Node: the node's own settings (leases, histories,
// caches, waiters, records, tasks), with their defaults (WithDefaults,
// which NewNode applies to zero fields), and its seams.
type Config struct {
	Backend *cluster.Backend
	// NodeID names the node; its instance name adds a random incarnation
	// and the node's format (FormatSuffix).
	NodeID string
	// Waiters, when set, are the node's waiters (tests share them);
	// otherwise NewNode makes them, bounded by MaxWaiters in all and
	// MaxWaitersPerSession for one session.
	Waiters              *Coordinator
	MaxWaiters           int
	MaxWaitersPerSession int
	// Sessions, when set, is the node's session store; otherwise NewNode
	// makes it with Session (its Holder, Live and Current are the
	// node's).
	Sessions *session.Store
	Session  session.Options
	// Callers are the per-caller limits of the deployment (off when their
	// Rate is 0; Callers.Nodes is the node's count of live nodes, the
	// TTLs the node's when 0).
	Callers callers.Options
	// LeaseTTL is the membership lease (renewed every LeaseTTL/3), which
	// also keeps the claims of this process's streams (see ClaimTTL).
	LeaseTTL time.Duration
	// SessionTTL is the idle timeout of sessions: an open GET stream
	// slides it every SessionTTL/4.
	SessionTTL time.Duration
	// HistoryTTL is how long a stream's history is kept after its last
	// event, and a cancellation remembered.
	HistoryTTL time.Duration
	// MaxEvents and MaxStreams bound a stream's history and a session's
	// streams.
	MaxEvents, MaxStreams int
	// MaxFanOuts bounds the fan-outs running at once.
	MaxFanOuts int
	// RecordRetry is how long a POST stream's producer keeps trying to
	// record a batch of events while the store is unavailable before the
	// stream ends at it (see Producer.Add).
	RecordRetry time.Duration
	// RecordTimeout bounds the attempts to record a POST stream's final
	// message later, when the store refused it (see PostStream.Close).
	RecordTimeout time.Duration
	Log           zerolog.Logger
	Metrics       *telemetry.Metrics
	// Refresh reloads what the adapter keeps of cluster state (the
	// enabled state of features): on every heartbeat, after the bus
	// comes back, and soon after a RegistryChanged message. It runs on
	// the heartbeat goroutine.
	Refresh func(ctx context.Context)
}

// WithDefaults returns c with every zero setting at its default.
func (c Config) WithDefaults() Config {
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setN := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.LeaseTTL, DefaultLeaseTTL)
	set(&c.SessionTTL, DefaultSessionTTL)
	set(&c.HistoryTTL, cluster.DefaultStreamTTL)
	set(&c.RecordRetry, DefaultRecordRetry)
	set(&c.RecordTimeout, DefaultRecordTimeout)
	setN(&c.MaxEvents, cluster.DefaultMaxEvents)
	setN(&c.MaxStreams, cluster.DefaultMaxStreams)
	setN(&c.MaxFanOuts, DefaultMaxFanOuts)
	setN(&c.MaxWaiters, DefaultMaxWaiters)
	setN(&c.MaxWaitersPerSession, DefaultMaxWaitersPerSession)
	if c.Callers.LeaseTTL == 0 {
		c.Callers.LeaseTTL = c.LeaseTTL
	}
	if c.Callers.SessionTTL == 0 {
		c.Callers.SessionTTL = c.SessionTTL
	}
	if c.Metrics == nil {
		c.Metrics = telemetry.NewMetrics(c.NodeID)
	}
	return c
}

// The node's defaults (Config.WithDefaults).
const (
	DefaultLeaseTTL             = 5 * time.Second
	DefaultSessionTTL           = 30 * time.Minute
	DefaultRecordRetry          = 10 * time.Second
	DefaultRecordTimeout        = time.Minute
	DefaultMaxFanOuts           = 4
	DefaultMaxWaitersPerSession = 100
)

// Node is this process as a member of the cluster: its waiters, its
// registry of running requests and open streams, the bus messages it
// sends and handles, its membership lease and readiness, fan-out, and
// drain. Transports are adapters over it.
type Node struct {
	Waiters *Coordinator
	Local   *Registry
	// Sessions is the node's session store.
	Sessions *session.Store
	// Tasks runs and reads tasks; Features keeps the enabled state of
	// features.
	Tasks    *Tasks
	Features *Features
	// Callers keeps the per-caller limits of the deployment, in the
	// backend's Limiter.
	Callers *callers.Ledger

	be            *cluster.Backend
	instance      string
	leaseTTL      time.Duration
	sessionTTL    time.Duration
	history       time.Duration
	lim           cluster.Limits
	recordRetry   time.Duration
	recordTimeout time.Duration
	log           zerolog.Logger
	metrics       *telemetry.Metrics
	refresh       func(ctx context.Context)

	fanOuts       *fanOutLimiter
	fanOutDropped func()
	undecodable   func()
	refreshDue    chan struct{}
	draining      atomic.Bool
	upkeep        upkeep
	tasks         tasks
	members       members
	producing     producing
	echoes        echoes

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	goMu   sync.Mutex // orders Go's wg.Add before Close's wg.Wait
	closed bool
	stops  []func()
}

// NewNode returns the node of cfg; Start joins it to the cluster.
func NewNode(cfg Config) *Node {
	cfg = cfg.WithDefaults()
	if cfg.Waiters == nil {
		cfg.Waiters = New(cfg.NodeID, newIncarnation(), cfg.Backend.Bus, cfg.MaxWaiters)
		cfg.Waiters.SetSessionShare(cfg.MaxWaitersPerSession)
	}
	n := &Node{
		Waiters: cfg.Waiters, Local: NewRegistry(),
		be: cfg.Backend, instance: cfg.Waiters.Instance(),
		leaseTTL: cfg.LeaseTTL, sessionTTL: cfg.SessionTTL, history: cfg.HistoryTTL,
		lim:         cluster.Limits{MaxEvents: cfg.MaxEvents, MaxStreams: cfg.MaxStreams, TTL: cfg.HistoryTTL},
		recordRetry: cfg.RecordRetry, recordTimeout: cfg.RecordTimeout, log: cfg.Log, metrics: cfg.Metrics, refresh: cfg.Refresh,
		fanOuts:    newFanOutLimiter(cfg.MaxFanOuts, maxWaitingFanOuts),
		refreshDue: make(chan struct{}, 1),
	}
	n.Sessions = cfg.Sessions
	if n.Sessions == nil {
		o := cfg.Session
		o.Holder, o.Live, o.Current = n.instance, n.BusReady, n.BusCurrent
		n.Sessions = session.NewStore(cfg.Backend.Sessions, o)
	}
	cfg.Callers.Nodes = n.LiveNodes
	n.Callers = callers.New(cfg.Backend.Limiter, cfg.Callers, cfg.Log.With().Str("component", "callers").Logger(), cfg.Metrics)
	n.Tasks = &Tasks{n: n}
	n.Features = &Features{n: n}
	if n.refresh == nil {
		n.refresh = func(context.Context) {}
	}
	n.fanOutDropped = cfg.Metrics.Counter("mcp_fanouts_dropped_total", "Notification fan-outs dropped because too many distinct ones waited for a slot.")
	n.undecodable = cfg.Metrics.Counter("mcp_bus_undecodable_total", "Bus payloads skipped because they are not messages (malformed, or of a newer release).")
	n.Waiters.OnUndecodable(n.skip)
	if mem := cfg.Backend.Memory; mem != nil {
		cfg.Metrics.GaugeFunc("mcp_redis_evicting", "1 while a Redis primary's maxmemory-policy may evict this deployment's keys (every key has a TTL), accepted or not.",
			func() float64 { return boolGauge(mem().Evicting) })
		cfg.Metrics.GaugeFunc("mcp_redis_evicted_keys", "Keys the Redis primaries evicted since they started (INFO stats evicted_keys, summed), as last read.",
			func() float64 { return float64(mem().EvictedKeys) })
	}
	n.Tasks.Configure(TaskOptions{})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// newIncarnation returns a random incarnation with the node's format.
func newIncarnation() string {
	var b [12]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b[:]) + FormatSuffix
}

// Instance names this process: "<node id>.<incarnation>".
func (n *Node) Instance() string { return n.instance }

// Close stops the node's background work and fails its pending waiters
// with err. It keeps the membership lease: Leave gives it up.
func (n *Node) Close(err error) {
	n.cancel()
	for _, stop := range n.stops {
		stop()
	}
	n.Waiters.FailAll(err)
	n.goMu.Lock()
	n.closed = true
	n.goMu.Unlock()
	n.wg.Wait()
}

// Leave gives up the membership lease, so other nodes see this process
// gone at once instead of after LeaseTTL.
func (n *Node) Leave() { _ = n.be.Members.Leave(context.Background(), n.instance) }

// Shutdown closes the node (Close) and gives up its membership lease
// (Leave): the end of a process that stops on purpose.
func (n *Node) Shutdown(err error) {
	n.Close(err)
	n.Leave()
}

// Go runs f in the background, tracked until Close; f's context ends at
// Close. After Close, f runs at once on the caller's goroutine with the
// ended context, so its clean-up still happens and nothing outlives the
// node.
func (n *Node) Go(f func(ctx context.Context)) {
	n.goMu.Lock()
	if n.closed {
		n.goMu.Unlock()
		f(n.ctx)
		return
	}
	n.wg.Add(1)
	n.goMu.Unlock()
	go func() {
		defer n.wg.Done()
		f(n.ctx)
	}()
}

// Publish sends m to every node (this one included).
func (n *Node) Publish(ctx context.Context, m Message) error {
	return n.publishTo(ctx, TopicAll, m)
}

// publishTo publishes m on topic.
func (n *Node) publishTo(ctx context.Context, topic string, m Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	n.metrics.BusSent()
	_, err = n.be.Bus.Publish(ctx, topic, b)
	return err
}

// skip counts and logs a bus payload that is not a message: a kind of a
// newer release (a rolling upgrade) at debug level, anything else as a
// warning.
func (n *Node) skip(topic string, err error) {
	n.undecodable()
	ev := n.log.Warn()
	if errors.Is(err, ErrUnknownKind) {
		ev = n.log.Debug()
	}
	ev.Err(err).Str("topic", topic).Msg("bus message skipped")
}

// onBus handles broadcast messages from any node (this one included),
// each by the handler of its kind in busKinds.
func (n *Node) onBus(b []byte) {
	n.metrics.BusReceived()
	k, msg, err := decode(b)
	if err != nil {
		n.skip(TopicAll, err)
		return
	}
	k.handle(n, msg)
}
