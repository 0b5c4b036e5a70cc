package mcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// With a backlog of one queued notification, a handler that sends many
// waits for each to be recorded instead of queueing them: the client
// still gets every notification, in order, then the result.
func TestStreamBacklogBoundsQueuedNotifications(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxStreamBacklog: 1}})
	c := session(t, n.url, mcp.Version20251125, nil)
	const steps = 200
	st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("progress", map[string]any{"steps": steps}, true))
	if !st.WaitFor(20*time.Second, finalResponse) {
		t.Fatalf("no result after %d progress notifications", steps)
	}
	var got []float64
	for _, m := range st.Messages() {
		if m.Method != "notifications/progress" {
			continue
		}
		var p struct{ Progress float64 }
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Progress)
	}
	if len(got) != steps {
		t.Fatalf("%d progress notifications, want %d", len(got), steps)
	}
	for i, p := range got {
		if p != float64(i+1) {
			t.Fatalf("notification %d has progress %v: out of order", i, p)
		}
	}
	if err := (&mcp.HTTPOptions{MaxStreamBacklog: -1}).Validate(); err == nil {
		t.Error("a negative MaxStreamBacklog was accepted")
	}
}
