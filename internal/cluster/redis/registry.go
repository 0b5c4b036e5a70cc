package redis

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// registry implements cluster.Registry with one hash, key → "1" or "0".
type registry backend

var _ cluster.Registry = (*registry)(nil)

func (m *registry) Set(ctx context.Context, key string, on bool) (bool, error) {
	b := (*backend)(m)
	v := "0"
	if on {
		v = "1"
	}
	r, err := registrySetScript.Run(ctx, b.client, []string{b.keys.registry()}, key, v).Int64()
	if err != nil {
		return false, b.fail(ctx, "registry set", err)
	}
	return r == 1, nil
}

func (m *registry) All(ctx context.Context) (map[string]bool, error) {
	b := (*backend)(m)
	all, err := b.client.HGetAll(ctx, b.keys.registry()).Result()
	if err != nil {
		return nil, b.fail(ctx, "registry", err)
	}
	out := make(map[string]bool, len(all))
	for k, v := range all {
		out[k] = v == "1"
	}
	return out, nil
}
