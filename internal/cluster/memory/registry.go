package memory

import (
	"context"
	"maps"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// registry implements cluster.Registry.
type registry store

var _ cluster.Registry = (*registry)(nil)

func (m *registry) Set(ctx context.Context, key string, on bool) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Registry.Set"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.features[key]; ok && old == on {
		return false, nil
	}
	if s.features == nil {
		s.features = map[string]bool{}
	}
	s.features[key] = on
	return true, nil
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
