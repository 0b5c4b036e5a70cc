package main

import (
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

func mainResult(scenario, revision, key string, ops float64, p50 float64) *result {
	return &result{
		Spec:   spec{Kind: "main", Scenario: scenario, Revision: revision, Target: key},
		Report: &bench.Report{Ops: int64(ops * 3), Throughput: ops, Latency: bench.Summary{P50: p50}},
	}
}

// The goals table judges each goal from the runs, and the slowest
// scenario is the one furthest from its goal.
func TestGoals(t *testing.T) {
	res := &suiteResult{
		Settings: settings{FanoutStreams: 1000, ScaleStreams: 10000},
		Targets: []*target{
			{Key: "redis", Label: "mcpcluster, 1 node, Redis", Ours: true, Redis: true, Nodes: 1},
			{Key: "mcpgo", Label: "mcp-go", Peer: true, Nodes: 1},
			{Key: "ceiling", Label: "ceiling", Nodes: 1},
		},
		Results: []*result{
			mainResult("echo", legacy, "redis", 950, 1),
			mainResult("echo", legacy, "mcpgo", 1000, 1),
			mainResult("echo", legacy, "ceiling", 2000, 1),
			mainResult("echo", modern, "redis", 1000, 1),
			mainResult("sampling", legacy, "redis", 200, 1),
			mainResult("sampling", legacy, "mcpgo", 1000, 1),
		},
	}
	byName := map[string]goal{}
	for _, g := range computeGoals(res) {
		byName[g.name] = g
	}
	if g := byName["echo, 1 node on Redis"]; !g.measured || !g.met {
		t.Errorf("echo at 0.95× mcp-go: %+v, want measured and met (goal 0.9×)", g)
	}
	if g := byName["sampling round trip, 1 node on Redis"]; !g.measured || g.met {
		t.Errorf("sampling at 0.2× mcp-go: %+v, want measured and not met", g)
	}
	if g := byName[modern+" stateless echo, 1 node on Redis"]; !g.measured || g.met {
		t.Errorf("stateless echo at 0.5× the ceiling: %+v, want not met (goal 0.6×)", g)
	}
	if g := byName["resume, first replayed event p50, 1 node on Redis"]; g.measured {
		t.Errorf("resume did not run but is measured: %+v", g)
	}
	if sc, rev, _ := slowestScenario(res); sc != "sampling" || rev != legacy {
		t.Errorf("slowest scenario %s/%s, want sampling/%s", sc, rev, legacy)
	}
	var b strings.Builder
	renderGoals(&b, res)
	if !strings.Contains(b.String(), "| echo, 1 node on Redis | 0.95× mcp-go") || !strings.Contains(b.String(), "not measured in this run") {
		t.Errorf("goals table:\n%s", b.String())
	}
}

// The cross-node reply goal is judged from the paired run (replies
// alternating between the handler's node and another): the median of
// its paired differences, not the difference of two runs' medians.
func TestCrossNodeReplyGoalIsPaired(t *testing.T) {
	paired := mainResult("sampling", legacy, "redis3", 500, 5)
	paired.Spec.Variant = pairedVariant
	paired.Report.Extra = map[string]bench.Summary{"reply_to_result_cross": {P50: 7}, "reply_to_result_same": {P50: 5}}
	paired.Report.Paired = map[string]bench.Difference{"reply_cross_minus_same": {Pairs: 400, P10: -1, P50: 0.3, P90: 2}}
	res := &suiteResult{
		Targets: []*target{{Key: "redis3", Label: "mcpcluster, 3 nodes, Redis", Ours: true, Redis: true, Nodes: 3}},
		Results: []*result{mainResult("sampling", legacy, "redis3", 500, 5), paired},
	}
	var g goal
	for _, x := range computeGoals(res) {
		if strings.HasPrefix(x.name, "cross-node sampling reply") {
			g = x
		}
	}
	if !g.measured || !g.met || !strings.HasPrefix(g.today, "+0.30 ms p50 over 400 pairs") {
		t.Fatalf("goal %+v: want met at the paired +0.30 ms, not the medians' +2 ms", g)
	}
	if h := headlineSampling(res); !strings.Contains(h, "+0.30 ms p50 over 400 pairs") {
		t.Fatalf("headline %q", h)
	}
}
