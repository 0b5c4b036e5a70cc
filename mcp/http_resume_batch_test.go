package mcp_test

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// A burst of progress is recorded in group commits while the client
// reads it; the client is cut after some event N, part of the burst
// still queued or in flight, and resumes on another node after N: it
// gets N+1 to the end exactly once, in order, with ids that follow on
// without a gap.
func TestResumeOnOtherNodeDuringGroupCommits(t *testing.T) {
	nodes, _ := redisNodes(t, 2, nodeOptions{}, nil)
	a, b := nodes[0], nodes[1]
	c := session(t, a.url, mcp.Version20251125, nil)
	const burst = 400
	st, id := openLegacy(t, c, a.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{burst, burst}}, true))
	if !st.WaitFor(10*time.Second, countAtLeast("notifications/progress", 50)) {
		t.Fatal("no progress before the cut")
	}
	st.Close() // the cut, in the middle of the burst
	evs := st.Events()
	var seen []*jsonrpc.Message
	var lastID string
	for _, ev := range evs {
		if ev.ID != "" {
			lastID = ev.ID
		}
		if len(ev.Data) > 0 {
			m, err := jsonrpc.Decode(ev.Data)
			if err != nil {
				t.Fatalf("event %q: %v", ev.Data, err)
			}
			seen = append(seen, m)
		}
	}
	if lastID == "" {
		t.Fatal("no event id to resume from")
	}
	a.probe.waitReached(t, 0)
	a.probe.release <- struct{}{} // the second burst is produced while the client is away

	resumed := getStream(t, c, b.url, lastID)
	select {
	case <-resumed.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed stream did not end with the final response")
	}
	got := append(mcptest.ProgressValues(seen), mcptest.ProgressValues(resumed.Messages())...)
	want := make([]float64, 2*burst)
	for i := range want {
		want[i] = float64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("progress: %d values, want 1..%d exactly once in order (saw %d before the cut)", len(got), 2*burst, len(mcptest.ProgressValues(seen)))
	}
	ms := resumed.Messages()
	if f := ms[len(ms)-1]; f.Kind() != jsonrpc.KindResponse || f.ID != id || f.Error != nil {
		t.Fatalf("the resumed stream ends with %+v, want the result of %v", f, id)
	}
	prev, err := sse.ParseEventID(lastID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range resumed.Events() {
		if ev.ID == "" {
			continue
		}
		eid, err := sse.ParseEventID(ev.ID)
		if err != nil || eid.Stream != prev.Stream || eid.Seq != prev.Seq+1 {
			t.Fatalf("event id %q after %q: want the next seq of the same stream", ev.ID, prev)
		}
		prev = eid
	}
}
