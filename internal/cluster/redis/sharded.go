package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ShardedPubSub selects the pub/sub commands on Redis Cluster (see the
// package doc, "Pub/sub on Cluster"). A standalone server and Sentinel
// always use classic pub/sub.
type ShardedPubSub string

const (
	// ShardedAuto (the default, also "") reads both classic and sharded
	// channels where every primary of the Cluster knows SSUBSCRIBE, and
	// publishes sharded once every live node reads sharded: what lets
	// nodes of a version that knows only classic pub/sub and nodes of
	// this one mix during a rolling upgrade.
	ShardedAuto ShardedPubSub = "auto"
	// ShardedOn reads both and publishes sharded at once, without
	// waiting for the other nodes: for a deployment whose nodes all run
	// this version. New fails on a Cluster that refuses SSUBSCRIBE, or
	// on a client that is not a Cluster's.
	ShardedOn ShardedPubSub = "on"
	// ShardedOff reads and publishes classic channels only, as versions
	// before sharded pub/sub did.
	ShardedOff ShardedPubSub = "off"
)

// ParseShardedPubSub parses "auto", "on" or "off" ("" is auto).
func ParseShardedPubSub(s string) (ShardedPubSub, error) {
	switch m := ShardedPubSub(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ShardedAuto:
		return ShardedAuto, nil
	case ShardedOn, ShardedOff:
		return m, nil
	}
	return "", fmt.Errorf("sharded pub/sub %q: want auto, on or off", s)
}

// DefaultModeInterval is how often a node reading sharded channels
// checks whether every live node does (Options.ModeInterval).
const DefaultModeInterval = time.Second

// shardedReady decides at New whether the backend reads sharded
// channels: on a Cluster whose every primary knows SSUBSCRIBE and
// SPUBLISH (Redis 7.0 or newer) and which accepts an SSUBSCRIBE (an ACL
// may refuse it), unless the mode is off.
func (b *backend) shardedReady(ctx context.Context) (bool, error) {
	mode := b.opts.ShardedPubSub
	if mode == ShardedOff {
		return false, nil
	}
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok {
		if mode == ShardedOn {
			return false, errors.New("redis backend: sharded pub/sub needs Redis Cluster")
		}
		return false, nil
	}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		info, err := n.Do(ctx, "command", "info", "ssubscribe", "spublish").Slice()
		if err != nil {
			return err
		}
		if len(info) != 2 || info[0] == nil || info[1] == nil {
			return fmt.Errorf("%s does not know SSUBSCRIBE (Redis before 7.0)", n.Options().Addr)
		}
		return nil
	})
	if err == nil {
		ps := cc.SSubscribe(ctx, b.keys.busChannel("probe"))
		_, err = ps.ReceiveTimeout(ctx, b.opts.SubscribeTimeout)
		_ = ps.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, b.fail(ctx, "sharded pub/sub probe", err)
		}
		if mode == ShardedOn {
			return false, fmt.Errorf("redis backend: sharded pub/sub: %w", err)
		}
		b.log.Info().Err(err).Msg("sharded pub/sub unavailable: classic pub/sub only")
		return false, nil
	}
	return true, nil
}

// readers is the key of the nodes that read sharded channels, in the
// slot of the membership set (its hash tag is the name of that key).
func (k keys) readers() string { return "{" + k.nodes() + "}:sharded" }

// followPrefixOf returns the channel prefix a script publishes a
// session's follow messages on, as the deployment publishes now: the
// classic P:f:, or the sharded P:{S}:f: in the session's slot, where a
// script may SPUBLISH (the scripts' publish tells them apart by the
// '{', which a key prefix never holds).
func (b *backend) followPrefixOf(session string) string {
	if b.pubSharded.Load() {
		return b.keys.session(session) + "f:"
	}
	return b.keys.followPrefix()
}

// subscribe subscribes fn to a classic channel and, when the backend
// reads sharded channels, to a sharded one (the name the publishers use
// once the deployment publishes sharded), and returns once both are
// active.
func (b *backend) subscribe(ctx context.Context, classic, sharded string, fn func(string), hint func()) (func(), error) {
	if b.shards == nil {
		return b.hub.subscribe(ctx, classic, fn, hint)
	}
	stop, err := b.hub.subscribe(ctx, classic, func(m string) {
		if b.pubSharded.Load() {
			b.kickMode() // see modeLoop
		}
		fn(m)
	}, hint)
	if err != nil {
		return nil, err
	}
	stopS, err := b.shards.subscribe(ctx, sharded, fn, hint)
	if err != nil {
		stop()
		return nil, err
	}
	return func() { stop(); stopS() }, nil
}

// shards holds the hubs of the sharded channels: one pub/sub connection
// per shard that owns a channel in use, since a sharded subscription
// must be made on the shard that owns the channel's slot. A hub is made
// on its first channel and kept until Close; after a loss it dials the
// shard owning its first channel's slot by the reloaded slot map, so a
// hub follows a failover (a new channel of that shard then gets a hub of
// the new primary's address).
type shards struct {
	b    *backend
	mu   sync.Mutex
	hubs map[string]*hub // by the address of the shard's primary
}

