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

// busyResult is a main run on one busy session.
func busyResult(key string, ops float64) *result {
	r := mainResult("echo", legacy, key, ops, 1)
	r.Spec.Variant = busyVariant
	r.Report.Concurrency = busyCalls
	return r
}

// withCPU gives a run its nodes' CPU per operation.
func withCPU(r *result, nodeMicros, redisMicros float64) *result {
	r.Report.Processes = map[string]bench.ProcessCPU{"node1": {MicrosPerOp: nodeMicros}}
	if redisMicros > 0 {
		r.Report.Processes["redis"] = bench.ProcessCPU{MicrosPerOp: redisMicros}
	}
	return r
}

// rttResult is a MONITOR run counting rt round trips per operation, all
// EVALSHA.
func rttResult(scenario, revision, key, variant string, rt float64) *result {
	return &result{
		Spec: spec{Kind: "rtt", Scenario: scenario, Revision: revision, Target: key, Variant: variant},
		Report: &bench.Report{Ops: 100, Redis: &bench.RedisStats{
			RoundTripsPerOp: rt, RoundTrips: map[string]float64{"evalsha": rt}, CommandsPerOp: rt,
		}},
	}
}

// goalSuite is a suite result with a run of every throughput goal's
// scenarios: mcpcluster on one node, on three, and with Redis far away,
// against mcp-go and go-sdk.
func goalSuite() *suiteResult {
	res := &suiteResult{
		Settings: settings{FanoutStreams: 1000, ScaleStreams: 10000},
		Targets: []*target{
			{Key: "redis", Label: "mcpcluster, 1 node, Redis", Ours: true, Redis: true, Nodes: 1},
			{Key: "redis3", Label: "mcpcluster, 3 nodes, Redis", Ours: true, Redis: true, Nodes: 3},
			{Key: "redis-far", Label: "mcpcluster, 1 node, Redis +0.5 ms", Ours: true, Redis: true, Nodes: 1, Far: true, PingFar: 1.1},
			{Key: "gosdk", Label: "go-sdk", Peer: true, Nodes: 1},
			{Key: "mcpgo", Label: "mcp-go", Peer: true, Nodes: 1},
			{Key: "ceiling", Label: "ceiling", Nodes: 1},
		},
		Results: []*result{
			// 1 node: echo 1.05× mcp-go, busy 0.9×, progress 0.95×,
			// sampling 0.2×, churn 0.9×.
			withCPU(mainResult("echo", legacy, "redis", 1050, 1), 100, 20),
			withCPU(mainResult("echo", legacy, "mcpgo", 1000, 1), 90, 0),
			mainResult("echo", legacy, "gosdk", 400, 1),
			mainResult("echo", legacy, "ceiling", 2000, 1),
			withCPU(busyResult("redis", 900), 120, 30),
			withCPU(busyResult("mcpgo", 1000), 80, 0),
			busyResult("gosdk", 300),
			mainResult("progress", legacy, "redis", 950, 1),
			mainResult("progress", legacy, "mcpgo", 1000, 1),
			mainResult("progress", legacy, "gosdk", 500, 1),
			mainResult("sampling", legacy, "redis", 200, 1),
			mainResult("sampling", legacy, "mcpgo", 1000, 1),
			// go-sdk ahead in sampling only.
			withCPU(mainResult("sampling", legacy, "gosdk", 250, 1), 70, 0),
			mainResult("churn", legacy, "redis", 900, 1),
			mainResult("churn", legacy, "mcpgo", 1000, 1),
			mainResult("churn", legacy, "gosdk", 450, 1),
			// 3 nodes: every scenario at 0.8× or more.
			mainResult("echo", legacy, "redis3", 800, 1),
			mainResult("progress", legacy, "redis3", 850, 1),
			mainResult("sampling", legacy, "redis3", 800, 1),
			mainResult("churn", legacy, "redis3", 900, 1),
			// Redis far away: churn at 0.5×.
			mainResult("echo", legacy, "redis-far", 700, 1),
			mainResult("progress", legacy, "redis-far", 600, 1),
			mainResult("sampling", legacy, "redis-far", 150, 1),
			mainResult("churn", legacy, "redis-far", 500, 1),
			// 2026-07-28: echo and progress ahead, sampling behind.
			mainResult("echo", modern, "redis", 1000, 1),
			mainResult("echo", modern, "mcpgo", 800, 1),
			mainResult("progress", modern, "redis", 1200, 1),
			mainResult("progress", modern, "mcpgo", 1000, 1),
			mainResult("sampling", modern, "redis", 950, 1),
			mainResult("sampling", modern, "mcpgo", 1000, 1),
			// Round trips.
			rttResult("echo", legacy, "redis", "", 0.02),
			rttResult("echo", legacy, "redis", busyVariant, 0.5),
			rttResult("sampling", legacy, "redis", "", 2.35),
			rttResult("churn", legacy, "redis", "", 2.74),
		},
	}
	return res
}

