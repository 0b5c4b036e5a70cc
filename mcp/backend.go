package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// Backend is the state nodes share: sessions, stream histories, the bus
// between nodes, membership and claims. The in-memory backend
// (NewMemoryBackend) makes a complete single-node server; the Redis
// backend (package mcp/redisbackend, which a program links only if it
// imports it) lets any number of nodes serve the same clients.
type Backend struct {
	b *cluster.Backend
}

func init() {
	backendwrap.Wrap = func(b *cluster.Backend) any { return &Backend{b: b} }
}

// ErrBackendUnavailable is matched (errors.Is) by the errors of the
// backend constructors (redisbackend.New and Open) and of NewHTTPHandler
// when the shared store cannot be reached: worth retrying, unlike a bad
// URL.
var ErrBackendUnavailable = cluster.ErrUnavailable

// DefaultMaxSubscriptions bounds the resource subscriptions of one
// session when MemoryOptions (or the Redis backend's options) leave it
// zero.
const DefaultMaxSubscriptions = 1024

// node returns a node of cfg on the backend: the only place where the
// adapter hands the node its seams.
func (b *Backend) node(cfg coordinator.Config) *coordinator.Node {
	cfg.Backend = b.b
	return coordinator.NewNode(cfg)
}

// What the errors of the shared state mean to the adapter: the seams'
// errors are named here only.

// errGone is the error of a session, stream or task that is not (or no
// longer) in the shared state.
var errGone = cluster.ErrNotFound

// isGone reports whether err says the session, stream or task asked for
// is not (or no longer) in the shared state.
func isGone(err error) bool { return errors.Is(err, cluster.ErrNotFound) }

// isUnavailable reports whether err says the shared state could not be
// reached (worth retrying: -31000).
func isUnavailable(err error) bool { return errors.Is(err, cluster.ErrUnavailable) }

// isFull reports whether err says a bound of the shared state is
// reached (sessions, tasks, subscriptions).
func isFull(err error) bool { return errors.Is(err, cluster.ErrLimit) }

// isBadCursor reports whether err says a list cursor is not one the
// store made.
func isBadCursor(err error) bool { return errors.Is(err, cluster.ErrBadCursor) }

// once records single-use tokens in the backend's claims (see
// Request.once).
func (b *Backend) once(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return b.b.Claims.Once(ctx, key, ttl)
}

// NewMemoryBackend returns an in-memory backend for a single node.
func NewMemoryBackend() *Backend {
	return NewMemoryBackendWith(MemoryOptions{})
}

// MemoryOptions tune NewMemoryBackendWith. The zero value means the
// defaults.
type MemoryOptions struct {
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (default DefaultMaxSubscriptions); past it resources/subscribe gets
	// -32602.
	MaxSubscriptions int
}

// NewMemoryBackendWith returns an in-memory backend for a single node
// with the given options. It panics when they are invalid (see
// MemoryOptions.Validate): a negative bound is a programming error.
func NewMemoryBackendWith(opts MemoryOptions) *Backend {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	return &Backend{b: memory.New(memory.Options{MaxSubscriptions: opts.MaxSubscriptions})}
}

// Name is "memory" or "redis".
func (b *Backend) Name() string { return b.b.Name }

// Ping checks that the shared store is reachable.
func (b *Backend) Ping(ctx context.Context) error {
	if b.b.Ping == nil {
		return nil
	}
	return b.b.Ping(ctx)
}

// Close releases the backend.
func (b *Backend) Close() error {
	if b.b.Close == nil {
		return nil
	}
	return b.b.Close()
}
