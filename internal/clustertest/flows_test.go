package clustertest_test

// The flows of docs/ARCHITECTURE.md ("The flows and their files") that hold on any deployment: each runs on
// three Redis-backed nodes behind a random router and on the embedded
// single node (see setups). "Node i" is pinned by URL; on the single node
// every node is the same one.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Flows 1 and 2: a session created on one node is served by every node,
// and a change to the session made on one node is seen on all.
func TestSessionServedByEveryNode(t *testing.T) { forEachSetup(t, sessionServedByEveryNode) }

func sessionServedByEveryNode(t *testing.T, c *clustertest.Cluster) {
	cl := session(t, c, nil)

	const calls = 60
	for i := range calls {
		want := fmt.Sprintf("call %d", i)
		if got := text(t, cl.Call("tools/call", tool("echo", map[string]any{"text": want}), nil)); got != want {
			t.Fatalf("call %d: got %q, want %q", i, got, want)
		}
	}
	hits := c.Router.Hits()
	for _, n := range c.Nodes {
		if hits[n.URL] == 0 {
			t.Fatalf("the router sent nothing to %s: %v", n.ID, hits)
		}
	}

	// A change to the session acknowledged by one node applies to the
	// session's very next request on any node: the log level, set in turn
	// on each node, decides whether the progress tool's info log message
	// is sent.
	logs := func(url string) int {
		resp := callAt(t, cl, url, "tools/call", progressCall(1, 0, "lvl"))
		if f := resp.Final(); f == nil || f.Error != nil {
			t.Fatalf("progress at %s: got %s", url, describe(resp.Messages))
		}
		return mcptest.Count(resp.Messages, "notifications/message")
	}
	const rounds = 40
	var stale [3]int // by the order of the request after the change
	for r := range rounds {
		level, want := "error", 0
		if r%2 == 1 {
			level, want = "info", 1
		}
		callAt(t, cl, nodeURL(c, r), "logging/setLevel", map[string]any{"level": level}).Result(t, nil)
		// The next node, the one after, the node that made the change.
		for i, k := range []int{r + 1, r + 2, r} {
			if logs(nodeURL(c, k)) != want {
				stale[i]++
			}
		}
	}
	if stale != [3]int{} {
		t.Errorf("after logging/setLevel was acknowledged, requests served with the previous level: "+
			"%d of %d first requests (on another node), %d of %d second ones (on a third node), %d of %d third ones (on the node that made the change)",
			stale[0], rounds, stale[1], rounds, stale[2], rounds)
	}
}

// Flow 4: the client's connection to the node running a call drops; it
// resumes the stream with Last-Event-ID on another node, which replays
// what was missed and follows the call live to its final response:
// every event exactly once.
func TestCutPostStreamResumedOnAnotherNode(t *testing.T) {
	forEachSetup(t, cutPostStreamResumedOnAnotherNode)
}

func cutPostStreamResumedOnAnotherNode(t *testing.T, c *clustertest.Cluster) {
	cl := session(t, c, nil)
	const steps = 20
	id, post := mcptest.OpenCall(t, cl, nodeURL(c, 0), "tools/call", progressCall(steps, 60, "cut"))
	mustWait(t, post, soon, "three progress notifications", mcptest.Has("notifications/progress", 3))
	post.Close() // the connection drops; the handler goes on
	before := post.Events()
	if hasResponse(post.Messages()) {
		t.Fatalf("the call ended before the cut")
	}

	resumed := mcptest.OpenGet(t, cl, nodeURL(c, 1), lastEventID(before))
	// Live, not only replayed: the resumed stream delivers progress while
	// the call is still running.
	mustWait(t, resumed, soon, "progress before the final response", func(ms []*jsonrpc.Message) bool {
		return len(mcptest.ProgressValues(ms)) > 0 && !hasResponse(ms)
	})
	waitEnd(t, resumed, soon, "the resumed stream")

	after := resumed.Messages()
	f := mcptest.Final(after)
	if f == nil || f.ID != id {
		t.Fatalf("the resumed stream ended without the response to %v: %s", id, describe(after))
	}
	if got, _ := resultText(f); got != fmt.Sprintf("done after %d steps", steps) {
		t.Fatalf("final response: got %s", describe(after))
	}
	all := append(post.Messages(), after...)
	wantProgress(t, mcptest.ProgressValues(all), steps)
	if n := mcptest.Count(all, "notifications/message"); n != 1 {
		t.Fatalf("got %d log messages, want 1", n)
	}
	wantContiguous(t, before, resumed.Events())
}

