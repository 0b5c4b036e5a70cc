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
	if err := heartbeatScript.Run(ctx, b.client, []string{b.keys.nodes()}, node, ms(ttl)).Err(); err != nil {
		return b.fail(ctx, "heartbeat", err)
	}
	return nil
}

func (m *members) Alive(ctx context.Context, node string) (bool, error) {
	b := (*backend)(m)
	r, err := aliveScript.Run(ctx, b.client, []string{b.keys.nodes()}, node).Int64()
	if err != nil {
		return false, b.fail(ctx, "alive", err)
	}
	return r == 1, nil
}

func (m *members) Leave(ctx context.Context, node string) error {
	b := (*backend)(m)
	if err := b.client.ZRem(ctx, b.keys.nodes(), node).Err(); err != nil {
		return b.fail(ctx, "leave", err)
	}
	return nil
}

// Members returns the live nodes sorted by name.
func (m *members) Members(ctx context.Context) ([]string, error) {
	b := (*backend)(m)
	nodes, err := membersScript.Run(ctx, b.client, []string{b.keys.nodes()}).StringSlice()
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
	rk, index, member := b.keys.claim(key)
	keys := []string{rk}
	if index != "" {
		keys = append(keys, index)
	}
	prev, err := claimScript.Run(ctx, b.client, keys, owner, ms(ttl), member).Text()
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
	rk, index, _ := b.keys.claim(key)
	keys := []string{rk}
	if index != "" {
		keys = append(keys, index)
	}
	r, err := renewScript.Run(ctx, b.client, keys, owner, ms(ttl)).Int64()
	if err != nil {
		return false, b.fail(ctx, "renew claim", err)
	}
	return r == 1, nil
}

func (m *claims) Release(ctx context.Context, key, owner string) error {
	b := (*backend)(m)
	rk, index, member := b.keys.claim(key)
	keys := []string{rk}
	if index != "" {
		keys = append(keys, index)
	}
	if err := releaseScript.Run(ctx, b.client, keys, owner, member).Err(); err != nil {
		return b.fail(ctx, "release claim", err)
	}
	return nil
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
	r, err := onceScript.Run(ctx, b.client, []string{b.keys.once(key)}, b.token(), ms(ttl)).Int64()
	if err != nil {
		return false, b.fail(ctx, "once", err)
	}
	return r == 1, nil
}
