package clustertest_test

// Flows that need more than one node: a node dies (SIGKILL) while it
// holds a session's GET stream or runs a call.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
)

// leaseTTL is the membership lease of the nodes in these flows.
const leaseTTL = time.Second

func startFailoverCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true, Args: []string{"--lease-ttl", leaseTTL.String()}})
}

// Flow 4 with a dead node: the node holding a session's GET stream is
// killed; the client resumes the stream with Last-Event-ID on another node
// and receives every notification exactly once, those sent while no node
// held the stream included.
func TestGetStreamResumedAfterItsNodeIsKilled(t *testing.T) {
	t.Parallel()
	c := startFailoverCluster(t)
	a, b := c.Nodes[0], c.Nodes[1]
	const updated, listChanged = "notifications/resources/updated", "notifications/tools/list_changed"

	cl := session(t, c, nil)
	others := pinned(t, cl, b.URL, c.Nodes[2].URL) // never node A
	others.Call("resources/subscribe", map[string]any{"uri": demo.CounterURI}, nil).Result(t, nil)
	// A witness session, subscribed too, whose GET stream is on node C.
	witness := session(t, c, nil)
	pinned(t, witness, c.Nodes[2].URL).Call("resources/subscribe", map[string]any{"uri": demo.CounterURI}, nil).Result(t, nil)
	seenByWitness := mcptest.OpenGet(t, witness, c.Nodes[2].URL, "")

	bumps := 0
	bump := func() {
		t.Helper()
		text(t, others.Call("tools/call", tool("bump_counter", nil), nil))
		bumps++
	}
	get := mcptest.OpenGet(t, cl, a.URL, "")
	bump()
	bump()
	mustWait(t, get, soon, "two updates on node A's GET stream", mcptest.Has(updated, 2))

	a.Kill()
	waitEnd(t, get, soon, "the GET stream of the killed node")
	seen := get.Events()

	// While no node holds the stream.
	bump()
	bump()
	bump()
	text(t, others.Call("tools/call", tool("toggle_extra_tool", nil), nil))
	mustWait(t, seenByWitness, soon, "the outage's notifications on the witness", func(ms []*jsonrpc.Message) bool {
		return mcptest.Count(ms, updated) == bumps && mcptest.Count(ms, listChanged) == 1
	})
	settle(seenByWitness, soon) // the session's own copies are appended alongside

	resumed := mcptest.OpenGet(t, cl, b.URL, lastEventID(seen))
	bump()
	bump()
	mustWait(t, resumed, soon, "every notification after the resume", func(ms []*jsonrpc.Message) bool {
		return mcptest.Count(get.Messages(), updated)+mcptest.Count(ms, updated) == bumps && mcptest.Count(ms, listChanged) == 1
	})
	settle(resumed, soon)
	all := append(get.Messages(), resumed.Messages()...)
	if n, l := mcptest.Count(all, updated), mcptest.Count(all, listChanged); n != bumps || l != 1 {
		t.Fatalf("got %d resources/updated and %d list_changed, want %d and 1 exactly", n, l, bumps)
	}
	wantContiguous(t, seen, resumed.Events())
}

