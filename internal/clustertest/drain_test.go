package clustertest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
)

// Flow 9: SIGTERM on a node while it streams a call and holds a GET
// stream. Readiness flips, the streams get a retry hint and are closed,
// the call finishes within the grace period with its events in history,
// and the client resumes both streams on other nodes with nothing lost
// or repeated.
func TestDrainResumesElsewhereWithNothingLost(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true, Args: []string{"--drain-timeout", "20s", "--retry", "100ms"}})
	cl := session(t, c, nil)
	get := mcptest.OpenGet(t, cl, nodeURL(c, 0), "")
	subscribe := callAt(t, cl, nodeURL(c, 1), "resources/subscribe", map[string]any{"uri": "demo://counter"})
	if f := subscribe.Final(); f == nil || f.Error != nil {
		t.Fatalf("subscribe: %s", describe(subscribe.Messages))
	}

	const steps = 30
	id, post := mcptest.OpenCall(t, cl, nodeURL(c, 0), "tools/call", progressCall(steps, 50, "drain"))
	mustWait(t, post, soon, "progress before the drain", mcptest.Has("notifications/progress", 3))

	drained := make(chan error, 1)
	go func() { drained <- c.Nodes[0].Stop() }()

	// Readiness flips while the call still runs.
	clustertest.WaitFor(t, soon, "node 1 not ready", func() bool {
		resp, err := http.Get(strings.TrimSuffix(nodeURL(c, 0), "/mcp") + "/readyz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	// Both streams are closed by the server, after a retry hint.
	waitEnd(t, post, soon, "the POST stream on the draining node")
	waitEnd(t, get, soon, "the GET stream on the draining node")
	if len(post.Retries()) == 0 || len(get.Retries()) == 0 {
		t.Fatalf("retry hints: POST %d, GET %d; want one on each before the close", len(post.Retries()), len(get.Retries()))
	}
	if hasResponse(post.Messages()) {
		t.Fatalf("the call finished before the drain closed its stream; make it longer")
	}

	// Notifications keep flowing to the session while it has no stream.
	for range 3 {
		text(t, callAt(t, cl, nodeURL(c, 2), "tools/call", tool("bump_counter", nil)))
	}

	resumedPost := mcptest.OpenGet(t, cl, nodeURL(c, 1), lastEventID(post.Events()))
	resumedGet := mcptest.OpenGet(t, cl, nodeURL(c, 2), lastEventID(get.Events()))
	waitEnd(t, resumedPost, 30*time.Second, "the resumed POST stream")
	all := append(post.Messages(), resumedPost.Messages()...)
	f := mcptest.Final(all)
	if f == nil || f.ID != id {
		t.Fatalf("no response to %v after the drain: %s", id, describe(all))
	}
	if got, _ := resultText(f); got != fmt.Sprintf("done after %d steps", steps) {
		t.Fatalf("final response: %s", describe(all))
	}
	wantProgress(t, mcptest.ProgressValues(all), steps)
	wantContiguous(t, post.Events(), resumedPost.Events())

	const updated = "notifications/resources/updated"
	mustWait(t, resumedGet, soon, "the updates sent during the drain", mcptest.Has(updated, 3))
	settle(resumedGet, quietly*4)
	if n := resumedGet.Count(updated) + get.Count(updated); n != 3 {
		t.Fatalf("got %d resources/updated across both GET connections, want exactly 3", n)
	}
	wantContiguous(t, get.Events(), resumedGet.Events())

	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the draining node did not exit")
	}
	if c.Nodes[0].Alive() {
		t.Fatal("node 1 still runs after its drain")
	}
}
