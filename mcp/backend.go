package mcp

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
)

// Backend is the state nodes share: sessions, stream histories, the bus
// between nodes, membership and claims. The in-memory backend makes a
// complete single-node server; the Redis backend lets any number of
// nodes serve the same clients.
type Backend struct {
	b *cluster.Backend
}

// ErrBackendUnavailable is matched (errors.Is) by the errors of
// NewRedisBackend and NewHTTPHandler when the shared store cannot be
// reached: worth retrying, unlike a bad URL.
var ErrBackendUnavailable = cluster.ErrUnavailable

// NewMemoryBackend returns an in-memory backend for a single node.
func NewMemoryBackend() *Backend {
	return NewMemoryBackendWith(MemoryOptions{})
}

// MemoryOptions tune NewMemoryBackendWith. The zero value means the
// defaults.
type MemoryOptions struct {
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (default 1024); past it resources/subscribe gets -32602.
	MaxSubscriptions int
}

// NewMemoryBackendWith returns an in-memory backend for a single node
// with the given options.
func NewMemoryBackendWith(opts MemoryOptions) *Backend {
	return &Backend{b: memory.New(memory.Options{MaxSubscriptions: opts.MaxSubscriptions})}
}

// RedisOptions tune NewRedisBackend. The zero value means the defaults.
type RedisOptions struct {
	// Prefix starts every key and channel (default "mcp"); deployments
	// sharing one Redis use different prefixes.
	Prefix string
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (default 1024); past it resources/subscribe gets -32602.
	MaxSubscriptions int
	// Logger receives the backend's warnings (lost pub/sub connection,
	// janitor failures) and go-redis's own messages, which would
	// otherwise go to the standard library's logger as plain text. nil
	// discards the backend's warnings and leaves go-redis's logger as it
	// is. go-redis has one logger per process: the last backend given a
	// Logger sets it.
	Logger *zerolog.Logger
}

// NewRedisBackend connects to Redis and returns a backend that nodes of
// one deployment share. url is redis://, rediss:// or unix://, or
// redis-sentinel://host1:port,host2:port/master and
// redis-cluster://host1:port,host2:port for Sentinel and Cluster.
func NewRedisBackend(ctx context.Context, url string, opts *RedisOptions) (*Backend, error) {
	uo, err := clusterredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("mcp: redis url: %w", err)
	}
	client := goredis.NewUniversalClient(uo)
	// Redis commands become spans of the caller's trace (no cost while
	// no tracer provider is installed).
	if err := redisotel.InstrumentTracing(client); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("mcp: redis tracing: %w", err)
	}
	o := clusterredis.Options{CloseClient: true}
	if opts != nil {
		o.Prefix = opts.Prefix
		o.MaxSubscriptions = opts.MaxSubscriptions
		if opts.Logger != nil {
			o.Logger = *opts.Logger
			clusterredis.RouteClientLogs(*opts.Logger)
		}
	}
	b, err := clusterredis.New(ctx, client, o)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return &Backend{b: b}, nil
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