// Flow 7: one tools/list_changed reaches every session exactly once, on
// its GET stream, wherever that stream is held and wherever the change
// happened.
func TestListChangedOncePerSession(t *testing.T) { forEachSetup(t, listChangedOncePerSession) }

func listChangedOncePerSession(t *testing.T, c *clustertest.Cluster) {
	const sessions = 10
	var streams []*mcptest.Stream
	for i := range sessions {
		streams = append(streams, mcptest.OpenGet(t, session(t, c, nil), nodeURL(c, i), ""))
	}
	changer := session(t, c, nil)
	const method = "notifications/tools/list_changed"
	for round := range 2 {
		// The change happens on node 1, then on node 2.
		text(t, callAt(t, changer, nodeURL(c, round), "tools/call", tool("toggle_extra_tool", nil)))
		for i, st := range streams {
			mustWait(t, st, soon, fmt.Sprintf("list_changed %d on session %d", round+1, i), mcptest.Has(method, round+1))
		}
		settle(streams[0], soon)
		for i, st := range streams {
			if n := st.Count(method); n != round+1 {
				t.Fatalf("session %d got %d list_changed after %d changes, want exactly %d", i, n, round+1, round+1)
			}
		}
	}
}

// Flow 7: resources/updated reaches exactly the subscribed sessions.
func TestResourceUpdatedReachesExactlySubscribers(t *testing.T) {
	forEachSetup(t, resourceUpdatedReachesExactlySubscribers)
}

func resourceUpdatedReachesExactlySubscribers(t *testing.T, c *clustertest.Cluster) {
	const sessions = 6
	const method = "notifications/resources/updated"
	var clients []*mcptest.Client
	var streams []*mcptest.Stream
	subscribed := map[int]bool{}
	for i := range sessions {
		cl := session(t, c, nil)
		clients = append(clients, cl)
		streams = append(streams, mcptest.OpenGet(t, cl, nodeURL(c, i), ""))
		if i%2 == 0 {
			callAt(t, cl, nodeURL(c, i+1), "resources/subscribe", map[string]any{"uri": demo.CounterURI}).Result(t, nil)
			subscribed[i] = true
		}
	}
	bumper := session(t, c, nil)
	want := make([]int, sessions) // updates each session should have
	check := func(step string) {
		t.Helper()
		for i, st := range streams {
			if want[i] > 0 {
				mustWait(t, st, soon, fmt.Sprintf("%s: update on session %d", step, i), mcptest.Has(method, want[i]))
			}
		}
		settle(streams[1], soon) // an unsubscribed session: give a stray update time to show
		for i, st := range streams {
			if n := st.Count(method); n != want[i] {
				t.Fatalf("%s: session %d (subscribed %v) got %d resources/updated, want %d", step, i, subscribed[i], n, want[i])
			}
			for _, m := range st.Messages() {
				var p struct {
					URI string `json:"uri"`
				}
				if m.Method == method && (json.Unmarshal(m.Params, &p) != nil || p.URI != demo.CounterURI) {
					t.Fatalf("session %d: resources/updated for %q, want %q", i, p.URI, demo.CounterURI)
				}
			}
		}
	}

	text(t, callAt(t, bumper, nodeURL(c, 0), "tools/call", tool("bump_counter", nil)))
	for i := range sessions {
		if subscribed[i] {
			want[i]++
		}
	}
	check("first bump")

	// Unsubscribing on yet another node stops the updates of that session
	// only.
	callAt(t, clients[0], nodeURL(c, 2), "resources/unsubscribe", map[string]any{"uri": demo.CounterURI}).Result(t, nil)
	subscribed[0] = false
	text(t, callAt(t, bumper, nodeURL(c, 1), "tools/call", tool("bump_counter", nil)))
	for i := range sessions {
		if subscribed[i] {
			want[i]++
		}
	}
	check("second bump")
}

