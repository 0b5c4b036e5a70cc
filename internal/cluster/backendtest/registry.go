package backendtest

import (
	"maps"
	"sync"
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
	k1, k2, k3 := uniq("tool:a"), uniq("prompt:b"), uniq("resource:c")
	for _, step := range []struct {
		key            string
		on, unset, was bool
	}{
		// Unrecorded, a key has the state unset.
		{k1, false, true, true}, {k1, false, true, false}, {k1, true, false, false},
		{k2, true, true, true}, {k2, true, false, true}, {k2, false, true, true},
		{k3, false, false, false},
	} {
		was, err := b.Registry.Swap(ctx, step.key, step.on, step.unset)
		must(t, "Swap", err)
		if was != step.was {
			t.Fatalf("Swap(%s, %v, unset %v): was %v, want %v", step.key, step.on, step.unset, was, step.was)
		}
	}
	all, err = b.Registry.All(ctx)
	must(t, "All", err)
	if want := map[string]bool{k1: true, k2: false, k3: false}; !maps.Equal(all, want) {
		t.Fatalf("All: got %v, want %v", all, want)
	}

	k4 := uniq("tool:d")
	for i, want := range []bool{true, false, true} {
		on, err := b.Registry.Toggle(ctx, k4, false)
		must(t, "Toggle", err)
		if on != want {
			t.Fatalf("Toggle %d of an unrecorded, disabled key: got %v, want %v", i+1, on, want)
		}
	}
	if on, err := b.Registry.Toggle(ctx, uniq("tool:e"), true); err != nil || on {
		t.Fatalf("Toggle of an unrecorded, enabled key: got %v, %v; want false", on, err)
	}
	all, err = b.Registry.All(ctx)
	must(t, "All", err)
	if len(all) != 5 || !all[k4] {
		t.Fatalf("All after the toggles: got %v, want 5 keys with %s enabled", all, k4)
	}

	t.Run("Concurrent", func(t *testing.T) {
		// Of n concurrent Swap(true) of a disabled key exactly one sees
		// it change; n concurrent toggles flip it n times, each seeing a
		// state of its own (as many enabling as disabling).
		const n = 16
		key := uniq("tool:f")
		var wg sync.WaitGroup
		var mu sync.Mutex
		changed, enabled := 0, 0
		for range n {
			wg.Go(func() {
				was, err := b.Registry.Swap(ctx, key, true, false)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !was {
					changed++
				}
			})
		}
		wg.Wait()
		if changed != 1 {
			t.Fatalf("%d concurrent Swap(true): %d saw a change, want 1", n, changed)
		}
		for range n {
			wg.Go(func() {
				on, err := b.Registry.Toggle(ctx, key, false)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if on {
					enabled++
				}
			})
		}
		wg.Wait()
		all, err := b.Registry.All(ctx)
		must(t, "All", err)
		if enabled != n/2 || !all[key] {
			t.Fatalf("%d concurrent toggles of an enabled key: %d enabled it, now %v; want %d and enabled", n, enabled, all[key], n/2)
		}
	})
}
