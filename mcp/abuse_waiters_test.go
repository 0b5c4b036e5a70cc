package mcp_test

import (
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// One session with many unanswered sampling requests holds at most its
// share of the node's waiter table: with --max-waiters 20, a session
// calling sample 20 times gets 10 pending requests (the rest fail at
// once), and another session's sampling request still goes out.
func TestAbuseWaiterShare(t *testing.T) {
	const maxWaiters = 20
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxWaiters: maxWaiters}})
	greedy := session(t, n.url, mcp.LatestLegacyVersion, samplingCaps)
	pending := 0
	for range maxWaiters {
		b, _ := encodeRequest(t, greedy, "tools/call", toolCall("sample", map[string]any{"prompt": "never answered"}, false))
		st, err := greedy.OpenPost(n.url, b, nil)
		if err != nil {
			continue // refused at once: the session's share is used up
		}
		t.Cleanup(st.Close)
		if !st.WaitFor(10*time.Second, hasMethod("sampling/createMessage")) {
			t.Fatalf("call %d: no sampling request on its stream", pending+1)
		}
		pending++
	}
	if want := maxWaiters / 2; pending != want {
		t.Fatalf("greedy session holds %d pending requests, want its share %d", pending, want)
	}
	other := session(t, n.url, mcp.LatestLegacyVersion, samplingCaps)
	st, _ := openLegacy(t, other, n.url, "tools/call", toolCall("sample", map[string]any{"prompt": "hi"}, false))
	if !st.WaitFor(10*time.Second, hasMethod("sampling/createMessage")) {
		t.Fatalf("another session's sampling request did not go out: %v", st.Messages())
	}
}