func (s *shards) subscribe(ctx context.Context, name string, fn func(string), hint func()) (func(), error) {
	addr, err := s.b.masterOf(ctx, name)
	if err != nil {
		return nil, s.b.fail(ctx, "ssubscribe", err)
	}
	s.mu.Lock()
	h := s.hubs[addr]
	if h == nil {
		if s.hubs == nil {
			s.mu.Unlock()
			return nil, errClosed
		}
		h = newHub(s.b, s.b.hub, name)
		s.hubs[addr] = h
	}
	s.mu.Unlock()
	return h.subscribe(ctx, name, fn, hint)
}

func (s *shards) close() {
	s.mu.Lock()
	hubs := s.hubs
	s.hubs = nil
	s.mu.Unlock()
	for _, h := range hubs {
		h.close()
	}
}

// ready and current hold when they hold for the classic hub and for
// every shard's.
func (b *backend) ready() bool   { return b.allHubs((*hub).ready) }
func (b *backend) current() bool { return b.allHubs((*hub).current) }

func (b *backend) allHubs(ok func(*hub) bool) bool {
	if !ok(b.hub) {
		return false
	}
	if b.shards == nil {
		return true
	}
	b.shards.mu.Lock()
	hubs := make([]*hub, 0, len(b.shards.hubs))
	for _, h := range b.shards.hubs {
		hubs = append(hubs, h)
	}
	b.shards.mu.Unlock()
	for _, h := range hubs {
		if !ok(h) {
			return false
		}
	}
	return true
}

// KEYS: nodes, readers. ARGV: node, ttl ms. The heartbeat of a node
// that reads sharded channels: its lease, and the same lease in the
// readers set. Returns the live nodes that do not read sharded.
var readerHeartbeatScript = script(`
local now = now_ms()
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
extend(KEYS[2], tonumber(ARGV[2]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
extend(KEYS[1], tonumber(ARGV[2]))
` + classicNodes)

// KEYS: nodes, readers. Returns the live nodes that do not read sharded.
var modeScript = script(`
local now = now_ms()
` + classicNodes)

// classicNodes ends a script: it prunes the expired readers and returns
// how many live nodes (with now their lease's expiry) are not readers.
const classicNodes = `
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
local n = 0
for _, node in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')) do
  if not redis.call('ZSCORE', KEYS[2], node) then n = n + 1 end
end
return n
`

// heartbeat renews node's lease; a node that reads sharded channels
// renews its place in the readers set with it, and learns whether the
// deployment may publish sharded.
func (b *backend) heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	if b.shards == nil {
		return b.script(ctx, heartbeatScript, []string{b.keys.nodes()}, node, ms(ttl)).Err()
	}
	n, err := b.script(ctx, readerHeartbeatScript, []string{b.keys.nodes(), b.keys.readers()}, node, ms(ttl)).Int64()
	if err == nil {
		b.setMode(n)
	}
	return err
}

// leave drops node's lease and its place in the readers set (the same
// slot: one round trip).
func (b *backend) leave(ctx context.Context, node string) error {
	_, err := b.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRem(ctx, b.keys.nodes(), node)
		p.ZRem(ctx, b.keys.readers(), node)
		return nil
	})
	return err
}

// checkMode asks how many live nodes read only classic channels and
// sets the publish mode from it.
func (b *backend) checkMode(ctx context.Context) error {
	n, err := b.script(ctx, modeScript, []string{b.keys.nodes(), b.keys.readers()}).Int64()
	if err != nil {
		return b.fail(ctx, "pub/sub mode", err)
	}
	b.setMode(n)
	return nil
}

// setMode publishes sharded when no live node reads only classic
// channels (always with ShardedOn).
func (b *backend) setMode(classic int64) {
	sharded := classic == 0 || b.opts.ShardedPubSub == ShardedOn
	if b.pubSharded.Swap(sharded) != sharded {
		b.log.Info().Bool("sharded", sharded).Int64("classic_nodes", classic).Msg("pub/sub publish mode changed")
	}
}

// modeLoop checks the publish mode every interval, so a node that
// reads only classic channels and joins a deployment that publishes
// sharded is noticed within it (and its leaving as quickly); and at
// once when a classic message arrives while this node publishes
// sharded: a node that publishes classic (one of a version without
// sharded pub/sub announces itself as it joins, on the classic
// broadcast channel) is noticed within a round trip of its first
// message.
// A check that fails is tried again after modeRetry, not at the next
// interval.
func (b *backend) modeLoop(every time.Duration) {
	b.periodic(every, b.modeKick, func(ctx context.Context) {
		if err := b.checkMode(ctx); err != nil && ctx.Err() == nil {
			b.log.Debug().Err(err).Msg("pub/sub mode not checked")
			time.AfterFunc(min(every, modeRetry), b.kickMode)
		}
	})
}

// modeRetry is how soon a failed check of the publish mode is tried again.
const modeRetry = 100 * time.Millisecond

// kickMode asks modeLoop to check the publish mode now.
func (b *backend) kickMode() {
	select {
	case b.modeKick <- struct{}{}:
	default: // a check is due already
	}
}

// followPublish is in every script: follow_publish(pfx, stream, msg)
// publishes msg on the follow channel pfx .. stream, with SPUBLISH when
// pfx is a session's sharded prefix (P:{S}:f:, the slot of the
// script's keys, where a script may SPUBLISH), else with PUBLISH.
const followPublish = `
local function follow_publish(pfx, stream, msg)
  if string.find(pfx, '{', 1, true) then
    redis.call('SPUBLISH', pfx .. stream, msg)
  else
    redis.call('PUBLISH', pfx .. stream, msg)
  end
end
`
