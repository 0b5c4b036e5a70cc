// Package redis is the cluster backend on Redis: every seam of package
// cluster kept in Redis so that any node can serve any request. It works
// through a go-redis UniversalClient, so a standalone server, Sentinel
// and Cluster deployments are all supported (Redis 6.2 or newer).
//
// # Key layout
//
// With P the key prefix (Options.Prefix, default "mcp") and {S} the hash
// tag of a session id (the id with '%', '{' and '}' percent-encoded):
//
//	P:{S}:s            hash    the session's fields (+ a reserved "\x00" field), PEXPIRE = idle TTL
//	P:{S}:subs         set     resource uris the session subscribed to, TTL ≥ the session's
//	P:{S}:lru          zset    stream id → last use (µs), for MaxStreams eviction
//	P:{S}:m:<stream>   hash    stream meta: owner, request, last (seq), done, touched (ms of the
//	                           last TTL refresh), toks (tokens of recent appends), f (read by a
//	                           follower: appends publish only then)
//	P:{S}:e:<stream>   list    the newest MaxEvents payloads; the last one has seq = last
//	P:{S}:c:<rest>     string  claim "session:<S>:<rest>" (holder), PX = claim TTL
//	P:{S}:claims       set     <rest> of the session's claims, so End can drop them
//	P:{S}:ended        string  token of the End call that ended the session (a minute)
//	P:sessions         zset    live session id → expiry (ms, Redis clock); TTL ≥ the newest expiry
//	P:sub:<uri>        set     session ids subscribed to uri (dead ids pruned lazily); TTL ≥ its sessions'
//	P:subidx           set     uris having a P:sub: set (for the janitor); TTL as P:sub:<uri>
//	P:x:<stream>       string  owning session of a stream (tells ErrForbidden from ErrNotFound),
//	                           slid with the stream's history (on Cluster by Append every
//	                           eighth of the stream TTL, with a PX of 5/4 of it)
//	P:c:<key>          string  any other claim, PX = claim TTL
//	P:o:<key>          string  once token, PX
//	P:nodes            zset    node → lease expiry (ms); TTL ≥ the newest lease
//	P:janitor          string  lock electing the node that runs the periodic janitor
//	P:t:{T}            hash    task T's record (see tasks.go), PEXPIRE = the task's TTL
//	P:towner:<key>     zset    task id → expiry (ms) of one owner's tasks; TTL ≥ the newest
//	P:registry         hash    feature key → "1"/"0": run-time enabled state (no TTL: the
//	                           deployment's configuration, one field per registered feature)
//	P:lb:{L}           hash    Limiter bucket L: balance, its time, last call's token and
//	                           answer; PEXPIRE = until it would be full again
//	P:ls:{L}           zset    Limiter set L: member → lease expiry (ms); TTL ≥ the newest lease
//
// Pub/sub channels: P:bus:<topic> for the Bus and P:f:<stream> for
// Follow. A Follow message is "<seq>:<final 0|1>:<data>"; "0" alone asks
// followers to re-read (the stream was removed). Appends publish to a
// stream's channel only once a Read marked it (field f): most POST
// streams are read by no one but their producer, which needs no
// message.
//
// # Pub/sub on Cluster
//
// On Cluster the channels are classic (PUBLISH/SUBSCRIBE), not sharded
// (SPUBLISH/SSUBSCRIBE): a node's one pub/sub connection, to any shard,
// receives every channel, and each PUBLISH is relayed by the shard that
// owns the channel's slot (Bus.Publish routes it there; the append
// script runs there) to every other shard over the cluster bus. The
// cost is that every shard carries every message: pub/sub throughput
// does not grow with shards, and a deployment that outgrows one shard's
// pub/sub needs sharded channels. They do not fit yet, for these
// reasons: SPUBLISH needs Redis 7.0 (this package supports 6.2); a
// script may SPUBLISH only to a channel of its own slot, so follow
// channels would have to carry the session's hash tag, and Follow, which
// knows only the stream, would need the session (a change of
// cluster.EventLog); a sharded subscription lives on a connection to the
// shard that owns its slot, so the hub would hold one pub/sub connection
// per shard, each with its own barrier, health probe and reconnect, and
// would subscribe again through another shard when the server moves a
// slot away (it then sends SUNSUBSCRIBE). The per-node bus topics would
// fit as they are: each hashes to one shard.
//
// Every key of one session shares the slot of {S}, so one Lua script
// updates a session's keys atomically even on Cluster. The global keys
// (P:sessions, P:sub:*, P:x:*) live elsewhere: with a *redis.Client
// (standalone or Sentinel) the same scripts update them too, in one round
// trip; on Cluster (or a Ring) they are updated by separate commands
// right after.
//
// Every key but P:registry expires: the global indexes get a TTL at least as long as
// the longest-lived entry they hold (sliding a session refreshes the
// subscription sets of its uris every eighth of its idle TTL), so a
// deployment whose nodes all stopped leaves nothing behind.
//
// Claim keys of the form "session:<id>:<rest>" (<id> without ':') belong
// to session <id>: they live in its slot and SessionStore.End releases
// them. Once tokens have their own namespace and outlive End.
//
// # Cost
//
// Round trips per operation in steady state (pinned by TestRoundTrips):
// one for every operation on a single server. On Cluster, Create, Load,
// Touch, Open, Subscribe, Subscribers and End take two (the global
// indexes are separate commands), and so does one Append per eighth of a
// stream's TTL (the stream's owner key). Follow and Bus.Subscribe use the one
// pub/sub connection: a channel already active costs nothing, a new one a
// SUBSCRIBE and a PING answered in order. A node holds its command pool
// plus one pub/sub connection, however many subscriptions it has.
//
// Errors: redis.Nil maps to cluster.ErrNotFound where a key is missing;
// every other failure is wrapped in cluster.ErrUnavailable, except that a
// context that ended is reported as the context's error.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Defaults for zero fields of Options and cluster.Limits.
const (
	DefaultPrefix           = "mcp"
	DefaultSubscribeTimeout = 5 * time.Second
	DefaultPingInterval     = 15 * time.Second
	DefaultJanitorInterval  = time.Minute
)