// Flow 6: notifications/cancelled landing on another node reaches the
// handler running the request: its progress stops and the request ends.
func TestCancelledOnAnotherNodeStopsHandler(t *testing.T) {
	forEachSetup(t, cancelledOnAnotherNodeStopsHandler)
}

func cancelledOnAnotherNodeStopsHandler(t *testing.T, c *clustertest.Cluster) {
	cl := session(t, c, nil)
	const steps = 100 // 10s if never cancelled
	id, st := mcptest.OpenCall(t, cl, nodeURL(c, 0), "tools/call", progressCall(steps, 100, "cancel"))
	mustWait(t, st, soon, "two progress notifications", mcptest.Has("notifications/progress", 2))
	if s := notifyAt(t, cl, nodeURL(c, 1), "notifications/cancelled", map[string]any{"requestId": id, "reason": "the user gave up"}); s != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: got status %d, want 202", s)
	}
	atCancel := len(mcptest.ProgressValues(st.Messages()))
	waitEnd(t, st, soon, "the cancelled call")
	got := mcptest.ProgressValues(st.Messages())
	if len(got) >= steps {
		t.Fatalf("the cancelled handler ran to the end: %d progress notifications", len(got))
	}
	if f := mcptest.Final(st.Messages()); succeeded(f) {
		t.Fatalf("the cancelled call returned a result: %s", describe(st.Messages()))
	}
	t.Logf("progress at cancel: %d; in all: %d of %d; the stream ended with %s", atCancel, len(got), steps, describe(st.Messages()[len(st.Messages())-1:]))
}

// Flow 8: DELETE on any node ends the session everywhere: its GET stream
// held on another node closes, its running call on a third is stopped,
// and every node answers 404 to the session id afterwards.
func TestDeleteEndsSessionEverywhere(t *testing.T) { forEachSetup(t, deleteEndsSessionEverywhere) }

func deleteEndsSessionEverywhere(t *testing.T, c *clustertest.Cluster) {
	cl := session(t, c, nil)
	get := mcptest.OpenGet(t, cl, nodeURL(c, 0), "")
	const steps = 100
	_, running := mcptest.OpenCall(t, cl, nodeURL(c, 2), "tools/call", progressCall(steps, 100, "del"))
	mustWait(t, running, soon, "the running call's first progress", mcptest.Has("notifications/progress", 1))

	if s := cl.Delete(nodeURL(c, 1)); s != http.StatusNoContent {
		t.Fatalf("DELETE: got %d, want 204", s)
	}
	waitEnd(t, get, soon, "the GET stream of the deleted session")
	waitEnd(t, running, soon, "the running call of the deleted session")
	if n := len(mcptest.ProgressValues(running.Messages())); n >= steps {
		t.Fatalf("the call of the deleted session ran to the end")
	}

	for i := range c.Nodes {
		url := nodeURL(c, i)
		resp := callAt(t, cl, url, "tools/call", tool("echo", map[string]any{"text": "x"}))
		if resp.Status != http.StatusNotFound || resp.Final() == nil || resp.Final().Error == nil {
			t.Fatalf("%s: POST after DELETE: got %d %q, want 404 with a JSON-RPC error", c.Nodes[i].ID, resp.Status, resp.Body)
		}
		if st, err := cl.Get(url, ""); err == nil || st.Resp.StatusCode != http.StatusNotFound {
			if err == nil {
				st.Close()
			}
			t.Fatalf("%s: GET after DELETE: got %v, want 404", c.Nodes[i].ID, err)
		}
		if s := cl.Delete(url); s != http.StatusNotFound {
			t.Fatalf("%s: DELETE after DELETE: got %d, want 404", c.Nodes[i].ID, s)
		}
	}
}

// cachedSetup is three nodes on Redis with the session cache on.
var cachedSetup = clustertest.Options{Nodes: 3, Random: true, Args: []string{"--session-cache-ttl", "10s"}}

// With the session cache on, a change acknowledged by one node still
// applies to the session's very next request on any node, although each
// answers from its own copy (flows 1 and 2 as above).
func TestSessionServedByEveryNodeWithCache(t *testing.T) {
	t.Parallel()
	sessionServedByEveryNode(t, clustertest.Start(t, cachedSetup))
}

