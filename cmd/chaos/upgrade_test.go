package main

import (
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

func TestOwnerNode(t *testing.T) {
	for id, want := range map[jsonrpc.ID]string{
		jsonrpc.StringID("c.node2.Zx9_-aB3cD4e~2.AAAAAAAAAAAAAAAA"): "node2",
		jsonrpc.StringID("c.node1.inc1.AAAA"):                       "node1",
		jsonrpc.StringID("x.node1.inc1.AAAA"):                       "",
		jsonrpc.StringID("c.node1"):                                 "",
		jsonrpc.IntID(7):                                            "",
	} {
		if got := ownerNode(id); got != want {
			t.Errorf("ownerNode(%s) = %q, want %q", id, got, want)
		}
	}
}

func TestReleasesPickTheOtherRelease(t *testing.T) {
	r := &releases{of: map[string]string{"node1": relPrevious, "node2": relThis, "node3": relThis},
		url: map[string]string{}, ready: map[string]bool{"node1": true, "node2": true, "node3": false}}
	for range 20 {
		if id, rel, other := r.pick(relPrevious); id != "node2" || rel != relThis || !other {
			t.Fatalf("pick(previous) = %s %s %v, want node2 (node3 is not ready)", id, rel, other)
		}
	}
	r.set("node2", "", false)
	if id, _, other := r.pick(relPrevious); id != "node1" || other {
		t.Errorf("pick(previous) with no other release ready = %s %v, want node1 and false", id, other)
	}
	r.set("node1", "", false)
	if id, _, _ := r.pick(""); id != "" {
		t.Errorf("pick with no node ready = %s", id)
	}
}

// Every exchange across releases must be answered, in both directions,
// and each direction must have been tried.
func TestCrossStatsFailures(t *testing.T) {
	cs := newCrossStats()
	up, down := crossKey(relPrevious, relThis), crossKey(relThis, relPrevious)
	for _, m := range []map[string]int{cs.replies, cs.repliesOK, cs.mrtr, cs.mrtrOK, cs.tasks, cs.tasksOK, cs.changes, cs.changesOK} {
		m[up], m[down] = 3, 3
	}
	if f := cs.failures(); len(f) != 0 {
		t.Fatalf("all answered: failures %q", f)
	}
	cs.repliesOK[up] = 2
	delete(cs.tasks, down)
	f := strings.Join(cs.failures(), "; ")
	if !strings.Contains(f, "sampling replies previous→this: 1 of 3 not answered") || !strings.Contains(f, "no tasks this→previous") {
		t.Errorf("failures: %s", f)
	}
}