// Flow 5: the node running a call is killed. Its membership lease lapses
// and the stream, resumed on another node, ends with a JSON-RPC error for
// that request id, within the lease (plus the follower's check interval)
// instead of hanging. The session itself lives on.
func TestCallOnKilledNodeEndsWithErrorWithinLease(t *testing.T) {
	t.Parallel()
	c := startFailoverCluster(t)
	a, b := c.Nodes[0], c.Nodes[1]
	cl := session(t, c, nil)
	id, post := mcptest.OpenCall(t, cl, a.URL, "tools/call", progressCall(10, 5000, "doomed"))
	mustWait(t, post, soon, "the first progress notification", mcptest.Has("notifications/progress", 1))

	a.Kill()
	killed := time.Now()
	waitEnd(t, post, soon, "the POST stream of the killed node")
	resumed := mcptest.OpenGet(t, cl, b.URL, lastEventID(post.Events()))
	waitEnd(t, resumed, soon, "the resumed stream of the lost call")
	took := time.Since(killed)

	f := mcptest.Final(resumed.Messages())
	if f == nil || f.ID != id || f.Error == nil || f.Error.Code != jsonrpc.CodeNodeLost {
		t.Fatalf("the resumed stream ended without a node-lost error for %v: %s", id, describe(resumed.Messages()))
	}
	// The lease lapses at most leaseTTL after the kill; a follower looks
	// every leaseTTL/2; 500ms of slack for a busy machine.
	bound := leaseTTL + leaseTTL/2 + 500*time.Millisecond
	t.Logf("the lost call's stream ended %v after the kill (lease %v, bound %v)", took.Round(time.Millisecond), leaseTTL, bound)
	if took > bound {
		t.Errorf("the lost call's stream ended %v after the kill, want within %v", took, bound)
	}

	want := "still here"
	if got := text(t, pinned(t, cl, b.URL, c.Nodes[2].URL).Call("tools/call", tool("echo", map[string]any{"text": want}), nil)); got != want {
		t.Fatalf("echo after the node loss: got %q", got)
	}
}

// Flow 7, last part: a server-initiated request (ping, elicitation outside
// a request) sent on the GET stream from any node.
func TestServerRequestOnGetStreamFromAnyNode(t *testing.T) {
	// Flow 7, last part: a handler on node 1 sends a ping on the session's
	// GET stream held by node 3; the client's reply lands on node 2 and is
	// routed back to node 1.
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true})
	cl := session(t, c, nil)
	get := mcptest.OpenGet(t, cl, nodeURL(c, 2), "")
	type result struct {
		resp *mcptest.Response
	}
	done := make(chan result, 1)
	go func() {
		done <- result{callAt(t, pinned(t, cl, nodeURL(c, 0)), nodeURL(c, 0), "tools/call", tool("ping_client", nil))}
	}()
	mustWait(t, get, 10*time.Second, "a ping on the GET stream", mcptest.Has("ping", 1))
	var ping *jsonrpc.Message
	for _, m := range get.Messages() {
		if m.Method == "ping" {
			ping = m
		}
	}
	if ping.Kind() != jsonrpc.KindRequest {
		t.Fatalf("got %v, want a ping request", ping.Kind())
	}
	reply, _ := jsonrpc.Response(ping.ID, map[string]any{})
	pinned(t, cl, nodeURL(c, 1)).Reply(context.Background(), reply)
	select {
	case r := <-done:
		if got := text(t, r.resp); !strings.HasPrefix(got, "pong after ") {
			t.Fatalf("ping_client returned %q, want a pong", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ping_client did not return after the reply")
	}
}

// A server→client request sent on a session's GET stream fails soon
// after the node holding that stream is killed (its claim lapses), not
// when the request times out: the node never sends the message that
// announces the stream's end.
func TestServerRequestOnGetStreamOfKilledNodeFails(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true, Args: []string{"--lease-ttl", leaseTTL.String(), "--request-timeout", timeout.String()}})
	holder := c.Nodes[2]
	cl := session(t, c, nil)
	get := mcptest.OpenGet(t, cl, holder.URL, "")
	done := make(chan *mcptest.Response, 1)
	go func() {
		done <- callAt(t, pinned(t, cl, nodeURL(c, 0)), nodeURL(c, 0), "tools/call", tool("ping_client", nil))
	}()
	mustWait(t, get, soon, "a ping on the GET stream", mcptest.Has("ping", 1))

	holder.Kill()
	killed := time.Now()
	select {
	case r := <-done:
		took := time.Since(killed)
		if succeeded(r.Final()) {
			t.Fatalf("ping_client succeeded without a reply: %s", describe(r.Messages))
		}
		bound := leaseTTL + leaseTTL/2 + time.Second
		t.Logf("ping_client failed %v after the GET stream's node was killed (bound %v): %s", took.Round(time.Millisecond), bound, describe(r.Messages))
		if took > bound {
			t.Errorf("ping_client failed %v after the kill, want within %v", took, bound)
		}
	case <-time.After(timeout + 10*time.Second):
		t.Fatal("ping_client did not return")
	}
}
