// Package redisbackend is the Redis backend of package mcp: the shared
// state that lets any number of nodes serve the same clients. It is a
// package of its own so that a program links go-redis only when it
// imports it; a stdio server or a single node on mcp.NewMemoryBackend
// does not.
//
// New takes a go-redis client the program made and configured (a
// standalone server, Sentinel or Cluster: any redis.UniversalClient);
// Open makes one from a URL.
//
// Tracing: Open makes each Redis command a span (named after the
// command, without its arguments) when the program installed a tracer
// provider (otel.SetTracerProvider) before calling it. With none
// installed it adds no hook to the client: a span per command through
// OpenTelemetry's default no-op provider would still cost allocations
// and time on every command, for spans nobody records. A program that
// traces installs its provider first; New never instruments the client
// it is given.
package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Options tune New and Open. A zero field means its default; a negative
// MaxSubscriptions is an error (Validate).
type Options struct {
	// Prefix starts every key and channel (default "mcp"); deployments
	// sharing one Redis use different prefixes.
	Prefix string
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (default mcp.DefaultMaxSubscriptions); past it resources/subscribe
	// gets -32602.
	MaxSubscriptions int
	// ShardedPubSub is "auto" (the default when empty), "on" or "off":
	// whether nodes on Redis Cluster use sharded pub/sub (SSUBSCRIBE,
	// SPUBLISH, Redis 7.0 or newer). auto reads classic and sharded
	// channels and publishes sharded once every live node reads them,
	// so nodes of versions that know only classic pub/sub may run
	// beside it during a rolling upgrade; on publishes sharded at once
	// and fails where sharded pub/sub is not available; off keeps
	// classic pub/sub. A standalone server or Sentinel always uses
	// classic pub/sub.
	ShardedPubSub string
	// Logger receives the backend's warnings (lost pub/sub connection,
	// janitor failures) and go-redis's own messages, which would
	// otherwise go to the standard library's logger as plain text. nil
	// discards the backend's warnings and leaves go-redis's logger as it
	// is. go-redis has one logger per process: the last backend given a
	// Logger sets it.
	Logger *slog.Logger
	// Zerolog, for programs that log with zerolog (the reference node
	// does), is used instead of Logger when set.
	Zerolog *zerolog.Logger
	// WaitReplicas, when positive, makes each write a client is told
	// about (a session's creation, the events of a stream, a task's
	// record) wait until that many replicas have it, at most WaitTimeout
	// (default 1s); a write they did not acknowledge in time answers the
	// client -31000 (retry), never success. So a Sentinel failover to an
	// acknowledging replica loses no write a client was told of. One
	// server (standalone or Sentinel) only; it costs a replication round
	// trip per such write.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Pipelines is how many round trips of the backend's script calls
	// (appends, session and task writes) may be in flight at once;
	// calls made while that many are in flight wait and share the next
	// round trip as one pipeline, so a busy node sends one round trip
	// for many streams (default 8; negative: every call alone, at once).
	Pipelines int
	// MaxPipelineCalls bounds the calls one shared round trip carries
	// (default 128).
	MaxPipelineCalls int
	// AppendLinger is how long a response stream's notifications
	// (progress, log messages) may wait for other writes to share their
	// round trip to Redis when they would go alone: a paced event is
	// otherwise one lone request, which costs Redis several times its
	// share of a pipeline. A server→client request or the final response
	// is never held and ends the wait of the notifications before it.
	// Each held notification is recorded, and written to its client, up
	// to that much later (default 0: at once; negative is refused).
	AppendLinger time.Duration
	// Eviction is what a node does when Redis's maxmemory-policy may
	// evict the deployment's keys: every key has a TTL, so with a
	// maxmemory set, volatile-lru (the managed services' default) and
	// the other volatile-* and allkeys-* policies evict ours first under
	// memory pressure, and sessions, streams, claims and tasks vanish.
	// "unready" (the default when empty) logs an error and fails the
	// node's readiness (HTTPHandler.Ready) with the policy as the
	// reason; "refuse" makes New and Open fail with an error matching
	// ErrEvictionPolicy; "accept" logs a warning and stays ready. The
	// policy of every primary is read with INFO memory at start and
	// every EvictionCheck (default 15s; negative: at start only), and
	// Redis's evicted_keys growing is logged, at most once a minute.
	// Set maxmemory-policy noeviction: a full Redis then refuses writes,
	// which the nodes answer with -31000 (retry later), and nothing is
	// lost.
	Eviction      string
	EvictionCheck time.Duration
}

