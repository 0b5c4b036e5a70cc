package main

import (
	"slices"
	"strings"
	"testing"
)

// The echo on one busy session runs on mcpcluster and the peers that
// keep sessions, right after each other, with 32 workers sharing one
// session; --scenarios echo keeps it with the other echo runs, and
// busy-session keeps it alone (with its round-trip count).
func TestBusySessionPlan(t *testing.T) {
	var targets []*target
	for _, k := range []string{"mem", "redis", "redis3", "redis-far", "gosdk", "mcpgo", "ceiling"} {
		t := &target{Key: k, Modern: k != "gosdk", Redis: strings.HasPrefix(k, "redis"), Far: k == "redis-far", Peer: k == "gosdk" || k == "mcpgo", Nodes: 1}
		if k == "ceiling" {
			t.Scenarios = []string{"echo", "churn"}
		}
		targets = append(targets, t)
	}
	specs := plan(targets, settings{FanoutStreams: 10, IdleStreams: 10})
	var busy []string
	first := -1
	for i, sp := range specs {
		if sp.Variant != busyVariant {
			continue
		}
		if sp.Kind == "main" {
			if first < 0 {
				first = i
			}
			busy = append(busy, sp.Target)
			if sp.Scenario != "echo" || sp.Revision != legacy || !slices.Equal(sp.Args, []string{"--sessions", "1", "-c", "32"}) {
				t.Errorf("busy run %+v", sp)
			}
		}
	}
	if want := []string{"mem", "redis", "redis3", "gosdk", "mcpgo"}; !slices.Equal(busy, want) {
		t.Fatalf("busy-session runs on %v, want %v", busy, want)
	}
	for i := range busy {
		if specs[first+i].Variant != busyVariant {
			t.Fatalf("the busy-session runs are not one after the other: %v", specs[first+i])
		}
	}
	keepOf := func(names ...string) []spec {
		keep := map[string]bool{}
		for _, n := range names {
			keep[n] = true
		}
		var out []spec
		for _, sp := range specs {
			if kept(sp, keep) {
				out = append(out, sp)
			}
		}
		return out
	}
	echo := keepOf("echo")
	if n := countVariant(echo, busyVariant); n != len(busy) {
		t.Errorf("--scenarios echo keeps %d busy-session runs, want %d", n, len(busy))
	}
	only := keepOf(busyScenario)
	if n := countVariant(only, busyVariant); n != len(only) || n < len(busy)+2 {
		t.Errorf("--scenarios %s keeps %v, want the busy-session runs alone, with the round trips on redis and redis3", busyScenario, only)
	}
}

func countVariant(specs []spec, variant string) int {
	n := 0
	for _, sp := range specs {
		if sp.Variant == variant {
			n++
		}
	}
	return n
}

// The busy-session runs are rows of their own in the echo table,
// compared with the best peer's busy-session run.
func TestBusySessionRows(t *testing.T) {
	res := goalSuite()
	var b strings.Builder
	renderScenario(&b, res, mainScenarios[0], "")
	page := b.String()
	for _, want := range []string{
		"| **mcpcluster, 1 node, Redis (one busy session, 32 calls in flight)** | 2025-11-25 | 900 | 0.90× |",
		"| mcp-go (one busy session, 32 calls in flight) | 2025-11-25 | 1000 | best peer |",
		"| mcp-go | 2025-11-25 | 1000 | best peer |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("echo table lacks %q:\n%s", want, page)
		}
	}
	// A faster busy-session peer does not become the plain runs' best
	// peer.
	res.Results = append(res.Results, busyResult("gosdk", 5000))
	b.Reset()
	renderScenario(&b, res, mainScenarios[0], "")
	if page := b.String(); !strings.Contains(page, "| mcp-go | 2025-11-25 | 1000 | best peer |") || !strings.Contains(page, "| **mcpcluster, 1 node, Redis (one busy session, 32 calls in flight)** | 2025-11-25 | 900 | 0.18× |") {
		t.Errorf("echo table:\n%s", page)
	}
	b.Reset()
	renderHeadline(&b, res)
	if !strings.Contains(b.String(), "**echo on one busy session**") {
		t.Errorf("headline:\n%s", b.String())
	}
}

// The paced progress runs (main and counted) are on our configurations
// with a loopback Redis and no replica, on 2025-11-25 only.
func TestPacedProgressPlan(t *testing.T) {
	var targets []*target
	for _, k := range []string{"mem", "redis", "redis3", "redis-far", "redis-wait", "gosdk"} {
		targets = append(targets, &target{Key: k, Ours: k != "gosdk", Modern: true, Redis: strings.HasPrefix(k, "redis"),
			Far: k == "redis-far", Replica: k == "redis-wait", Nodes: 1})
	}
	var got []string
	for _, sp := range plan(targets, settings{FanoutStreams: 10, IdleStreams: 10}) {
		if sp.Scenario == pacedScenario {
			if sp.Revision != legacy {
				t.Errorf("paced run on %s", sp.Revision)
			}
			got = append(got, sp.Kind+" "+sp.Target)
		}
	}
	if want := []string{"main redis", "main redis3", "rtt redis", "rtt redis3"}; !slices.Equal(got, want) {
		t.Fatalf("paced runs %v, want %v", got, want)
	}
}
