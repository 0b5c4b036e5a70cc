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
//	{P:nodes}:sharded  zset    node → lease expiry (ms) of the nodes that read sharded channels
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
// Follow, classic (PUBLISH/SUBSCRIBE) or sharded (SPUBLISH/SSUBSCRIBE;
// a sharded follow channel is P:{S}:f:<stream>, in its session's slot).
// So every key and channel of a deployment starts with P: or {P:, and an
// ACL user confined to one deployment needs the key patterns P:* and
// {P:nodes}:sharded and the channel pattern P:* (&P:*). Deployments
// sharing one Redis use prefixes of which none is another followed by
// ':' (a and a:sub would share a:sub:<uri>).
// A Follow message is "<seq>:<final 0|1>:<data>"; "0" alone asks
// followers to re-read (the stream was removed). Appends publish to a
// stream's channel only once a Read marked it (field f): most POST
// streams are read by no one but their producer, which needs no
// message.
//
// # Pub/sub on Cluster
//
// Classic pub/sub does not scale with the shards of a Cluster: each
// PUBLISH is relayed by the shard that owns the channel's slot to every
// other shard over the cluster bus, so every shard carries every
// message, and its reply counts only the subscribers connected to the
// shard that ran it (Bus.Publish reports cluster.ReceiversUnknown).
// Sharded pub/sub (Redis 7.0) keeps a channel's messages on the shard
// that owns its slot, where every SSUBSCRIBEr of the channel is
// connected: each message costs one shard, whatever their number, and
// SPUBLISH's reply is the exact receiver count, so a routed reply that
// nobody received is noticed (coordinator.ErrUndelivered) on Cluster
// too. Options.ShardedPubSub (ShardedAuto by default) chooses:
//
//   - A standalone server and Sentinel use classic pub/sub (one server:
//     sharding gives nothing), and so does a Cluster where a primary is
//     older than 7.0 or refuses an SSUBSCRIBE (checked at New), and
//     every node in mode ShardedOff.
//   - Otherwise a node reads both: each Bus.Subscribe and Follow
//     subscribes the classic channel on the node's classic connection
//     and the sharded one on a connection to the shard owning its slot
//     (one pub/sub connection per shard in use, each with the classic
//     connection's barrier, health probe, reconnect and currency ticks;
//     Ready and Current hold when they hold for every one). It records
//     that it reads sharded in {P:nodes}:sharded (node → lease expiry,
//     renewed with its lease by Membership.Heartbeat, dropped by Leave).
//   - It publishes classic while any live node (membership lease) is
//     missing from that set, and sharded once none is (ShardedOn:
//     sharded from the start). Every publish of the node follows that
//     mode: Bus.Publish, the scripts' follow messages (the channel
//     prefix they get tells PUBLISH from SPUBLISH) and End's announce
//     (a script may SPUBLISH only to a channel of its keys' slot, so a
//     sharded announce is sent in the pipeline that follows the script
//     on Cluster). The node checks the set every Options.ModeInterval
//     (a second), at each heartbeat, and at once when a classic message
//     arrives while it publishes sharded; a check that fails is tried
//     again 100 ms later.
//
// A message is published on exactly one of the two channels, so a node
// that reads both handles it once. A rolling upgrade from a version that
// knows only classic pub/sub loses nothing: the new nodes read both and
// publish classic while an old node holds a lease, and switch to sharded
// within ModeInterval of the last one leaving. A downgrade (or a node in
// mode off joining) switches the others back to classic as soon as the
// old node's first classic message reaches them (a node announces itself
// on the broadcast channel as it joins, MemberJoined) and at the latest
// within ModeInterval of its first heartbeat; what they publish sharded
// before that, the old node misses: messages of the round trip after its
// announcement, when it holds nothing they could be about yet. To avoid
// even that, first restart the nodes with ShardedOff, then roll the old
// version out.
// A slot that moves to another shard (resharding) is not followed by the
// sharded subscriptions of its channels (the server ends them, and the
// hub subscribes again only the channels still on its shard): reshard
// with every node in mode off, or restart the nodes after it. A failover
// is followed: the backend reloads the slot map when a connection or a
// command fails (topology.go), and a shard's hub subscribes its channels
// again on the shard's new primary, also when the old one ended them
// (CLUSTER FAILOVER).
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
// plus one pub/sub connection, however many subscriptions it has (on a
// Cluster that reads sharded channels, one more per shard in use).
//
// # Connection
//
// ConnOptions adds to a URL what operators of a shared Redis set apart
// from it: TLS with a private CA and a client certificate, an ACL user
// whose password is in a file, and the pool and its timeouts, all
// through go-redis's own options (TLSConfig.GetClientCertificate,
// CredentialsProviderContext, PoolSize, ...); the files are read again
// when they change, so rotated secrets need no restart (NewClient).
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
	// ShardedPubSub selects classic or sharded pub/sub on Cluster
	// (ShardedAuto when empty; see the package doc).
	ShardedPubSub ShardedPubSub
	// ModeInterval is how often a node that reads sharded channels checks
	// whether every live node does (DefaultModeInterval when 0).
	ModeInterval time.Duration
	// WaitReplicas, when positive, makes each write a client is told
	// about wait until that many replicas acknowledged it, WaitTimeout
	// at most (DefaultWaitTimeout when 0), else fail with
	// cluster.ErrUnavailable (see wait.go). One server (standalone or
	// Sentinel) only.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Pipelines is how many round trips of script calls may be in
	// flight at once before further calls wait and share the next one
	// (DefaultPipelines when 0; negative: every call goes alone, at
	// once, on a connection of the pool). See batch.go.
	Pipelines int
	// MaxPipelineCalls bounds the calls one shared round trip carries
	// (DefaultMaxPipelineCalls when 0).
	MaxPipelineCalls int
	// AppendLinger is how long the node's producer may hold a stream's
	// notifications (not a server→client request, not the final
	// message) for more of its events, and the batcher the append for
	// other calls to share its round trip when it would go alone
	// (cluster.Backend.AppendLinger, Batch.LingerUntil): 0 (the default)
	// sends it at once. A call that does not linger (a final append, a
	// session or task write) takes every lingering call with it. See
	// batch.go.
	AppendLinger time.Duration
	// Eviction is what the node does when a primary's maxmemory-policy
	// may evict the deployment's keys (EvictionUnready when empty; see
	// memory.go), EvictionCheck how often the policy and evicted_keys
	// are read again (DefaultEvictionCheck when 0; negative: at start
	// only).
	Eviction      Eviction
	EvictionCheck time.Duration
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
	batch  *batcher
	// shards, when not nil, holds the sharded channels' hubs: the
	// backend reads sharded channels (beside the classic ones).
	shards *shards
	// pubSharded: publish sharded (SPUBLISH) rather than classic.
	pubSharded atomic.Bool
	// modeKick asks modeLoop to check the publish mode now: a classic
	// message arrived while this node publishes sharded.
	modeKick chan struct{}

	stop chan struct{}
	wg   sync.WaitGroup

	tokPrefix string        // random, unique to this backend
	memory    memoryWatch   // what the last memory check read (memory.go)
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
	if opts.ModeInterval <= 0 {
		opts.ModeInterval = DefaultModeInterval
	}
	if opts.EvictionCheck == 0 {
		opts.EvictionCheck = DefaultEvictionCheck
	}
	eviction, err := ParseEviction(string(opts.Eviction))
	if err != nil {
		return nil, fmt.Errorf("redis backend: %w", err)
	}
	opts.Eviction = eviction
	mode, err := ParseShardedPubSub(string(opts.ShardedPubSub))
	if err != nil {
		return nil, fmt.Errorf("redis backend: %w", err)
	}
	opts.ShardedPubSub = mode
	_, single := client.(*goredis.Client)
	b := &backend{
		client: client,
		single: single,
		keys:   keys{prefix: opts.Prefix},
		opts:   opts,
		log:    opts.Logger.With().Str("component", "cluster.redis").Logger(),
		stop:   make(chan struct{}),
	}
	b.batch = newBatcher(b)
	b.followTopology()
	var rnd [9]byte
	_, _ = rand.Read(rnd[:])
	b.tokPrefix = base64.RawURLEncoding.EncodeToString(rnd[:]) + "."
	if err := b.ping(ctx); err != nil {
		return nil, err
	}
	if err := b.checkMemory(ctx, true); err != nil {
		return nil, err
	}
	sharded, err := b.shardedReady(ctx)
	if err != nil {
		return nil, err
	}
	if sharded {
		b.pubSharded.Store(mode == ShardedOn)
		if mode == ShardedAuto {
			if err := b.checkMode(ctx); err != nil {
				return nil, err
			}
		}
		b.shards = &shards{b: b, hubs: make(map[string]*hub)}
		b.modeKick = make(chan struct{}, 1)
	}
	b.hub = newHub(b, nil)
	if sharded && mode == ShardedAuto {
		b.wg.Add(1)
		go b.modeLoop(opts.ModeInterval)
	}
	if opts.JanitorInterval > 0 {
		b.wg.Add(1)
		go b.janitorLoop(opts.JanitorInterval)
	}
	if opts.EvictionCheck > 0 {
		b.wg.Add(1)
		go b.periodic(opts.EvictionCheck, nil, func(ctx context.Context) { _ = b.checkMemory(ctx, false) })
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
				if b.shards != nil {
					b.shards.close()
				}
				b.wg.Wait()
				if opts.CloseClient {
					err = client.Close()
				}
			})
			return err
		},
		Memory:       b.memoryState,
		Ping:         b.ping,
		Ready:        b.ready,
		Current:      b.current,
		Name:         "redis",
		AppendLinger: max(opts.AppendLinger, 0),
		FollowPoll:   followPoll,
		Remote:       true,
	}, nil
}

// periodic runs fn every interval, and at once on each receive from
// kick (nil: never), until Close, each run under a context that ends
// after the interval or at Close (so Close does not wait for a slow
// run). The caller did b.wg.Add(1).
func (b *backend) periodic(every time.Duration, kick <-chan struct{}, fn func(ctx context.Context)) {
	defer b.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		go func() { // stop promptly on Close
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		fn(ctx)
		cancel()
	}
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