// Options configures the Redis backend. The zero value means the defaults.
type Options struct {
	// Prefix starts every key and channel (DefaultPrefix when empty). It
	// must not contain '{' or '}'. Deployments sharing one Redis use
	// different prefixes.
	Prefix string
	// Logger receives warnings (lost bus connection, janitor failures).
	// The zero Logger discards everything.
	Logger zerolog.Logger
	// MaxSubscriptions bounds the resource subscriptions of one session
	// (cluster.DefaultMaxSubscriptions when 0); past it Subscribe returns
	// cluster.ErrLimit.
	MaxSubscriptions int
	// SubscribeTimeout bounds how long Bus.Subscribe and Follow wait for
	// the subscription to become active (DefaultSubscribeTimeout when 0).
	SubscribeTimeout time.Duration
	// PingInterval is how long the pub/sub connection may stay silent
	// before it is probed (DefaultPingInterval when 0).
	PingInterval time.Duration
	// JanitorInterval is how often one node of the deployment prunes
	// dead entries from the global indexes (DefaultJanitorInterval when
	// 0; negative disables the janitor).
	JanitorInterval time.Duration
	// CloseClient makes Backend.Close close the client too.
	CloseClient bool
}

// backend is shared by every seam.
type backend struct {
	client goredis.UniversalClient
	// single is true for a *redis.Client (one server, maybe behind
	// Sentinel): scripts may then touch keys of any slot.
	single bool
	keys   keys
	opts   Options
	log    zerolog.Logger
	hub    *hub

	stop chan struct{}
	wg   sync.WaitGroup

	tokPrefix string        // random, unique to this backend
	tokN      atomic.Uint64 // calls tokened so far
}

// token returns a string unique to one call of a non-idempotent script,
// so that the script recognises a retry of the same call.
func (b *backend) token() string {
	return b.tokPrefix + strconv.FormatUint(b.tokN.Add(1), 36)
}

