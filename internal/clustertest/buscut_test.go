package clustertest_test

// A node cut off from the bus while it still serves HTTP (its pub/sub
// connection dropped by Redis, as Sentinel does to every client when it
// fails over): what other nodes route to it over the bus is lost, so
// nothing that someone waits for may be accepted as delivered.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// busUser is the Redis user of node 2 (index 1) in startBusCutCluster:
// taking its bus channels away drops that node's pub/sub connection and
// refuses its re-subscription, while its other commands (appends
// included) and the other nodes go on.
const busUser = "node2"

func startBusCutCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, clustertest.Options{
		Nodes: 3, Random: true,
		RedisOptions: redistest.Options{Args: []string{"--user", busUser, "on", ">secret", "~*", "&*", "+@all"}},
		NodeArgs: func(c *clustertest.Cluster, i int) []string {
			if i != 1 {
				return nil
			}
			return []string{"--redis-url", "redis://" + busUser + ":secret@" + c.Redis.Addr()}
		},
	})
}

// cutBus drops node 2's bus (or restores it) and waits until the node
// reports it in its readiness.
func cutBus(t *testing.T, c *clustertest.Cluster, cut bool) {
	t.Helper()
	// Cut, the node may still publish to stream-follow channels (its
	// appends do) but not use the bus.
	rule := "allchannels"
	if cut {
		rule = "resetchannels &mcp:f:*"
	}
	if line, err := c.Redis.Do("ACL SETUSER " + busUser + " " + rule); err != nil || line != "+OK" {
		t.Fatalf("ACL SETUSER %s %s: %q, %v", busUser, rule, line, err)
	}
	what := fmt.Sprintf("node 2 to report its bus cut=%v in its readiness", cut)
	clustertest.WaitFor(t, soon, what, func() bool {
		resp, err := http.Get("http://" + c.Nodes[1].Addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return (resp.StatusCode == http.StatusServiceUnavailable) == cut
	})
}

// The reply to a sampling request of a node whose bus is cut lands on
// another node: it is refused with 503, Retry-After and a JSON-RPC error
// (not accepted with 202 and dropped, leaving the handler to wait until
// its timeout); sent again once the bus is back, it wakes the handler.
func TestReplyToNodeCutFromBusIsRefusedThenDelivered(t *testing.T) {
	t.Parallel()
	c := startBusCutCluster(t)
	owner, other := c.Nodes[1], c.Nodes[2]
	cl := session(t, c, sampleCaps)
	id, post := mcptest.OpenCall(t, cl, owner.URL, "tools/call", tool("sample", map[string]any{"prompt": "q"}))
	mustWait(t, post, soon, "the sampling request", mcptest.Has("sampling/createMessage", 1))
	var reply *jsonrpc.Message
	for _, m := range post.Messages() {
		if r := answerSampling(m); r != nil {
			reply = r
		}
	}
	body, _ := jsonrpc.Encode(reply)
	send := func() (int, http.Header, []byte) {
		t.Helper()
		resp, err := pinned(t, cl, other.URL).PostRaw(context.Background(), other.URL, body, nil, nil)
		if err != nil {
			t.Fatalf("reply at %s: %v", other.ID, err)
		}
		return resp.Status, resp.Header, resp.Body
	}

	cutBus(t, c, true)
	status, header, b := send()
	if status != http.StatusServiceUnavailable {
		t.Fatalf("the reply while the owner's bus is cut: got %d %q, want 503", status, b)
	}
	if header.Get("Retry-After") == "" {
		t.Errorf("the 503 has no Retry-After")
	}
	if m, err := jsonrpc.Decode(b); err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeUnavailable {
		t.Errorf("the 503's body: got %q, want a JSON-RPC error %d", b, jsonrpc.CodeUnavailable)
	}
	if hasResponse(post.Messages()) {
		t.Fatalf("the call ended while its reply was refused: %s", describe(post.Messages()))
	}

	cutBus(t, c, false)
	if status, _, b := send(); status != http.StatusAccepted {
		t.Fatalf("the reply sent again after the bus is back: got %d %q, want 202", status, b)
	}
	mustWait(t, post, soon, "the call's result after the reply", hasResponse)
	f := mcptest.Final(post.Messages())
	if got, ok := resultText(f); !ok || f.ID != id || !strings.HasPrefix(got, "re:q") {
		t.Fatalf("the call ended with %s, want the sampled answer", describe(post.Messages()))
	}
}

// Messages published while a node's bus is cut are lost to it; when its
// bus is back it catches up from the store: a call cancelled meanwhile
// stops, a call of a session deleted meanwhile stops and its stream
// closes, and its listen streams close without their result (the
// client's cue to listen again, since notifications may have been
// missed).
func TestNodeCutFromBusCatchesUpWhenBack(t *testing.T) {
	t.Parallel()
	c := startBusCutCluster(t)
	node, other := c.Nodes[1], c.Nodes[2]
	const steps = 150 // 15s if never stopped
	cl := session(t, c, nil)
	id, cancelled := mcptest.OpenCall(t, cl, node.URL, "tools/call", progressCall(steps, 100, "cancelled"))
	deleted := session(t, c, nil)
	_, ofDeleted := mcptest.OpenCall(t, deleted, node.URL, "tools/call", progressCall(steps, 100, "deleted"))
	mc := mcptest.New(t, node.URL)
	params := map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": mcptest.ModernMeta()}
	lmsg, _ := jsonrpc.Request(jsonrpc.IntID(7), "subscriptions/listen", params)
	lbody, _ := jsonrpc.Encode(lmsg)
	listen, err := mc.OpenPost(node.URL, lbody, mcptest.ModernHeaders("subscriptions/listen", ""))
	if err != nil {
		t.Fatalf("subscriptions/listen: %v", err)
	}
	t.Cleanup(listen.Close)
	mustWait(t, listen, soon, "the listen acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))
	mustWait(t, cancelled, soon, "the first call's progress", mcptest.Has("notifications/progress", 1))
	mustWait(t, ofDeleted, soon, "the second call's progress", mcptest.Has("notifications/progress", 1))

	cutBus(t, c, true)
	if s := notifyAt(t, cl, other.URL, "notifications/cancelled", map[string]any{"requestId": id, "reason": "gave up"}); s != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: got %d, want 202", s)
	}
	if s := deleted.Delete(other.URL); s != http.StatusNoContent {
		t.Fatalf("DELETE: got %d, want 204", s)
	}
	// The node did not hear of either: both calls go on.
	n := len(mcptest.ProgressValues(cancelled.Messages()))
	mustWait(t, cancelled, soon, "progress of the cancelled call while the bus is cut", func(ms []*jsonrpc.Message) bool {
		return len(mcptest.ProgressValues(ms)) >= n+3
	})

	cutBus(t, c, false)
	waitEnd(t, cancelled, soon, "the call cancelled while the bus was cut")
	if got := mcptest.ProgressValues(cancelled.Messages()); len(got) >= steps || succeeded(mcptest.Final(cancelled.Messages())) {
		t.Fatalf("the call cancelled while the bus was cut ran to the end: %s", describe(cancelled.Messages()))
	}
	waitEnd(t, ofDeleted, soon, "the call of the session deleted while the bus was cut")
	if got := mcptest.ProgressValues(ofDeleted.Messages()); len(got) >= steps || succeeded(mcptest.Final(ofDeleted.Messages())) {
		t.Fatalf("the call of the deleted session ran to the end: %s", describe(ofDeleted.Messages()))
	}
	waitEnd(t, listen, soon, "the listen stream open while the bus was cut")
	if f := mcptest.Final(listen.Messages()); f != nil {
		t.Fatalf("the listen stream ended with its result %s, want an abrupt end (listen again)", describe([]*jsonrpc.Message{f}))
	}
}
