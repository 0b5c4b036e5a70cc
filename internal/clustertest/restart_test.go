package clustertest_test

// A node killed and restarted with the same node id (the Helm chart, the
// compose file and scripts/cluster.sh all use stable ids): the new
// process renews a lease under that id within the old one's lease, yet
// nothing may wait for the dead process.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
)

// restartLease is long enough for a restart to complete within it.
const restartLease = 3 * time.Second

// Calls running on a node that is killed and restarted at once with the
// same id end with a node-lost error when resumed, on another node or on
// the restarted one, within the lease (plus the follower's check
// interval); a reply to the dead process's sampling request is refused
// (503 while its lease runs, then 410 with a node-lost error), never
// accepted with 202 nor delivered to the new process.
func TestCallsOfNodeRestartedWithSameIDEndWithError(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true, Args: []string{"--lease-ttl", restartLease.String()}})
	a, b, third := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	cl := session(t, c, sampleCaps)
	id1, post1 := mcptest.OpenCall(t, cl, a.URL, "tools/call", progressCall(10, 5000, "resumed-elsewhere"))
	id2, post2 := mcptest.OpenCall(t, cl, a.URL, "tools/call", progressCall(10, 5000, "resumed-on-the-restarted-node"))
	_, post3 := mcptest.OpenCall(t, cl, a.URL, "tools/call", tool("sample", map[string]any{"prompt": "q"}))
	mustWait(t, post1, soon, "the first call's first progress", mcptest.Has("notifications/progress", 1))
	mustWait(t, post2, soon, "the second call's first progress", mcptest.Has("notifications/progress", 1))
	mustWait(t, post3, soon, "the sampling request", mcptest.Has("sampling/createMessage", 1))
	var sampling *jsonrpc.Message
	for _, m := range post3.Messages() {
		if m.Method == "sampling/createMessage" {
			sampling = m
		}
	}

	a.Kill()
	killed := time.Now()
	a.Restart()
	if took := time.Since(killed); took >= restartLease {
		t.Fatalf("the restart took %v, not within the lease %v: the node id was not reused within it", took, restartLease)
	}
	t.Logf("%s restarted %v after the kill", a.ID, time.Since(killed).Round(time.Millisecond))
	for _, p := range []*mcptest.Stream{post1, post2, post3} {
		waitEnd(t, p, soon, "a POST stream of the killed node")
	}

	// The reply to the dead process's request, landing on another node.
	reply, _ := jsonrpc.Response(sampling.ID, map[string]any{"role": "assistant", "model": "test", "content": map[string]any{"type": "text", "text": "late"}})
	replyBody, _ := jsonrpc.Encode(reply)
	replier := pinned(t, cl, third.URL)
	replied := make(chan error, 1)
	go func() {
		replied <- func() error {
			for {
				resp, err := replier.PostRaw(context.Background(), third.URL, replyBody, nil, nil)
				if err != nil {
					return err
				}
				switch resp.Status {
				case http.StatusServiceUnavailable:
					if resp.Header.Get("Retry-After") == "" {
						t.Errorf("a 503 for the reply without Retry-After")
					}
					time.Sleep(200 * time.Millisecond) // the old lease still runs: retry
					continue
				case http.StatusGone:
					if m, err := jsonrpc.Decode(resp.Body); err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeNodeLost {
						t.Errorf("the refused reply: got %q, want a node-lost error", resp.Body)
					}
					return nil
				}
				t.Errorf("the reply to the dead process's request: got %d %q, want 503 and then 410", resp.Status, resp.Body)
				return nil
			}
		}()
	}()

	resumed1 := mcptest.OpenGet(t, cl, b.URL, lastEventID(post1.Events()))
	resumed2 := mcptest.OpenGet(t, cl, a.URL, lastEventID(post2.Events()))
	bound := restartLease + restartLease/2 + time.Second
	for _, r := range []struct {
		id jsonrpc.ID
		st *mcptest.Stream
		on string
	}{{id1, resumed1, b.ID}, {id2, resumed2, a.ID + " (restarted)"}} {
		select {
		case <-r.st.Done():
		case <-time.After(bound + 10*time.Second):
			t.Fatalf("the call resumed on %s still waits %v after the kill (lease %v): %s", r.on, time.Since(killed).Round(time.Millisecond), restartLease, describe(r.st.Messages()))
		}
		took := time.Since(killed)
		f := mcptest.Final(r.st.Messages())
		if f == nil || f.ID != r.id || f.Error == nil || f.Error.Code != jsonrpc.CodeNodeLost {
			t.Fatalf("the call resumed on %s ended without a node-lost error for %v: %s", r.on, r.id, describe(r.st.Messages()))
		}
		t.Logf("the call resumed on %s ended %v after the kill (bound %v)", r.on, took.Round(time.Millisecond), bound)
		if took > bound {
			t.Errorf("the call resumed on %s ended %v after the kill, want within %v", r.on, took, bound)
		}
	}
	select {
	case err := <-replied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("the reply to the dead process's request was still refused with 503 %v after the kill", time.Since(killed))
	}

	// The restarted node serves, and routes replies to its own requests.
	for _, err := range crossNodeSampling(t, c, "after the restart") {
		t.Error(err)
	}
}
