package backendtest

import (
	"maps"
	"testing"
)

func (s *suite) testRegistry(t *testing.T) {
	b := s.newBackend(t)
	ctx := t.Context()
	all, err := b.Registry.All(ctx)
	must(t, "All", err)
	if len(all) != 0 {
		t.Fatalf("All on a fresh backend: got %v, want nothing", all)
	}
	k1, k2 := uniq("tool:a"), uniq("prompt:b")
	for _, step := range []struct {
		key         string
		on, changed bool
	}{
		{k1, false, true}, {k1, false, false}, {k1, true, true},
		{k2, true, true}, {k2, true, false}, {k2, false, true},
	} {
		changed, err := b.Registry.Set(ctx, step.key, step.on)
		must(t, "Set", err)
		if changed != step.changed {
			t.Fatalf("Set(%s, %v): changed %v, want %v", step.key, step.on, changed, step.changed)
		}
	}
	all, err = b.Registry.All(ctx)
	must(t, "All", err)
	if want := map[string]bool{k1: true, k2: false}; !maps.Equal(all, want) {
		t.Fatalf("All: got %v, want %v", all, want)
	}
}
