package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// outageNode starts a node on a Redis that keeps its data across a kill
// (append-only file, fsync always), as a failover or a restart with AOF.
func outageNode(t *testing.T, opts mcp.HTTPOptions) (*node, *redistest.Server) {
	t.Helper()
	srv := redistest.StartWith(t, redistest.Options{Persist: true})
	return redisNodeAt(t, srv.URL(), opts), srv
}

// resumeOnceUp resumes a stream after lastID, retrying while the node
// refuses (503 while its bus reconnects).
func resumeOnceUp(t *testing.T, c *mcptest.Client, url, lastID string) *mcptest.Stream {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Get(url, lastID)
		if err == nil {
			t.Cleanup(st.Close)
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("resume: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finalOf returns the final response on st, or nil (and the test fails)
// if none came within the bound (a hang).
func finalOf(t *testing.T, st *mcptest.Stream, within time.Duration, what string) *jsonrpc.Message {
	t.Helper()
	if !st.WaitFor(within, finalResponse) {
		t.Errorf("%s: no final response within %v (stream ended: %v)", what, within, st.Err())
		return nil
	}
	for _, m := range st.Messages() {
		if m.Kind() == jsonrpc.KindResponse {
			return m
		}
	}
	return nil
}

// callThroughOutage starts a streaming call that sends progress, kills
// Redis, and lets the handler go on while Redis is down: it sends more
// progress (which fails) when more is set, and returns. It returns the
// session, the call's live stream and the id of its last event.
func callThroughOutage(t *testing.T, n *node, srv *redistest.Server, more bool) (*mcptest.Client, *mcptest.Stream, string) {
	t.Helper()
	c := session(t, n.url, mcp.Version20251125, nil)
	phases := []int{1, 0}
	if more {
		phases[1] = 1
	}
	live, _ := openLegacy(t, c, n.url, "tools/call", toolCall("gate", map[string]any{"phases": phases}, true))
	n.probe.waitReached(t, 0)
	if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 1)) {
		t.Fatal("no progress before the outage")
	}
	lastID := lastEventID(t, live)
	srv.Kill()
	n.probe.release <- struct{}{}
	return c, live, lastID
}

// Redis goes away with its data kept while a call is in flight: the live
// connection still gets the call's final response, and once Redis is
// back the response is recorded, so a client resuming the stream gets it.
func TestOutageFinalReachesLiveAndResumedClients(t *testing.T) {
	n, srv := outageNode(t, mcp.HTTPOptions{RecordTimeout: 30 * time.Second, RecordRetry: time.Second})
	c, live, lastID := callThroughOutage(t, n, srv, false)
	got := finalOf(t, live, 10*time.Second, "live connection during the outage")
	if got != nil && (got.Error != nil || !strings.Contains(string(got.Result), "gated")) {
		t.Errorf("live final: %s / %v, want the result", got.Result, got.Error)
	}
	srv.Restart()

	resumed := resumeOnceUp(t, c, n.url, lastID)
	got = finalOf(t, resumed, 10*time.Second, "resumed stream")
	if got != nil && (got.Error != nil || !strings.Contains(string(got.Result), "gated")) {
		t.Fatalf("resumed final: %s / %v, want the recorded result", got.Result, got.Error)
	}
}

// The sequence seen under load: the handler's progress fails while
// Redis is down, so the call fails, and its final (the error) cannot be
// recorded either. The live client gets the error at once; a client
// resuming once Redis is back gets the same error from history.
func TestOutageFailedCallEndsWithErrorEverywhere(t *testing.T) {
	n, srv := outageNode(t, mcp.HTTPOptions{RecordTimeout: 30 * time.Second, RecordRetry: time.Second})
	c, live, lastID := callThroughOutage(t, n, srv, true)
	got := finalOf(t, live, 10*time.Second, "live connection during the outage")
	if got != nil && (got.Error == nil || got.Error.Code != jsonrpc.CodeUnavailable) {
		t.Errorf("live final: %s / %v, want a %d error", got.Result, got.Error, jsonrpc.CodeUnavailable)
	}
	srv.Restart()

	resumed := resumeOnceUp(t, c, n.url, lastID)
	got = finalOf(t, resumed, 10*time.Second, "resumed stream")
	if got != nil && (got.Error == nil || got.Error.Code != jsonrpc.CodeUnavailable) {
		t.Fatalf("resumed final: %s / %v, want the recorded %d error", got.Result, got.Error, jsonrpc.CodeUnavailable)
	}
}

// When the outage outlasts RecordTimeout the producer gives up recording
// the final: a client resuming the stream afterwards gets a clear
// JSON-RPC error instead of waiting forever for an end nobody appends.
func TestOutageAbandonedStreamEndsWithError(t *testing.T) {
	n, srv := outageNode(t, mcp.HTTPOptions{RecordTimeout: 200 * time.Millisecond, RecordRetry: time.Second, LeaseTTL: 3 * time.Second})
	c, live, lastID := callThroughOutage(t, n, srv, false)
	finalOf(t, live, 10*time.Second, "live connection during the outage")
	time.Sleep(time.Second) // past RecordTimeout, within the node's lease
	srv.Restart()

	resumed := resumeOnceUp(t, c, n.url, lastID)
	got := finalOf(t, resumed, 15*time.Second, "resumed stream of an abandoned call")
	if got != nil && (got.Error == nil || got.Error.Code != jsonrpc.CodeNodeLost) {
		t.Fatalf("resumed final: %s / %v, want a %d error", got.Result, got.Error, jsonrpc.CodeNodeLost)
	}
}
