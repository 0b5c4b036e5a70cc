package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// members implements cluster.Membership with one sorted set of leases
// scored by expiry (Redis clock): a lease and the member list cannot
// disagree, and every call is one round trip.
type members backend

var _ cluster.Membership = (*members)(nil)

func (m *members) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	b := (*backend)(m)
	if ttl <= 0 {
		return fmt.Errorf("heartbeat %q: ttl must be positive", node)
	}
	if err := b.heartbeat(ctx, node, ttl); err != nil {
		return b.fail(ctx, "heartbeat", err)
	}
	return nil
}

func (m *members) Alive(ctx context.Context, node string) (bool, error) {
	b := (*backend)(m)
	r, err := b.script(ctx, aliveScript, []string{b.keys.nodes()}, node).Int64()
	if err != nil {
		return false, b.fail(ctx, "alive", err)
	}
	return r == 1, nil
}

func (m *members) Leave(ctx context.Context, node string) error {
	b := (*backend)(m)
	if err := b.leave(ctx, node); err != nil {
		return b.fail(ctx, "leave", err)
	}
	return nil
}

// Members returns the live nodes sorted by name.
func (m *members) Members(ctx context.Context) ([]string, error) {
	b := (*backend)(m)
	nodes, err := b.script(ctx, membersScript, []string{b.keys.nodes()}).StringSlice()
	if err != nil {
		return nil, b.fail(ctx, "members", err)
	}
	slices.Sort(nodes)
	return nodes, nil
}

// claims implements cluster.Claims: one string key per claim, PX = TTL.
// "session:<id>:<rest>" claims live in the session's slot and are listed
// in its claim index, so End drops them. Every call is one round trip.
type claims backend

var _ cluster.Claims = (*claims)(nil)

func (m *claims) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return "", fmt.Errorf("claim %q: ttl must be positive", key)
	}
	keys, member := b.keys.claimKeys(key)
	prev, err := b.script(ctx, claimScript, keys, owner, ms(ttl), member).Text()
	if err != nil {
		return "", b.fail(ctx, "claim", err)
	}
	return prev, nil
}

func (m *claims) Renew(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return false, fmt.Errorf("claim %q: ttl must be positive", key)
	}
	keys, _ := b.keys.claimKeys(key)
	r, err := b.script(ctx, renewScript, keys, owner, ms(ttl)).Int64()
	if err != nil {
		return false, b.fail(ctx, "renew claim", err)
	}
	return r == 1, nil
}

func (m *claims) Release(ctx context.Context, key, owner string) error {
	b := (*backend)(m)
	keys, member := b.keys.claimKeys(key)
	if err := b.script(ctx, releaseScript, keys, owner, member).Err(); err != nil {
		return b.fail(ctx, "release claim", err)
	}
	return nil
}

// claimIf makes c.Owner the holder of c.Key for c.TTL when nobody holds
// it, or from or c.Owner does (cluster.TaskUpdate.Take), and reports
// whether it did.
func (m *claims) claimIf(ctx context.Context, c *cluster.TaskClaim, from string) (bool, error) {
	b := (*backend)(m)
	keys, member := b.keys.claimKeys(c.Key)
	r, err := b.script(ctx, claimIfScript, keys, c.Owner, ms(c.TTL), member, from).Int64()
	if err != nil {
		return false, b.fail(ctx, "claim", err)
	}
	return r == 1, nil
}

// claimKeys returns the KEYS of a claim's scripts: its Redis key, and
// its session claim index when it has one; and its member there.
func (k keys) claimKeys(key string) (keys []string, member string) {
	rk, index, member := k.claim(key)
	keys = []string{rk}
	if index != "" {
		keys = append(keys, index)
	}
	return keys, member
}

func (m *claims) Holder(ctx context.Context, key string) (string, error) {
	b := (*backend)(m)
	rk, _, _ := b.keys.claim(key)
	owner, err := b.client.Get(ctx, rk).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", b.fail(ctx, "claim holder", err)
	}
	return owner, nil
}

// Once is SET NX PX on a key of its own namespace, holding a token of
// the call so that a retry of it still answers true.
func (m *claims) Once(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return false, fmt.Errorf("once %q: ttl must be positive", key)
	}
	r, err := b.script(ctx, onceScript, []string{b.keys.once(key)}, b.token(), ms(ttl)).Int64()
	if err != nil {
		return false, b.fail(ctx, "once", err)
	}
	return r == 1, nil
}

// manyBatch bounds the claims or sessions of one batched script call.
const manyBatch = 256

// RenewMany renews the claims with one script call per manyBatch claims
// on a single server, all sent in one pipeline; on Cluster, one call per
// claim (each in its session's slot), pipelined.
func (m *claims) RenewMany(ctx context.Context, claims []cluster.Held, ttl time.Duration) ([]bool, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return nil, fmt.Errorf("renew claims: ttl must be positive")
	}
	size := manyBatch
	if !b.single {
		size = 1
	}
	return b.batched(ctx, "renew claims", len(claims), func(p goredis.Pipeliner) (cmds []*goredis.Cmd) {
		for batch := range slices.Chunk(claims, size) {
			keys := make([]string, 0, 2*len(batch))
			args := make([]any, 1, 1+2*len(batch))
			args[0] = ms(ttl)
			for _, c := range batch {
				rk, index, _ := b.keys.claim(c.Key)
				keys = append(keys, rk)
				flag := "0"
				if index != "" {
					keys, flag = append(keys, index), "1"
				}
				args = append(args, c.Owner, flag)
			}
			cmds = append(cmds, renewManyScript.Eval(ctx, p, keys, args...))
		}
		return cmds
	})
}

// batched runs the script calls queue adds to one pipeline, each
// answering 1 or 0 for each of its items, and returns the answers of all
// n items in order.
func (b *backend) batched(ctx context.Context, op string, n int, queue func(p goredis.Pipeliner) []*goredis.Cmd) ([]bool, error) {
	var cmds []*goredis.Cmd
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		cmds = queue(p)
		return nil
	})
	if err != nil {
		return nil, b.fail(ctx, op, err)
	}
	out := make([]bool, 0, n)
	for _, c := range cmds {
		r, err := c.Int64Slice()
		if err != nil {
			return nil, b.fail(ctx, op, err)
		}
		for _, v := range r {
			out = append(out, v == 1)
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("%s: %d answers for %d items", op, len(out), n)
	}
	return out, nil
}
