package inproc_test

// The flows of docs/ARCHITECTURE.md ("The flows and their files") on three in-process nodes A (n0), B (n1) and
// C (n2), each request pinned to a node by URL.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Flows 1 and 2: initialize on A, calls on B and C; a plain call answers
// with JSON, and the first progress notification upgrades the response
// to SSE.
func TestInitializeOnACallOnB(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	for i, n := range r.Nodes {
		resp := callAt(t, cl, n.URL, "tools/call", map[string]any{"name": "whoami"})
		if resp.SSE {
			t.Fatalf("a call without progress on %s was upgraded to SSE", n.ID)
		}
		if got, want := text(t, resp.Final()), fmt.Sprintf("n%d", i); got != want {
			t.Fatalf("call at %s ran on %q", n.ID, got)
		}
	}

	_, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 1}))
	r.waitStep(t, "n1 1")
	mustWait(t, st, "progress before the final response", mcptest.Has("notifications/progress", 1))
	if hasFinal(st.Messages()) {
		t.Fatal("the final response came before the handler returned")
	}
	r.release <- struct{}{}
	mustWait(t, st, "final response", hasFinal)
	if got := text(t, mcptest.Final(st.Messages())); got != "done on n1" {
		t.Fatalf("got %q", got)
	}
	// Every event has an id naming the stream, unique in the cluster.
	seen := map[string]bool{}
	for _, ev := range st.Events() {
		if ev.ID == "" || seen[ev.ID] {
			t.Fatalf("event id %q missing or repeated", ev.ID)
		}
		seen[ev.ID] = true
	}
}

// Flow 3: the handler on B asks for sampling; the reply lands on C and
// wakes B's waiter. A reply with the same id posted on another session
// never reaches it.
func TestSamplingReplyOnCWakesB(t *testing.T) {
	r := newRig(t, inproc.Options{})
	caps := map[string]any{"sampling": map[string]any{}}
	cl := r.session(t, 0, caps)
	other := r.session(t, 2, caps)
	_, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("sample", nil))
	mustWait(t, st, "sampling request", mcptest.Has("sampling/createMessage", 1))
	req := st.Messages()[0]
	reply := func(text string) *jsonrpc.Message {
		res, _ := json.Marshal(map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": text}})
		return &jsonrpc.Message{ID: req.ID, Result: res}
	}
	// A forged reply on the other session is accepted and dropped.
	if resp := post(t, other, r.Nodes[2].URL, reply("forged")); resp.Status != http.StatusAccepted {
		t.Fatalf("foreign reply: got %d", resp.Status)
	}
	if resp := post(t, cl, r.Nodes[2].URL, reply("real")); resp.Status != http.StatusAccepted {
		t.Fatalf("reply on C: got %d %s", resp.Status, resp.Body)
	}
	mustWait(t, st, "final response", hasFinal)
	if got := text(t, mcptest.Final(st.Messages())); got != "real via n1" {
		t.Fatalf("got %q, want the real reply answered on n1", got)
	}
}

// Flow 4: the POST stream of a call on B is cut; the client resumes it on
// C with Last-Event-ID, gets the event it missed from history, then
// follows the call live to its final response: every event exactly once.
func TestCutPostStreamResumedOnC(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	id, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 3}))
	r.waitStep(t, "n1 1")
	mustWait(t, st, "first progress", mcptest.Has("notifications/progress", 1))
	st.Close()
	last := lastID(st)
	r.release <- struct{}{}
	r.waitStep(t, "n1 2") // progress 2 is in history, seen by no one

	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, last)
	mustWait(t, resumed, "missed progress", mcptest.Has("notifications/progress", 1))
	if hasFinal(resumed.Messages()) {
		t.Fatal("final response before the call ended")
	}
	r.release <- struct{}{}
	r.waitStep(t, "n1 3")
	r.release <- struct{}{}
	mustWait(t, resumed, "final response", hasFinal)
	msgs := resumed.Messages()
	if f := mcptest.Final(msgs); f.ID != id || text(t, f) != "done on n1" {
		t.Fatalf("resumed stream: %s", describe(msgs))
	}
	got := mcptest.ProgressValues(append(st.Messages(), msgs...))
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("progress across both connections: got %v, want [1 2 3]", got)
	}
}

