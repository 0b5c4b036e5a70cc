package main

import (
	"fmt"
	"math"
	"strings"
)

// The goals of mcpcluster on Redis, checked against each run: the table
// at the top of the page.

// goal is one row of the goals table.
type goal struct {
	name     string
	today    string
	target   string
	measured bool // the run measured it
	met      bool
	reason   string // one line, where not met
	// gap is how far from the goal (1: met exactly; larger is worse),
	// for the profiled scenario's choice; scenario and revision name
	// it.
	gap                float64
	scenario, revision string
}

// mainRow returns the usable main run of a scenario on a target.
func mainRow(res *suiteResult, scenario, revision, key, variant string) (row, bool) {
	for _, r := range rows(res, scenario, revision, "main") {
		if r.t != nil && r.t.Key == key && r.res.Spec.Variant == variant && r.ok() {
			return r, true
		}
	}
	return row{}, false
}

// roundTrips describes the loopback round trips of an operation.
func roundTrips(res *suiteResult, scenario, revision string) (float64, string) {
	rep := rttRow(res, scenario, revision, "redis", "")
	if rep == nil || rep.Ops == 0 {
		return 0, ""
	}
	return rep.Redis.RoundTripsPerOp, perOpList(rep.Redis.RoundTrips)
}

// rtNote is "N round trips/op (by command); " when they were counted.
func rtNote(rt float64, by string) string {
	if by == "" {
		return ""
	}
	return fmt.Sprintf("%.2f Redis round trips/op (%s); ", rt, by)
}

// cpuNote compares node CPU per operation with a reference row.
func cpuNote(r, ref row) string {
	a, redis, ok1 := serverMicros(r.rep)
	b, _, ok2 := serverMicros(ref.rep)
	if !ok1 || !ok2 {
		return ""
	}
	return fmt.Sprintf("node CPU %.0f µs/op (+%.0f in Redis) against %s's %.0f", a, redis, ref.t.Label, b)
}

// profileLink points at the profile section when the profile is of this
// scenario.
func profileLink(res *suiteResult, scenario, revision string) string {
	if p := res.Profile; p != nil && p.Err == "" && p.Scenario == scenario && p.Revision == revision {
		return "; see [the profiles](#profiles-of-the-slowest-redis-scenario)"
	}
	return "; see [Redis cost per operation](#redis-cost-per-operation)"
}

// farNote gives the throughput of a scenario with Redis 0.5 ms away.
func farNote(res *suiteResult, scenario, revision string, near row) string {
	far, ok := mainRow(res, scenario, revision, "redis-far", "")
	if !ok || near.rep == nil {
		return ""
	}
	return fmt.Sprintf("; with Redis +0.5 ms away it does %s ops/s (%s)", rate(far.rep.Throughput), ratio(far.rep.Throughput/near.rep.Throughput))
}

