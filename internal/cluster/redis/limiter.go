package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// limiter implements cluster.Limiter: a bucket is one hash, a set one
// sorted set of member → lease expiry (ms, Redis clock), each under a
// hash tag of its own, so every script touches one key (one slot) and a
// batch is one pipeline.
type limiter backend

var _ cluster.Limiter = (*limiter)(nil)

// takeScript debits token buckets. KEYS: the buckets. ARGV: token, then
// n, rate (tokens a second) and burst of each bucket. Returns, per
// bucket, the wait in ms until it holds a whole token and its balance
// (a string: Redis would truncate a Lua number). A bucket keeps its
// balance (t), the time of it (at), and the token (k) and answer (w) of
// the last call, so a retry of that call answers the same without
// debiting again. The key expires once the bucket would be full again:
// an absent bucket is a full one. The arithmetic is cluster.Refill's.
var takeScript = script(`
local now, out = now_ms(), {}
for i, key in ipairs(KEYS) do
  local j = 3 * i - 1
  local n, rate, burst = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local v = redis.call('HMGET', key, 't', 'at', 'k', 'w')
  if v[3] == ARGV[1] then
    out[#out + 1], out[#out + 2] = tonumber(v[4]), v[1]
  else
    local tokens = burst
    if v[1] then tokens = tonumber(v[1]) + math.max(0, now - tonumber(v[2])) * rate / 1000 end
    tokens = math.max(math.min(tokens, burst) - n, -burst)
    local wait = 0
    if tokens < 1 then wait = math.ceil((1 - tokens) * 1000 / rate) end
    local t = string.format('%.6f', tokens)
    redis.call('HSET', key, 't', t, 'at', now, 'k', ARGV[1], 'w', wait)
    redis.call('PEXPIRE', key, math.ceil((burst - tokens) * 1000 / rate) + 1)
    out[#out + 1], out[#out + 2] = wait, t
  end
end
return out
`)

// acquireScript leases a member of a set. KEYS: set. ARGV: member, ttl
// ms, max. Returns {1, 0}, or {0, wait ms} when the set is full. A member
// already there is renewed (so a retry is harmless).
var acquireScript = script(leaseFns + `
local now = now_ms()
local wait = lease_wait(KEYS[1], ARGV[1], tonumber(ARGV[3]), now)
if wait then return {0, wait} end
lease_take(KEYS[1], ARGV[1], tonumber(ARGV[2]), now)
return {1, 0}
`)

// renewLeaseScript renews the leases still held among members of a set.
// KEYS: set. ARGV: ttl ms, member, ...
var renewLeaseScript = script(`
local now, ttl = now_ms(), tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
local n = 0
for i = 2, #ARGV do n = n + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + ttl, ARGV[i]) end
if n > 0 then extend(KEYS[1], ttl) end
return n
`)

func (k keys) bucket(key string) string   { return k.prefix + ":lb:{" + tag(key) + "}" }
func (k keys) leaseSet(key string) string { return k.prefix + ":ls:{" + tag(key) + "}" }

