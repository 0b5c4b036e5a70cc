package inproc_test

import (
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// A GET stream that carried an event of its own and then stayed idle for
// longer than the history TTL keeps its history while it is open: cut,
// it resumes with Last-Event-ID on another node and gets later events.
func TestIdleGetStreamResumedAfterHistoryTTL(t *testing.T) {
	const ttl = 2 * time.Second
	const updated = "notifications/resources/updated"
	r := newRig(t, inproc.Options{HTTP: mcp.HTTPOptions{HistoryTTL: ttl}})
	cl := r.session(t, 0, nil)
	callAt(t, cl, r.Nodes[0].URL, "resources/subscribe", map[string]any{"uri": resourceURI}).Result(t, nil)
	st := mcptest.OpenGet(t, cl, r.Nodes[1].URL, "")
	text(t, callAt(t, cl, r.Nodes[0].URL, "tools/call", map[string]any{"name": "touch"}).Final())
	mustWait(t, st, "resource update", mcptest.Has(updated, 1))
	time.Sleep(3 * ttl)
	st.Close()
	last := lastID(st)

	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, last)
	text(t, callAt(t, cl, r.Nodes[0].URL, "tools/call", map[string]any{"name": "touch"}).Final())
	mustWait(t, resumed, "later update", mcptest.Has(updated, 1))
}

// A call silent for longer than the history TTL keeps its POST stream's
// history while it runs: cut, the stream resumes on another node and
// gets the final response.
func TestSilentCallStreamResumedAfterHistoryTTL(t *testing.T) {
	const ttl = 2 * time.Second
	r := newRig(t, inproc.Options{HTTP: mcp.HTTPOptions{HistoryTTL: ttl}})
	cl := r.session(t, 0, nil)
	id, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 1}))
	r.waitStep(t, "n1 1")
	mustWait(t, st, "progress", mcptest.Has("notifications/progress", 1))
	time.Sleep(3 * ttl)
	st.Close()
	last := lastID(st)

	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, last)
	r.release <- struct{}{}
	mustWait(t, resumed, "final response", hasFinal)
	if f := mcptest.Final(resumed.Messages()); f.ID != id || text(t, f) != "done on n1" {
		t.Fatalf("resumed stream: %s", describe(resumed.Messages()))
	}
}
