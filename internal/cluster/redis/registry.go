package redis

import (
	"context"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// registry implements cluster.Registry with one hash, key → "1" or "0"
// (and "\0" + key → the token of the call that last changed it; see
// registrySwapScript).
type registry backend

var _ cluster.Registry = (*registry)(nil)

func (m *registry) Swap(ctx context.Context, key string, on, unset bool) (bool, error) {
	b := (*backend)(m)
	r, err := b.script(ctx, registrySwapScript, []string{b.keys.registry()}, key, flag(on), flag(unset), b.token()).Int64()
	if err != nil {
		return false, b.fail(ctx, "registry swap", err)
	}
	return r == 1, nil
}

func (m *registry) Toggle(ctx context.Context, key string, unset bool) (bool, error) {
	b := (*backend)(m)
	r, err := b.script(ctx, registryToggleScript, []string{b.keys.registry()}, key, flag(unset), b.token()).Int64()
	if err != nil {
		return false, b.fail(ctx, "registry toggle", err)
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
		if !strings.HasPrefix(k, "\x00") {
			out[k] = v == "1"
		}
	}
	return out, nil
}