// New returns a Redis backend on client. It checks that Redis answers and
// starts the pub/sub connection and the janitor; Close stops them (and
// closes client only with Options.CloseClient).
func New(ctx context.Context, client goredis.UniversalClient, opts Options) (*cluster.Backend, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redis backend: prefix %q must not contain '{' or '}'", opts.Prefix)
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = cluster.DefaultMaxSubscriptions
	}
	if opts.SubscribeTimeout <= 0 {
		opts.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.JanitorInterval == 0 {
		opts.JanitorInterval = DefaultJanitorInterval
	}
	_, single := client.(*goredis.Client)
	b := &backend{
		client: client,
		single: single,
		keys:   keys{prefix: opts.Prefix},
		opts:   opts,
		log:    opts.Logger.With().Str("component", "cluster.redis").Logger(),
		stop:   make(chan struct{}),
	}
	var rnd [9]byte
	_, _ = rand.Read(rnd[:])
	b.tokPrefix = base64.RawURLEncoding.EncodeToString(rnd[:]) + "."
	if err := b.ping(ctx); err != nil {
		return nil, err
	}
	b.hub = newHub(b)
	if opts.JanitorInterval > 0 {
		b.wg.Add(1)
		go b.janitorLoop(opts.JanitorInterval)
	}
	var once sync.Once
	// On one server (or Sentinel) every follow message travels on the
	// hub's connection, whose loss sends a re-read hint; on Cluster the
	// shards relay messages to each other, which may drop some unseen.
	var followPoll time.Duration
	if single {
		followPoll = cluster.LosslessFollowPoll
	}
	return &cluster.Backend{
		Sessions: (*sessions)(b),
		Events:   (*events)(b),
		Bus:      (*bus)(b),
		Members:  (*members)(b),
		Claims:   (*claims)(b),
		Registry: (*registry)(b),
		Limiter:  (*limiter)(b),
		Tasks:    (*tasks)(b),
		Close: func() error {
			var err error
			once.Do(func() {
				close(b.stop)
				b.hub.close()
				b.wg.Wait()
				if opts.CloseClient {
					err = client.Close()
				}
			})
			return err
		},
		Ping:       b.ping,
		Ready:      b.hub.ready,
		Current:    b.hub.current,
		Name:       "redis",
		FollowPoll: followPoll,
		Remote:     true,
	}, nil
}

func (b *backend) ping(ctx context.Context) error {
	if err := b.client.Ping(ctx).Err(); err != nil {
		return b.fail(ctx, "ping", err)
	}
	return nil
}

// fail wraps a Redis error: the context's error when ctx ended, else
// cluster.ErrUnavailable (keeping err inspectable too).
func (b *backend) fail(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("redis %s: %w", op, ctxErr)
	}
	return fmt.Errorf("redis %s: %w: %w", op, cluster.ErrUnavailable, err)
}

// keys builds key and channel names; see the package documentation.
type keys struct{ prefix string }

// tag percent-encodes a session id so that it is a valid, non-empty
// hash tag: '{', '}' and '%' are escaped and "" becomes "%".
func tag(id string) string {
	if id == "" {
		return "%"
	}
	if !strings.ContainsAny(id, "{}%") {
		return id
	}
	r := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return r.Replace(id)
}

// session is the prefix of every key of session id: "P:{S}:".
func (k keys) session(id string) string { return k.prefix + ":{" + tag(id) + "}:" }

func (k keys) fields(id string) string     { return k.session(id) + "s" }
func (k keys) subs(id string) string       { return k.session(id) + "subs" }
func (k keys) lru(id string) string        { return k.session(id) + "lru" }
func (k keys) meta(id, x string) string    { return k.session(id) + "m:" + x }
func (k keys) events(id, x string) string  { return k.session(id) + "e:" + x }
func (k keys) claimIndex(id string) string { return k.session(id) + "claims" }
func (k keys) live() string                { return k.prefix + ":sessions" }
func (k keys) subscribers(uri string) string {
	return k.prefix + ":sub:" + uri
}
func (k keys) subIndex() string           { return k.prefix + ":subidx" }
func (k keys) owner(x string) string      { return k.prefix + ":x:" + x }
func (k keys) once(key string) string     { return k.prefix + ":o:" + key }
func (k keys) nodes() string              { return k.prefix + ":nodes" }
func (k keys) janitor() string            { return k.prefix + ":janitor" }
func (k keys) registry() string           { return k.prefix + ":registry" }
func (k keys) busChannel(t string) string { return k.prefix + ":bus:" + t }
func (k keys) followChannel(x string) string {
	return k.prefix + ":f:" + x
}
func (k keys) followPrefix() string { return k.prefix + ":f:" }
func (k keys) subPrefix() string    { return k.prefix + ":sub:" }
func (k keys) ownerPrefix() string  { return k.prefix + ":x:" }

// claim returns the key of a claim and, for "session:<id>:<rest>" keys,
// the session's claim index and the index member.
func (k keys) claim(key string) (redisKey, index, member string) {
	if rest, ok := strings.CutPrefix(key, "session:"); ok {
		if id, rest, ok := strings.Cut(rest, ":"); ok {
			return k.session(id) + "c:" + rest, k.claimIndex(id), rest
		}
	}
	return k.prefix + ":c:" + key, "", ""
}

// ms converts a TTL to whole milliseconds, at least 1.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// errDone is returned by Append after the final event.
var errDone = errors.New("cluster: stream already ended")
