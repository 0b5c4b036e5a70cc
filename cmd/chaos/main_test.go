package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

func TestTrackerCountsLostAndDuplicatedEvents(t *testing.T) {
	tr := newTracker()
	tr.event("s1_1", true) // priming: a position, no message
	for _, id := range []string{"s1_2", "s1_3", "s1_3", "s1_5"} {
		tr.event(id, false)
	}
	tr.event("s2_1", false)
	tr.event("s2_2", false)
	for _, p := range []float64{1, 2, 2, 4} {
		tr.progress[p]++
	}
	// Lost: s1_4 never came, progress 3 (the call completed with 4 steps).
	// Duplicated: s1_3 twice, progress 2 twice.
	if lost, dup := tr.result(4, true); lost != 2 || dup != 2 {
		t.Fatalf("lost %d, duplicated %d; want 2 and 2", lost, dup)
	}
	// A call that ended with an error is not held to its steps, but to
	// the progress before the last one it got.
	if lost, dup := tr.result(5, false); lost != 2 || dup != 2 {
		t.Fatalf("lost %d, duplicated %d without completion; want 2 and 2", lost, dup)
	}
	// A completed call is held to every step its handler sent.
	if lost, _ := tr.result(5, true); lost != 3 {
		t.Fatalf("lost %d of a completed call of 5 steps; want 3", lost)
	}
	if tr.last != "s2_2" {
		t.Fatalf("last event id %q, want s2_2", tr.last)
	}
}

// A call whose stream skipped an event and then ended with an error
// (the error recorded after the hole) loses that event in both counts:
// its position and its progress value.
func TestTrackerCountsAGapBeforeATerminalError(t *testing.T) {
	tr := newTracker()
	tr.event("s1_0", true)
	for i, id := range []string{"s1_1", "s1_2", "s1_4", "s1_5"} {
		tr.event(id, false)
		if i < 3 {
			tr.progress[[]float64{1, 2, 4}[i]]++
		}
	}
	if lost, dup := tr.result(10, false); lost != 2 || dup != 0 {
		t.Fatalf("lost %d, duplicated %d; want 2 (position 3, progress 3) and 0", lost, dup)
	}
}

func TestNginxSiteIsTheRepositoryConfigWithOurAddresses(t *testing.T) {
	b, err := os.ReadFile("../../deploy/nginx/compose.conf")
	if err != nil {
		t.Fatal(err)
	}
	site := nginxSite(string(b), []string{"127.0.0.1:1001", "127.0.0.1:1002"}, 4242)
	for _, want := range []string{
		"server 127.0.0.1:1001 max_fails=",
		"server 127.0.0.1:1002 max_fails=",
		"listen 127.0.0.1:4242;",
		"proxy_next_upstream error timeout;",
		"proxy_buffering off;",
	} {
		if !strings.Contains(site, want) {
			t.Errorf("rewritten config lacks %q:\n%s", want, site)
		}
	}
	if strings.Contains(site, ":8080") || strings.Contains(site, "server node") {
		t.Errorf("rewritten config still names the compose nodes:\n%s", site)
	}
}

// A GET stream's ids carry its own position and the broadcast log's: a
// stream that joined the log at 7 and resumed misses nothing.
func TestTrackerFollowsGetStreamPositions(t *testing.T) {
	tr := newTracker()
	tr.event("g-7_0", true)
	for _, id := range []string{"g-8_0", "g-8_1", "g-9_1", "g-9_2", "g-10_2"} {
		tr.event(id, false)
	}
	if lost, dup := tr.result(0, false); lost != 0 || dup != 0 {
		t.Fatalf("lost %d, duplicated %d; want none: %s", lost, dup, describeSeqs(tr))
	}
	tr.event("g-12_2", false) // broadcast 11 never came
	tr.event("g-12_2", false) // and 12 twice
	if lost, dup := tr.result(0, false); lost != 1 || dup != 1 {
		t.Fatalf("lost %d, duplicated %d; want 1 and 1: %s", lost, dup, describeSeqs(tr))
	}
}

// Under a fault a client gets the cluster's codes in its own terms: an
// internal error, or a message or tool error naming internals, is
// counted.
func TestUnclearErrors(t *testing.T) {
	for _, c := range []struct {
		body string
		bad  bool
	}{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-31000,"message":"shared state is unavailable; retry later"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-31000,"message":"stream \"7ldan5\": cluster: not found"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"sampling/createMessage failed: stream \"x\": cluster: not found"}],"isError":true}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"42"}]}}`, false},
	} {
		msg, err := jsonrpc.Decode([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := unclear(msg) != ""; got != c.bad {
			t.Errorf("unclear(%s) = %v, want %v", c.body, got, c.bad)
		}
	}
}