// Flow 5: B is killed mid-call. Its lease lapses, and C, following the
// call's stream for the client, ends it with -31003 for that request.
func TestNodeDeathEndsItsCalls(t *testing.T) {
	const lease = 300 * time.Millisecond
	r := newRig(t, inproc.Options{HTTP: httpOpts(lease)})
	cl := r.session(t, 0, nil)
	id, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 2}))
	r.waitStep(t, "n1 1")
	mustWait(t, st, "first progress", mcptest.Has("notifications/progress", 1))
	killed := time.Now()
	r.Nodes[1].Kill()
	<-st.Done()

	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, lastID(st))
	mustWait(t, resumed, "node-lost error", hasFinal)
	took := time.Since(killed)
	f := mcptest.Final(resumed.Messages())
	if f.ID != id || f.Error == nil || f.Error.Code != jsonrpc.CodeNodeLost {
		t.Fatalf("got %s, want error %d for %v", describe(resumed.Messages()), jsonrpc.CodeNodeLost, id)
	}
	// The lease lapses after lease, and the watch checks every lease/2.
	if limit := 2*lease + 200*time.Millisecond; took > limit {
		t.Fatalf("the call ended %v after the kill, want within %v", took, limit)
	}
	if r.Alive(r.Nodes[1]) {
		t.Fatal("the killed node still holds a lease")
	}
	// The survivors serve the session.
	if got := text(t, callAt(t, cl, r.Nodes[0].URL, "tools/call", map[string]any{"name": "whoami"}).Final()); got != "n0" {
		t.Fatalf("got %q", got)
	}
}

// Flow 6: notifications/cancelled lands on C for a call running on B and
// reaches B's handler.
func TestCancelOnCReachesB(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	id, _ := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 2}))
	r.waitStep(t, "n1 1")
	cancel(t, cl, r.Nodes[2].URL, id)
	waitCancelled(t, r, "n1")
}

func cancel(t *testing.T, cl *mcptest.Client, url string, id jsonrpc.ID) {
	t.Helper()
	n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": id, "reason": "test"})
	if resp := post(t, cl, url, n); resp.Status != http.StatusAccepted {
		t.Fatalf("cancel: got %d %s", resp.Status, resp.Body)
	}
}

func waitCancelled(t *testing.T, r *rig, node string) {
	t.Helper()
	select {
	case got := <-r.cancelled:
		if got != node {
			t.Fatalf("cancelled on %s, want %s", got, node)
		}
	case <-time.After(soon):
		t.Fatalf("the handler on %s was not cancelled", node)
	}
}

// Flow 7: a list change made on any node reaches every session exactly
// once on its GET stream, wherever that is; resources/updated reaches
// exactly the subscribed sessions.
func TestNotificationsFanOut(t *testing.T) {
	r := newRig(t, inproc.Options{})
	const listChanged, updated = "notifications/tools/list_changed", "notifications/resources/updated"
	var streams []*mcptest.Stream
	for i := range 6 {
		cl := r.session(t, i%3, nil)
		streams = append(streams, mcptest.OpenGet(t, cl, r.Nodes[(i+1)%3].URL, ""))
		if i%2 == 0 {
			callAt(t, cl, r.Nodes[(i+2)%3].URL, "resources/subscribe", map[string]any{"uri": resourceURI}).Result(t, nil)
		}
	}
	changer := r.session(t, 0, nil)
	for round, node := range []int{1, 2} {
		text(t, callAt(t, changer, r.Nodes[node].URL, "tools/call", map[string]any{"name": "toggle"}).Final())
		for i, st := range streams {
			mustWait(t, st, fmt.Sprintf("list_changed %d on session %d", round+1, i), mcptest.Has(listChanged, round+1))
		}
	}
	text(t, callAt(t, changer, r.Nodes[0].URL, "tools/call", map[string]any{"name": "touch"}).Final())
	for i := 0; i < len(streams); i += 2 {
		mustWait(t, streams[i], fmt.Sprintf("update on subscribed session %d", i), mcptest.Has(updated, 1))
	}
	// A last change, seen by all, orders what came before it: after it,
	// any duplicate or stray notification would have arrived.
	text(t, callAt(t, changer, r.Nodes[0].URL, "tools/call", map[string]any{"name": "toggle"}).Final())
	for i, st := range streams {
		mustWait(t, st, fmt.Sprintf("list_changed 3 on session %d", i), mcptest.Has(listChanged, 3))
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if got := mcptest.Count(st.Messages(), listChanged); got != 3 {
			t.Errorf("session %d: got %d list_changed, want 3", i, got)
		}
		if got := mcptest.Count(st.Messages(), updated); got != want {
			t.Errorf("session %d: got %d resources/updated, want %d", i, got, want)
		}
	}
}

// Flow 8: DELETE on C ends the session everywhere: its GET stream on A
// closes, its call on B is cancelled, and later requests get 404.
func TestDeleteOnAnyNode(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	get := mcptest.OpenGet(t, cl, r.Nodes[0].URL, "")
	mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 2}))
	r.waitStep(t, "n1 1")
	if st := cl.Delete(r.Nodes[2].URL); st != http.StatusOK && st != http.StatusNoContent {
		t.Fatalf("DELETE: got %d", st)
	}
	waitCancelled(t, r, "n1")
	select {
	case <-get.Done():
	case <-time.After(soon):
		t.Fatal("the GET stream on A stayed open")
	}
	for _, n := range r.Nodes {
		if resp := callAt(t, cl, n.URL, "tools/call", map[string]any{"name": "whoami"}); resp.Status != http.StatusNotFound {
			t.Fatalf("after DELETE, %s answered %d, want 404", n.ID, resp.Status)
		}
	}
}

