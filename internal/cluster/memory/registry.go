package memory

import (
	"context"
	"maps"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// registry implements cluster.Registry.
type registry store

var _ cluster.Registry = (*registry)(nil)

func (m *registry) Swap(ctx context.Context, key string, on, unset bool) (bool, error) {
	return m.update(ctx, "Registry.Swap", key, unset, func(bool) bool { return on })
}

func (m *registry) Toggle(ctx context.Context, key string, unset bool) (bool, error) {
	was, err := m.update(ctx, "Registry.Toggle", key, unset, func(was bool) bool { return !was })
	if err != nil {
		return false, err
	}
	return !was, nil
}

// update sets key to next(its state) under the lock and returns the
// state before.
func (m *registry) update(ctx context.Context, op, key string, unset bool, next func(bool) bool) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, op); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	was, ok := s.features[key]
	if !ok {
		was = unset
	}
	if s.features == nil {
		s.features = map[string]bool{}
	}
	s.features[key] = next(was)
	return was, nil
}

func (m *registry) All(ctx context.Context) (map[string]bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Registry.All"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.features), nil
}