// Take runs one script per manyBatch buckets on a single server, one per
// bucket on Cluster (each bucket has a slot of its own), all in one
// pipeline. Debits of one key are summed first: a script recognises a
// retry by its token, which a key met twice in one call would hold
// already.
func (m *limiter) Take(ctx context.Context, debits []cluster.Debit) ([]cluster.Taken, error) {
	b := (*backend)(m)
	for _, d := range debits {
		if d.Rate <= 0 || d.Burst <= 0 || d.N < 0 {
			return nil, fmt.Errorf("limiter %q: rate and burst must be positive, n not negative", d.Key)
		}
	}
	if len(debits) == 0 {
		return nil, nil
	}
	buckets, of := mergeDebits(debits)
	size := manyBatch
	if !b.single {
		size = 1
	}
	var cmds []*goredis.Cmd
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for batch := range slices.Chunk(buckets, size) {
			keys := make([]string, len(batch))
			args := make([]any, 1, 1+3*len(batch))
			args[0] = b.token()
			for i, d := range batch {
				keys[i] = b.keys.bucket(d.Key)
				args = append(args, d.N, strconv.FormatFloat(d.Rate, 'f', -1, 64), d.Burst)
			}
			cmds = append(cmds, takeScript.Eval(ctx, p, keys, args...))
		}
		return nil
	})
	if err != nil {
		return nil, b.fail(ctx, "limiter take", err)
	}
	states := make([]cluster.Taken, 0, len(buckets))
	for _, c := range cmds {
		r, err := c.Slice()
		if err != nil {
			return nil, b.fail(ctx, "limiter take", err)
		}
		for i := 0; i+1 < len(r); i += 2 {
			wait, ok := r[i].(int64)
			s, ok2 := r[i+1].(string)
			bal, err := strconv.ParseFloat(s, 64)
			if !ok || !ok2 || err != nil {
				return nil, fmt.Errorf("limiter take: malformed answer %v", r)
			}
			states = append(states, cluster.Taken{Wait: time.Duration(wait) * time.Millisecond, Balance: bal})
		}
	}
	if len(states) != len(buckets) {
		return nil, fmt.Errorf("limiter take: %d answers, want %d", len(states), len(buckets))
	}
	taken := make([]cluster.Taken, len(debits))
	for i, j := range of {
		taken[i] = states[j]
	}
	return taken, nil
}

// mergeDebits sums the debits of each key: it returns one debit per key,
// in order of first appearance, and the index of each debit's among them.
func mergeDebits(debits []cluster.Debit) ([]cluster.Debit, []int) {
	of := make([]int, len(debits))
	at := make(map[string]int, len(debits))
	merged := make([]cluster.Debit, 0, len(debits))
	for i, d := range debits {
		j, ok := at[d.Key]
		if !ok {
			j = len(merged)
			at[d.Key] = j
			merged = append(merged, d)
		} else {
			merged[j].N += d.N
		}
		of[i] = j
	}
	return merged, of
}

func (m *limiter) Acquire(ctx context.Context, key, member string, ttl time.Duration, max int) (bool, time.Duration, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return false, 0, fmt.Errorf("limiter %q: ttl must be positive", key)
	}
	r, err := b.script(ctx, acquireScript, []string{b.keys.leaseSet(key)}, member, ms(ttl), max).Int64Slice()
	if err != nil {
		return false, 0, b.fail(ctx, "limiter acquire", err)
	}
	if len(r) != 2 {
		return false, 0, fmt.Errorf("limiter acquire: %d answers, want 2", len(r))
	}
	return r[0] == 1, time.Duration(r[1]) * time.Millisecond, nil
}

// Renew runs one script per set (and TTL), with every member of it, all
// in one pipeline.
func (m *limiter) Renew(ctx context.Context, leases []cluster.Lease) error {
	b := (*backend)(m)
	type group struct {
		key string
		ttl time.Duration
	}
	members := map[group][]any{}
	var order []group
	for _, l := range leases {
		if l.TTL <= 0 {
			continue
		}
		g := group{l.Key, l.TTL}
		if _, ok := members[g]; !ok {
			order = append(order, g)
			members[g] = []any{ms(l.TTL)}
		}
		members[g] = append(members[g], l.Member)
	}
	if len(order) == 0 {
		return nil
	}
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, g := range order {
			renewLeaseScript.Eval(ctx, p, []string{b.keys.leaseSet(g.key)}, members[g]...)
		}
		return nil
	})
	if err != nil {
		return b.fail(ctx, "limiter renew", err)
	}
	return nil
}

func (m *limiter) Release(ctx context.Context, key, member string) error {
	b := (*backend)(m)
	if err := b.client.ZRem(ctx, b.keys.leaseSet(key), member).Err(); err != nil {
		return b.fail(ctx, "limiter release", err)
	}
	return nil
}