// Flow 9: B drains: readiness flips, new work is refused, its GET stream
// gets a retry hint and closes, its running call finishes within the
// grace period and its final response is in history for a resume on C.
func TestDrain(t *testing.T) {
	r := newRig(t, inproc.Options{})
	b := r.Nodes[1]
	cl := r.session(t, 0, nil)
	get := mcptest.OpenGet(t, cl, b.URL, "")
	_, call := mcptest.OpenCall(t, cl, b.URL, "tools/call", tool("gated", gatedIn{Steps: 1}))
	r.waitStep(t, "n1 1")
	mustWait(t, call, "progress", mcptest.Has("notifications/progress", 1))

	drained := make(chan struct{})
	ctx, stop := context.WithTimeout(context.Background(), soon)
	defer stop()
	go func() { defer close(drained); b.Handler.Drain(ctx) }()
	select {
	case <-get.Done():
	case <-time.After(soon):
		t.Fatal("the GET stream stayed open during the drain")
	}
	if len(get.Retries()) == 0 {
		t.Error("the GET stream closed without a retry hint")
	}
	if err := b.Handler.Ready(ctx); err == nil {
		t.Error("a draining node reports ready")
	}
	if resp := callAt(t, cl, b.URL, "tools/call", map[string]any{"name": "whoami"}); resp.Status != http.StatusServiceUnavailable {
		t.Errorf("new work on a draining node: got %d, want 503", resp.Status)
	}
	select {
	case <-drained:
		t.Fatal("the drain ended with a call running")
	default:
	}
	r.release <- struct{}{}
	<-drained
	if ctx.Err() != nil {
		t.Fatal("the drain waited until its deadline")
	}
	// The call's stream (closed by the drain or not) resumes on C up to
	// its final response.
	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, lastID(call))
	if !hasFinal(call.Messages()) {
		mustWait(t, resumed, "final response in history", hasFinal)
	}
	if got := text(t, mcptest.Final(append(call.Messages(), resumed.Messages()...))); got != "done on n1" {
		t.Fatalf("got %q", got)
	}
}

func httpOpts(lease time.Duration) mcp.HTTPOptions { return mcp.HTTPOptions{LeaseTTL: lease} }

// Behind the router, a session's requests spread over every node; once a
// node is killed, the router skips it and the others serve the session.
func TestRouterSpreadsAndSkipsKilledNode(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := mcptest.New(t, r.Router.URL)
	cl.Initialize(mcp.Version20251125, nil)
	ran := map[string]int{}
	for range 6 {
		ran[text(t, cl.Call("tools/call", map[string]any{"name": "whoami"}, nil).Final())]++
	}
	if len(ran) != 3 {
		t.Fatalf("calls ran on %v, want every node", ran)
	}
	r.Nodes[1].Kill()
	for range 6 {
		if got := text(t, cl.Call("tools/call", map[string]any{"name": "whoami"}, nil).Final()); got == "n1" {
			t.Fatal("a call ran on the killed node")
		}
	}
}

// Flows 7 and 4: a GET stream cut after a list_changed and resumed on
// another node with Last-Event-ID gets the changes made while it was
// away, and later ones, each exactly once, and none it had seen.
func TestGetResumedAfterListChangedExactlyOnce(t *testing.T) {
	r := newRig(t, inproc.Options{})
	const listChanged = "notifications/tools/list_changed"
	cl := r.session(t, 0, nil)
	watch := mcptest.OpenGet(t, r.session(t, 1, nil), r.Nodes[1].URL, "")
	get := mcptest.OpenGet(t, cl, r.Nodes[0].URL, "")
	changer := r.session(t, 2, nil)
	toggle := func(node, seen int) {
		t.Helper()
		text(t, callAt(t, changer, r.Nodes[node].URL, "tools/call", map[string]any{"name": "toggle"}).Final())
		mustWait(t, watch, fmt.Sprintf("list_changed %d", seen), mcptest.Has(listChanged, seen))
	}
	toggle(1, 1)
	mustWait(t, get, "list_changed 1", mcptest.Has(listChanged, 1))
	evs := get.Events()
	last := evs[len(evs)-1].ID
	get.Close()
	toggle(2, 2)
	toggle(0, 3)
	resumed := mcptest.OpenGet(t, cl, r.Nodes[2].URL, last)
	mustWait(t, resumed, "the two missed list_changed", mcptest.Has(listChanged, 2))
	toggle(1, 4)
	mustWait(t, resumed, "list_changed 4", mcptest.Has(listChanged, 3))
	if got := mcptest.Count(resumed.Messages(), listChanged); got != 3 {
		t.Fatalf("resumed stream: got %d list_changed, want 3 (two missed, one live)", got)
	}
	ids := map[string]bool{last: true}
	for _, ev := range resumed.Events() {
		if ev.ID != "" && len(ev.Data) > 0 && ids[ev.ID] {
			t.Fatalf("event id %q delivered twice", ev.ID)
		}
		ids[ev.ID] = true
	}
}