// A DELETE acknowledged by one node applies to the session's very next
// request on any node, although every node has a warm copy of the
// session in its cache: 404, every time.
func TestDeleteSeenAtOnceByEveryNode(t *testing.T) {
	t.Parallel()
	deleteSeenAtOnceByEveryNode(t, clustertest.Start(t, cachedSetup))
}

func deleteSeenAtOnceByEveryNode(t *testing.T, c *clustertest.Cluster) {
	const rounds = 30
	stale := 0
	for r := range rounds {
		cl := session(t, c, nil)
		for i := range c.Nodes { // every node reads (and caches) the session
			text(t, callAt(t, cl, nodeURL(c, i), "tools/call", tool("echo", map[string]any{"text": "warm"})))
		}
		if s := cl.Delete(nodeURL(c, r)); s != http.StatusNoContent {
			t.Fatalf("round %d: DELETE: got %d, want 204", r, s)
		}
		for _, k := range []int{r + 1, r + 2} {
			if resp := callAt(t, cl, nodeURL(c, k), "tools/call", tool("echo", map[string]any{"text": "x"})); resp.Status != http.StatusNotFound {
				stale++
			}
		}
	}
	if stale != 0 {
		t.Errorf("after a DELETE was acknowledged, %d of %d requests on other nodes were served", stale, 2*rounds)
	}
}

// Modern era (2026-07-28): a subscriptions/listen stream on one node
// receives the list change made on another, exactly once; an MRTR
// requestState issued by one node is accepted by another.
func TestModernListenAndMRTRAcrossNodes(t *testing.T) {
	forEachSetup(t, modernListenAndMRTRAcrossNodes)
}

func modernListenAndMRTRAcrossNodes(t *testing.T, c *clustertest.Cluster) {
	cl := mcptest.New(t, c.URL())
	listenID, body := jsonrpc.IntID(1000), []byte(nil)
	{
		params := map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": mcptest.ModernMeta()}
		msg, _ := jsonrpc.Request(listenID, "subscriptions/listen", params)
		body, _ = jsonrpc.Encode(msg)
	}
	listen, err := cl.OpenPost(nodeURL(c, 0), body, mcptest.ModernHeaders("subscriptions/listen", ""))
	if err != nil {
		t.Fatalf("subscriptions/listen: %v", err)
	}
	t.Cleanup(listen.Close)
	mustWait(t, listen, soon, "the listen acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))

	const method = "notifications/tools/list_changed"
	if got := text(t, modernCall(t, cl, nodeURL(c, 1), "tools/call", "toggle_extra_tool", tool("toggle_extra_tool", nil))); got != "added" {
		t.Fatalf("toggle_extra_tool: got %q", got)
	}
	mustWait(t, listen, soon, "tools/list_changed on the listen stream", mcptest.Has(method, 1))
	settle(listen, soon)
	if n := listen.Count(method); n != 1 {
		t.Fatalf("the listen stream got %d tools/list_changed for one change, want 1", n)
	}
	for _, m := range listen.Messages() {
		var p struct {
			Meta map[string]jsonrpc.ID `json:"_meta"`
		}
		if m.Method == method && (json.Unmarshal(m.Params, &p) != nil || p.Meta[mcp.MetaSubscriptionID] != listenID) {
			t.Fatalf("list_changed not tagged with the subscription id %v: %s", listenID, m.Params)
		}
	}

	// MRTR: round 1 on node 1 asks for sampling; the retry carrying the
	// answer and the sealed requestState lands on node 2.
	args := map[string]any{"prompt": "hello"}
	var round1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	modernCall(t, cl, nodeURL(c, 0), "tools/call", "sample", map[string]any{"name": "sample", "arguments": args}).Result(t, &round1)
	if round1.ResultType != "input_required" || len(round1.InputRequests) != 1 || round1.RequestState == "" {
		t.Fatalf("round 1: got %+v", round1)
	}
	answers := map[string]any{}
	for key := range round1.InputRequests {
		answers[key] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "world"}}
	}
	resp := modernCall(t, cl, nodeURL(c, 1), "tools/call", "sample", map[string]any{
		"name": "sample", "arguments": args, "inputResponses": answers, "requestState": round1.RequestState,
	})
	if got := text(t, resp); got != "world" {
		t.Fatalf("round 2 on another node: got %q, want world", got)
	}
}
