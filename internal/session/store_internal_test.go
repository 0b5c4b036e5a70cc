package session

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
)

// The cache holds at most MaxCached sessions, the one just loaded among
// them.
func TestCacheBound(t *testing.T) {
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	st := NewStore(b.Sessions, Options{TTL: time.Minute, CacheTTL: time.Hour, MaxCached: 2})
	ctx := t.Context()
	for i := range 5 {
		id := fmt.Sprint("s", i)
		if err := st.Create(ctx, &Session{ID: id, Version: "v", Capabilities: json.RawMessage(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load(ctx, id); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		n, cached := len(st.cached), st.cached[id] != nil
		st.mu.Unlock()
		if n > 2 || !cached {
			t.Fatalf("after loading %s: %d cached, it among them: %v; want at most 2 and it", id, n, cached)
		}
	}
}
