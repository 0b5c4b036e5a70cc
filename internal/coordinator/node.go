package coordinator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Config wires a Node. The adapter's options are the one source of
// defaults: durations and MaxFanOuts must be positive here.
type Config struct {
	Backend  *cluster.Backend
	Waiters  *Coordinator
	Sessions *session.Store
	// LeaseTTL is the membership lease (renewed every LeaseTTL/3), which
	// also keeps the claims of this process's streams (see ClaimTTL).
	LeaseTTL time.Duration
	// SessionTTL is the idle timeout of sessions: an open GET stream
	// slides it every SessionTTL/4.
	SessionTTL time.Duration
	// HistoryTTL is how long a cancellation is remembered.
	HistoryTTL time.Duration
	// Limits bound the streams fan-out appends to.
	Limits cluster.Limits
	// MaxFanOuts bounds the fan-outs running at once.
	MaxFanOuts int
	// RecordRetry is how long a POST stream's producer keeps trying to
	// record a batch of events while the store is unavailable before the
	// stream ends at it (see Producer.Add).
	RecordRetry time.Duration
	Log         zerolog.Logger
	Metrics     *telemetry.Metrics
	// Refresh reloads what the adapter keeps of cluster state (the
	// enabled state of features): on every heartbeat, after the bus
	// comes back, and soon after a RegistryChanged message. It runs on
	// the heartbeat goroutine.
	Refresh func(ctx context.Context)
}

// Node is this process as a member of the cluster: its waiters, its
// registry of running requests and open streams, the bus messages it
// sends and handles, its membership lease and readiness, fan-out, and
// drain. Transports are adapters over it.
type Node struct {
	Waiters *Coordinator
	Local   *Registry

	be          *cluster.Backend
	sessions    *session.Store
	instance    string
	leaseTTL    time.Duration
	sessionTTL  time.Duration
	history     time.Duration
	lim         cluster.Limits
	recordRetry time.Duration
	log         zerolog.Logger
	metrics     *telemetry.Metrics
	refresh     func(ctx context.Context)

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
	n := &Node{
		Waiters: cfg.Waiters, Local: NewRegistry(),
		be: cfg.Backend, sessions: cfg.Sessions, instance: cfg.Waiters.Instance(),
		leaseTTL: cfg.LeaseTTL, sessionTTL: cfg.SessionTTL, history: cfg.HistoryTTL, lim: cfg.Limits,
		recordRetry: cfg.RecordRetry, log: cfg.Log, metrics: cfg.Metrics, refresh: cfg.Refresh,
		fanOuts:    newFanOutLimiter(cfg.MaxFanOuts, maxWaitingFanOuts),
		refreshDue: make(chan struct{}, 1),
	}
	if n.refresh == nil {
		n.refresh = func(context.Context) {}
	}
	n.fanOutDropped = cfg.Metrics.Counter("mcp_fanouts_dropped_total", "Notification fan-outs dropped because too many distinct ones waited for a slot.")
	n.undecodable = cfg.Metrics.Counter("mcp_bus_undecodable_total", "Bus payloads skipped because they are not messages (malformed, or of a newer release).")
	n.Waiters.OnUndecodable(n.skip)
	n.ConfigureTasks(TaskOptions{})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
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
