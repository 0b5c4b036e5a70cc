package coordinator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// A session holds at most its share of the table; a settled waiter gives
// its place back.
func TestSessionShare(t *testing.T) {
	c := coordinator.New("n1", "i", nil, 10)
	c.SetSessionShare(100) // capped at half the table
	var held []*coordinator.Waiter
	for i := range 5 {
		w, err := c.Register("greedy", "", c.NewID(), "post")
		if err != nil {
			t.Fatalf("waiter %d: %v", i+1, err)
		}
		held = append(held, w)
	}
	if _, err := c.Register("greedy", "", c.NewID(), "post"); !errors.Is(err, coordinator.ErrSessionShare) {
		t.Fatalf("waiter 6: got %v, want ErrSessionShare", err)
	}
	for i := range 5 {
		if _, err := c.Register("other", "", c.NewID(), "post"); err != nil {
			t.Fatalf("other session's waiter %d: %v", i+1, err)
		}
	}
	if _, err := c.Register("third", "", c.NewID(), "post"); !errors.Is(err, coordinator.ErrTooMany) {
		t.Fatalf("past the table: got %v, want ErrTooMany", err)
	}
	held[0].Cancel()
	if _, err := c.Register("greedy", "", c.NewID(), "post"); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
}

// Ids name their owner process and carry 96 random bits.
func TestNewIDUnguessableAndRoutable(t *testing.T) {
	c := coordinator.New("node.with.dots", "inc", nil, 0)
	seen := map[string]bool{}
	for range 100 {
		id := c.NewID()
		owner, ok := coordinator.Owner(id)
		if !ok || owner != c.Instance() {
			t.Fatalf("Owner(%s) = %q, %v; want %q", id, owner, ok, c.Instance())
		}
		random := strings.TrimPrefix(id.Str(), "c."+c.Instance()+".")
		if len(random) != 16 || seen[random] {
			t.Fatalf("id %s: random part %q short or repeated", id, random)
		}
		seen[random] = true
	}
}