// The goals table judges each goal from the runs, and the slowest
// scenario is the one furthest from its goal.
func TestGoals(t *testing.T) {
	res := goalSuite()
	byName := map[string]goal{}
	for _, g := range computeGoals(res) {
		byName[g.name] = g
	}
	busyName := "echo, one busy session (32 calls in flight), 1 node on Redis"
	for name, want := range map[string]bool{
		"echo, 1 node on Redis":                                          true,  // 1.05×, goal 1.0×
		busyName:                                                         false, // 0.9×, goal 1.0×
		"progress, 10 events, 1 node on Redis":                           true,  // 0.95×, goal 0.9×
		"sampling round trip, 1 node on Redis":                           false, // 0.2×
		"session churn, 1 node on Redis":                                 true,  // 0.9×
		"3 nodes on Redis: echo, progress, sampling, churn":              true,
		"1 node, Redis +0.5 ms away: echo, progress, sampling, churn":    false, // sampling 0.15×, churn 0.5×
		"ahead of go-sdk everywhere, 1 node on Redis":                    false, // sampling 0.8× go-sdk
		modern + " lead kept: echo, progress, sampling, 1 node on Redis": false, // sampling 0.95×
		modern + " stateless echo, 1 node on Redis":                      false, // 0.5× the ceiling
	} {
		g, ok := byName[name]
		if !ok {
			t.Errorf("no goal %q", name)
			continue
		}
		if !g.measured || g.met != want {
			t.Errorf("%s: %+v, want measured and met=%v", name, g, want)
		}
	}
	if g := byName[busyName]; !strings.HasPrefix(g.today, "0.90× mcp-go (900 ops/s), 0.50 Redis round trips/op") ||
		!strings.Contains(g.reason, "0.50 Redis round trips/op (EVALSHA 0.50)") || !strings.Contains(g.reason, "node CPU 120 µs/op (+30 in Redis) against mcp-go's 80") {
		t.Errorf("busy session goal: today %q, reason %q: want its own run's round trips and CPU against mcp-go's busy run", g.today, g.reason)
	}
	if g := byName["ahead of go-sdk everywhere, 1 node on Redis"]; !strings.Contains(g.today, "echo on one busy session (32 calls in flight) 3.00×") ||
		!strings.Contains(g.today, "sampling 0.80×") || !strings.Contains(g.today, "(× go-sdk)") ||
		!strings.Contains(g.reason, "sampling at 0.80×: 2.35 Redis round trips/op (EVALSHA 2.35)") || strings.Contains(g.reason, "echo at") ||
		g.scenario != "sampling" || g.revision != legacy {
		t.Errorf("go-sdk goal: %+v", g)
	}
	far := byName["1 node, Redis +0.5 ms away: echo, progress, sampling, churn"]
	if !strings.Contains(far.reason, "churn at 0.50×: 2.74 Redis round trips/op (EVALSHA 2.74)") ||
		!strings.Contains(far.reason, "2.74 round trips at 1.10 ms each (PING through the proxy) wait 3.01 ms per operation") ||
		!strings.Contains(far.reason, "on loopback Redis it does 900 ops/s (the distance costs 0.56×)") ||
		strings.Contains(far.reason, "echo at") || !strings.Contains(far.reason, "#redis-at-a-production-distance") {
		t.Errorf("far goal reason: %q", far.reason)
	}
	if far.scenario != "" {
		t.Errorf("far goal names scenario %q for the profile, which is taken on loopback Redis", far.scenario)
	}
	if g := byName[modern+" lead kept: echo, progress, sampling, 1 node on Redis"]; g.today != "echo 1.25×, progress 1.20×, sampling 0.95× (× mcp-go)" || g.revision != modern {
		t.Errorf("2026-07-28 lead: %+v", g)
	}
	if g := byName["resume, first replayed event p50, 1 node on Redis"]; g.measured {
		t.Errorf("resume did not run but is measured: %+v", g)
	}
	if sc, rev, _ := slowestScenario(res); sc != "sampling" || rev != legacy {
		t.Errorf("slowest scenario %s/%s, want sampling/%s", sc, rev, legacy)
	}
	var b strings.Builder
	renderGoals(&b, res)
	page := b.String()
	for _, want := range []string{"(issue 28)", "| echo, 1 node on Redis | 1.05× mcp-go", "| " + busyName + " | 0.90× mcp-go", "≥ 1.0× mcp-go (in memory) on one busy session", "not measured in this run"} {
		if !strings.Contains(page, want) {
			t.Errorf("goals table lacks %q:\n%s", want, page)
		}
	}
}

// A goal over several scenarios is not met while one of them was not
// measured, and says which.
func TestSpanGoalNotMeasured(t *testing.T) {
	res := goalSuite()
	var kept []*result
	for _, r := range res.Results {
		if !(r.Spec.Scenario == "churn" && r.Spec.Target == "redis3") {
			kept = append(kept, r)
		}
	}
	res.Results = kept
	for _, g := range computeGoals(res) {
		if strings.HasPrefix(g.name, "3 nodes on Redis") {
			if !g.measured || g.met || !strings.Contains(g.today, "not measured: churn") || !strings.Contains(g.reason, "not measured in this run: churn") {
				t.Fatalf("%+v", g)
			}
			return
		}
	}
	t.Fatal("no 3-node goal")
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

// The goal of an event appended on its own divides the paced progress
// call's Redis CPU by its 12 appends, and the counted run's figures by
// the appends (EVALSHA) that run saw.
func TestPacedGoal(t *testing.T) {
	res := &suiteResult{Targets: []*target{{Key: "redis", Label: "mcpcluster, 1 node, Redis", Ours: true, Redis: true, Nodes: 1}}}
	if g := pacedGoal(res); g.measured {
		t.Fatalf("measured without a run: %+v", g)
	}
	res.Results = []*result{
		withCPU(mainResult(pacedScenario, legacy, "redis", 70, 210), 1300, 1200),
		rttResult(pacedScenario, legacy, "redis", "", 15),
	}
	g := pacedGoal(res)
	if !g.measured || g.met || g.today != "100 µs per event (12 appends per call)" ||
		!strings.Contains(g.reason, "1.00 Redis round trips, 1.0 commands and 0.00 requests read per event") {
		t.Fatalf("paced goal: %+v", g)
	}
}
