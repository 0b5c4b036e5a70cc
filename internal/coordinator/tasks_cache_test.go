package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func endedTask(id, status string, created time.Time, result int) cluster.Task {
	return cluster.Task{ID: id, Status: status, Created: created, TTL: time.Minute, Result: []byte(strings.Repeat("x", result))}
}

// doneTasks keeps terminal records only, until their TTL ends, within its
// byte bound (the oldest dropped first, one larger than an eighth of the
// bound never kept).
func TestDoneTasks(t *testing.T) {
	now := time.Now()
	d := &doneTasks{max: 8 * 1000}
	d.put(endedTask("working", cluster.TaskWorking, now, 0), now)
	if _, ok := d.get("working", now); ok {
		t.Fatal("a working task was kept")
	}
	for _, s := range []string{cluster.TaskCompleted, cluster.TaskFailed, cluster.TaskCancelled} {
		d.put(endedTask(s, s, now, 10), now)
		if got, ok := d.get(s, now); !ok || got.Status != s {
			t.Fatalf("%s task: got %+v, %v; want it kept", s, got, ok)
		}
	}
	if _, ok := d.get(cluster.TaskCompleted, now.Add(time.Minute)); ok {
		t.Fatal("a record was answered at the end of its TTL")
	}
	d.put(endedTask("huge", cluster.TaskCompleted, now, 1000), now)
	if _, ok := d.get("huge", now); ok {
		t.Fatal("a record over an eighth of the bound was kept")
	}
	d.put(endedTask("expired", cluster.TaskCompleted, now.Add(-time.Hour), 0), now)
	if _, ok := d.get("expired", now); ok {
		t.Fatal("a record past its TTL was kept")
	}
	// Fill past the bound: the oldest go, the bytes stay within it.
	for i := range 200 {
		d.put(endedTask("t"+string(rune('a'+i%26))+strings.Repeat("-", i/26), cluster.TaskCompleted, now, 500), now)
		if d.bytes > d.max {
			t.Fatalf("after %d puts: %d bytes kept, bound %d", i+1, d.bytes, d.max)
		}
	}
	if _, ok := d.get("ta", now); ok {
		t.Fatal("the oldest record was kept past the bound")
	}
	if _, ok := d.get("tr-------", now); !ok {
		t.Fatal("the newest record was dropped")
	}
	if len(d.order) > 2*len(d.byID)+64+1 {
		t.Fatalf("order holds %d ids for %d records", len(d.order), len(d.byID))
	}
	var none *doneTasks
	none.put(endedTask("x", cluster.TaskCompleted, now, 0), now)
	if _, ok := none.get("x", now); ok {
		t.Fatal("a nil cache answered")
	}
}
