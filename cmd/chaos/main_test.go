package main

import (
	"os"
	"strings"
	"testing"
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
	// A call that ended with an error is not held to its steps.
	if lost, dup := tr.result(4, false); lost != 1 || dup != 2 {
		t.Fatalf("lost %d, duplicated %d without completion; want 1 and 2", lost, dup)
	}
	if tr.last != "s2_2" {
		t.Fatalf("last event id %q, want s2_2", tr.last)
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