func computeGoals(res *suiteResult) []goal {
	var out []goal
	// Throughput against mcp-go (in memory) on one node with Redis.
	for _, c := range []struct {
		sc, name string
		want     float64
	}{{"echo", "echo", 0.9}, {"progress", "progress, 10 events", 0.8}, {"sampling", "sampling round trip", 0.8}, {"churn", "session churn", 0.8}} {
		g := goal{name: c.name + ", 1 node on Redis", target: fmt.Sprintf("≥ %.1f× mcp-go (in memory)", c.want), scenario: c.sc, revision: legacy}
		ours, ok1 := mainRow(res, c.sc, legacy, "redis", "")
		peer, ok2 := mainRow(res, c.sc, legacy, "mcpgo", "")
		if ok1 && ok2 {
			v := ours.rep.Throughput / peer.rep.Throughput
			rt, by := roundTrips(res, c.sc, legacy)
			g.measured, g.met, g.gap = true, v >= c.want, c.want/v
			g.today = fmt.Sprintf("%s mcp-go (%s ops/s)", ratio(v), rate(ours.rep.Throughput))
			if by != "" {
				g.today += fmt.Sprintf(", %.2f Redis round trips/op", rt)
			}
			g.reason = rtNote(rt, by) + cpuNote(ours, peer) + farNote(res, c.sc, legacy, ours) + profileLink(res, c.sc, legacy)
		}
		out = append(out, g)
	}
	// Resume latency.
	{
		g := goal{name: "resume, first replayed event p50, 1 node on Redis", target: "≤ 1.5 ms", scenario: "resume", revision: legacy}
		if r, ok := mainRow(res, "resume", legacy, "redis", ""); ok {
			v := r.rep.Latency.P50
			g.measured, g.met, g.gap = true, v <= 1.5, v/1.5
			g.today = ms(v)
			if gs, ok := mainRow(res, "resume", legacy, "gosdk", ""); ok {
				g.today += fmt.Sprintf(" (go-sdk in memory %s)", ms(gs.rep.Latency.P50))
			}
			rt, by := roundTrips(res, "resume", legacy)
			g.reason = "the resuming GET reads the stream's history from Redis" + profileLink(res, "resume", legacy)
			if by != "" {
				g.reason = fmt.Sprintf("%.1f Redis round trips per resumed call (%s)%s", rt, by, profileLink(res, "resume", legacy))
			}
		}
		out = append(out, g)
	}
	// Fan-out of one list_changed to 1000 streams.
	{
		n := res.Settings.FanoutStreams
		g := goal{name: fmt.Sprintf("fan-out of one list_changed, %d streams, 1 node on Redis", n), target: "≤ 1.2× the memory backend's p50", scenario: "fanout", revision: legacy}
		r, ok1 := mainRow(res, "fanout", legacy, "redis", "")
		m, ok2 := mainRow(res, "fanout", legacy, "mem", "")
		if ok1 && ok2 {
			v := r.rep.Latency.P50 / m.rep.Latency.P50
			g.measured, g.met, g.gap = true, v <= 1.2, v/1.2
			g.today = fmt.Sprintf("%s p50, %s the memory backend", ms(r.rep.Latency.P50), ratio(v))
			rt, by := roundTrips(res, "fanout", legacy)
			g.reason = "each session's stream gets the notification through Redis" + profileLink(res, "fanout", legacy)
			if by != "" {
				g.reason = fmt.Sprintf("%.0f Redis round trips per toggle with 100 streams (%s): each session's stream is written through Redis%s", rt, by, profileLink(res, "fanout", legacy))
			}
		}
		out = append(out, g)
	}
	// Fan-out round trips against the number of sessions.
	{
		g := goal{name: "fan-out round trips against the number of streams, 3 nodes", target: "independent of the number of streams"}
		small := rttRow(res, "fanout", legacy, "redis3", "")
		big := rttRow(res, "fanout", legacy, "redis3-scale", "scale")
		if small != nil && big != nil && small.Ops > 0 && big.Ops > 0 {
			a, b := small.Redis.RoundTripsPerOp, big.Redis.RoundTripsPerOp
			g.measured = true
			g.today = fmt.Sprintf("%.0f per toggle with 100 streams, %.0f with %d", a, b, res.Settings.ScaleStreams)
			// Independent: 100 times the streams costs less than twice
			// the round trips.
			g.met = b <= 2*a
			g.reason = fmt.Sprintf("%.4f round trips per added stream (round trips by command with %d streams: %s; with 100: %s): the few toggles of the large run share its window with the nodes' batched upkeep of %d streams",
				(b-a)/float64(max(res.Settings.ScaleStreams-100, 1)), res.Settings.ScaleStreams, perOpList(big.Redis.RoundTrips), perOpList(small.Redis.RoundTrips), res.Settings.ScaleStreams)
		}
		out = append(out, g)
	}
	// Fan-out at scale.
	{
		g := goal{name: fmt.Sprintf("fan-out of one list_changed, %d sessions over 3 nodes", res.Settings.ScaleStreams), target: "every stream within 1 s"}
		for _, r := range res.Results {
			if r.Spec.Kind == "scale" && r.Spec.Revision == legacy && r.Report != nil && r.Report.Ops > 0 {
				rep := r.Report
				g.measured = true
				g.met = rep.Latency.Max <= 1000 && rep.Errors == 0
				g.today = fmt.Sprintf("p50 %s, worst %s over %d toggles", ms(rep.Latency.P50), ms(rep.Latency.Max), rep.Ops)
				if rep.Errors > 0 {
					g.today += fmt.Sprintf(", %d incomplete", rep.Errors)
				}
				g.reason = "see [Fan-out at scale](#fan-out-at-scale)"
			}
		}
		out = append(out, g)
	}
	// Cross-node reply.
	{
		g := goal{name: "cross-node sampling reply, over same-node, 3 nodes", target: "≤ +0.5 ms p50"}
		if cn, ok := crossNodeReply(res, "redis3"); ok {
			g.measured, g.met = true, cn.diff.P50 <= 0.5
			g.today = fmt.Sprintf("%+.2f ms p50", cn.diff.P50)
			if cn.paired {
				g.today += fmt.Sprintf(" over %d pairs (p10 %+.2f, p90 %+.2f; reply→result p50 %s cross-node, %s same-node, alternating in one run)",
					cn.diff.Pairs, cn.diff.P10, cn.diff.P90, ms(cn.cross.P50), ms(cn.same.P50))
			} else {
				g.today += " (separate runs)"
			}
			g.reason = "the reply crosses to the handler's node over Redis pub/sub (one PUBLISH, one delivery)"
		}
		out = append(out, g)
	}
	// Memory and goroutines per idle stream.
	{
		g := goal{name: "memory per open idle stream, 1 node on Redis", target: "≤ 16 KiB, ≤ 2 goroutines"}
		if st := idleRow(res, "redis"); st != nil {
			kb := st.PerStreamKB()
			g.measured = true
			g.today = fmt.Sprintf("%.1f KiB", kb)
			gor := st.PerStreamGoroutines()
			if !math.IsNaN(gor) {
				g.today += fmt.Sprintf(", %.1f goroutines", gor)
			}
			g.met = kb <= 16 && (math.IsNaN(gor) || gor <= 2)
			if gs := idleRow(res, "gosdk"); gs != nil {
				g.today += fmt.Sprintf(" (go-sdk %.1f KiB)", gs.PerStreamKB())
			}
			g.reason = "its own state (tail, follows, timers) and, on HTTP/2 or a listen stream behind receiving middleware, net/http's connection buffers and serving goroutine; see [Open idle streams](#open-idle-streams-memory-and-redis-connections)"
		}
		out = append(out, g)
	}
	// Redis commands per idle stream per second.
	{
		g := goal{name: "Redis commands per open idle stream per second", target: "≤ 0.05 (the idle cost grows with nodes, not streams)"}
		for _, r := range res.Results {
			if r.Spec.Kind == "idle" && r.Spec.Target == "redis" && r.Report != nil && r.Report.Redis != nil {
				v := r.Report.Redis.CommandsPerOp
				g.measured, g.met = true, v <= 0.05
				g.today = fmt.Sprintf("%.2f", v)
				g.reason = "per-stream renewals: " + perOpList(r.Report.Redis.Commands) + " per stream-second"
			}
		}
		out = append(out, g)
	}
	// Stateless echo against the ceiling.
	{
		g := goal{name: modern + " stateless echo, 1 node on Redis", target: "≥ 0.6× the ceiling", scenario: "echo", revision: modern}
		r, ok1 := mainRow(res, "echo", modern, "redis", "")
		c, ok2 := ceilingRow(res)
		if ok1 && ok2 {
			v := r.rep.Throughput / c.rep.Throughput
			g.measured, g.met, g.gap = true, v >= 0.6, 0.6/v
			g.today = fmt.Sprintf("%s the ceiling (%s ops/s)", ratio(v), rate(r.rep.Throughput))
			rt, _ := roundTrips(res, "echo", modern)
			g.reason = fmt.Sprintf("%.2f Redis round trips/op: the cost is the node's own work, %s%s", rt, cpuNote(r, c), profileLink(res, "echo", modern))
		}
		out = append(out, g)
	}
	return out
}

// slowestScenario picks the Redis scenario furthest from its goal.
func slowestScenario(res *suiteResult) (scenario, revision string, why string) {
	var worst *goal
	for _, g := range computeGoals(res) {
		if g.scenario == "" || !g.measured {
			continue
		}
		if worst == nil || g.gap > worst.gap {
			worst = &g
		}
	}
	if worst == nil {
		return "", "", ""
	}
	return worst.scenario, worst.revision, fmt.Sprintf("%s: %s against a goal of %s", worst.name, worst.today, worst.target)
}

func renderGoals(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Goals on Redis\n\n")
	p("The goals of mcpcluster on Redis (issue 16), checked against this run. *Today* is this run's figure; where a goal is not met, the reason says where the time or the Redis traffic goes.\n\n")
	p("| Goal | today | goal | met | why not |\n|---|---|---|---|---|\n")
	for _, g := range computeGoals(res) {
		if !g.measured {
			p("| %s | not measured in this run | %s | — | |\n", g.name, g.target)
			continue
		}
		met, why := "**met**", ""
		if !g.met {
			met, why = "not met", g.reason
		}
		p("| %s | %s | %s | %s | %s |\n", g.name, g.today, g.target, met, why)
	}
	p("\n")
}