// ErrEvictionPolicy is the error of New and Open under Eviction
// "refuse" when a primary's maxmemory-policy may evict the
// deployment's keys.
var ErrEvictionPolicy = clusterredis.ErrEvictionPolicy

// New returns a backend on client that the nodes of one deployment
// share. It checks that Redis answers: if not, the error matches
// mcp.ErrBackendUnavailable and is worth retrying. The backend does not
// close client (the caller made it, and closes it after the backend), and
// adds no hook to it: to trace Redis commands, instrument the client
// before (e.g. with redisotel.InstrumentTracing).
func New(ctx context.Context, client redis.UniversalClient, opts *Options) (*mcp.Backend, error) {
	if client == nil {
		return nil, errors.New("redisbackend: nil client")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return newBackend(ctx, client, opts, false)
}

// Open connects to Redis at url and returns a backend that owns the
// client it made: closing the backend closes it. url is redis://,
// rediss:// or unix://, or redis-sentinel://host1:port,host2:port/master
// and redis-cluster://host1:port,host2:port for Sentinel and Cluster.
// When a tracer provider is installed (see the package doc), Redis
// commands become spans of the caller's trace, named after the command,
// without its arguments.
func Open(ctx context.Context, url string, opts *Options) (*mcp.Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	uo, err := clusterredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %w", err)
	}
	client := redis.NewUniversalClient(uo)
	// A span per command names the command, not its arguments (a
	// session's commands carry its id, a bearer credential, and its
	// data), nor the caller's file and line (a stack walk per command,
	// whether or not a tracer records).
	if telemetry.Enabled() {
		if err := redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("redisbackend: tracing: %w", err)
		}
	}
	b, err := newBackend(ctx, client, opts, true)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return b, nil
}

// Validate reports a negative MaxSubscriptions, WaitReplicas,
// WaitTimeout, MaxPipelineCalls or AppendLinger, or an unknown ShardedPubSub or
// Eviction, naming
// the field. New and Open call it. A nil *Options is valid (the
// defaults).
func (o *Options) Validate() error {
	if o != nil && o.MaxSubscriptions < 0 {
		return fmt.Errorf("redisbackend: Options.MaxSubscriptions: must not be negative, not %d", o.MaxSubscriptions)
	}
	if o != nil && (o.WaitReplicas < 0 || o.WaitTimeout < 0) {
		return fmt.Errorf("redisbackend: Options.WaitReplicas and WaitTimeout must not be negative, not %d and %v", o.WaitReplicas, o.WaitTimeout)
	}
	if o != nil && o.MaxPipelineCalls < 0 {
		return fmt.Errorf("redisbackend: Options.MaxPipelineCalls: must not be negative, not %d", o.MaxPipelineCalls)
	}
	if o != nil && o.AppendLinger < 0 {
		return fmt.Errorf("redisbackend: Options.AppendLinger: must not be negative, not %v", o.AppendLinger)
	}
	if o != nil {
		if _, err := clusterredis.ParseShardedPubSub(o.ShardedPubSub); err != nil {
			return fmt.Errorf("redisbackend: Options.ShardedPubSub: %w", err)
		}
		if _, err := clusterredis.ParseEviction(o.Eviction); err != nil {
			return fmt.Errorf("redisbackend: Options.Eviction: %w", err)
		}
	}
	return nil
}

func newBackend(ctx context.Context, client redis.UniversalClient, opts *Options, own bool) (*mcp.Backend, error) {
	o := clusterredis.Options{CloseClient: own}
	if opts != nil {
		o.Prefix = opts.Prefix
		o.MaxSubscriptions = opts.MaxSubscriptions
		o.ShardedPubSub = clusterredis.ShardedPubSub(opts.ShardedPubSub)
		o.WaitReplicas, o.WaitTimeout = opts.WaitReplicas, opts.WaitTimeout
		o.Pipelines, o.MaxPipelineCalls, o.AppendLinger = opts.Pipelines, opts.MaxPipelineCalls, opts.AppendLinger
		o.Eviction, o.EvictionCheck = clusterredis.Eviction(opts.Eviction), opts.EvictionCheck
		switch {
		case opts.Zerolog != nil:
			o.Logger = *opts.Zerolog
		case opts.Logger != nil:
			o.Logger = telemetry.FromSlog(opts.Logger.Handler())
		}
		if opts.Zerolog != nil || opts.Logger != nil {
			clusterredis.RouteClientLogs(o.Logger)
		}
	}
	b, err := clusterredis.New(ctx, client, o)
	if err != nil {
		return nil, err
	}
	return backendwrap.Wrap(b).(*mcp.Backend), nil
}
