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

// roundTrips describes the loopback round trips of an operation on one
// node.
func roundTrips(res *suiteResult, scenario, revision string) (float64, string) {
	return roundTripsOn(res, scenario, revision, "redis", "")
}

// roundTripsOn describes the round trips of an operation counted on
// target key (a run of variant).
func roundTripsOn(res *suiteResult, scenario, revision, key, variant string) (float64, string) {
	rep := rttRow(res, scenario, revision, key, variant)
	if rep == nil || rep.Ops == 0 {
		return 0, ""
	}
	by := perOpList(rep.Redis.RoundTrips)
	if rep.Redis.ReadsPerOp > 0 {
		by += fmt.Sprintf("; %.2f requests read by Redis", rep.Redis.ReadsPerOp)
	}
	return rep.Redis.RoundTripsPerOp, by
}

// rtNote is "N round trips/op (by command); " when they were counted.
func rtNote(rt float64, by string) string {
	if by == "" {
		return ""
	}
	return fmt.Sprintf("%.2f Redis round trips/op (%s); ", rt, by)
}

// joinNotes joins the parts of a reason ("; "-separated), leaving out
// the empty ones.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n = strings.TrimSuffix(strings.TrimPrefix(n, "; "), "; "); n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
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
	return farNoteOn(res, scenario, revision, "redis-far", near)
}

// farNoteOn gives the throughput of a scenario on farKey, the
// configuration of near with Redis 0.5 ms away.
func farNoteOn(res *suiteResult, scenario, revision, farKey string, near row) string {
	far, ok := mainRow(res, scenario, revision, farKey, near.res.Spec.Variant)
	if !ok || near.rep == nil {
		return ""
	}
	return fmt.Sprintf("; with Redis +0.5 ms away it does %s ops/s (%s)", rate(far.rep.Throughput), ratio(far.rep.Throughput/near.rep.Throughput))
}

// nearNote is farNote seen from the far configuration: its throughput on
// loopback Redis, and what the round trips cost at the far distance.
func nearNote(res *suiteResult, scenario, revision, nearKey string, far row, rt float64) string {
	var out string
	if far.t != nil && far.t.PingFar > 0 && rt > 0 {
		out = fmt.Sprintf("; %.2f round trips at %s each (PING through the proxy) wait %s per operation", rt, ms(far.t.PingFar), ms(rt*far.t.PingFar))
	}
	if near, ok := mainRow(res, scenario, revision, nearKey, far.res.Spec.Variant); ok {
		out += fmt.Sprintf("; on loopback Redis it does %s ops/s (the distance costs %s)", rate(near.rep.Throughput), ratio(far.rep.Throughput/near.rep.Throughput))
	}
	return out
}

// part is one scenario of a goal that spans several.
type part struct {
	label, sc, variant string
}

// The scenarios of the throughput goals, 2025-11-25.
var (
	partEcho     = part{"echo", "echo", ""}
	partBusy     = part{fmt.Sprintf("echo on one busy session (%d calls in flight)", busyCalls), "echo", busyVariant}
	partProgress = part{"progress", "progress", ""}
	partSampling = part{"sampling", "sampling", ""}
	partChurn    = part{"churn", "churn", ""}
)

// spanGoal judges a goal over several scenarios: target key's throughput
// at least want× the peer's in each (the peer's run of the same
// variant), on revision; met when every one was measured and is. Each
// scenario short of it gets its reason: round trips (counted on rttKey),
// node CPU against the peer's, and what the far note adds. profiled
// makes the scenario furthest from the goal a candidate for the
// profile, which is taken on one node with loopback Redis, and links
// the reason to it; otherwise the reason ends with link.
func spanGoal(res *suiteResult, g goal, revision, key, peerKey, rttKey string, want float64, parts []part, profiled bool,
	far func(p part, ours row, rt float64) string, link string) goal {
	peerLabel := peerKey
	var today, short, missing []string
	worst, worstGap := part{}, 0.0
	for _, pt := range parts {
		ours, ok1 := mainRow(res, pt.sc, revision, key, pt.variant)
		peer, ok2 := mainRow(res, pt.sc, revision, peerKey, pt.variant)
		if !ok1 || !ok2 {
			missing = append(missing, pt.label)
			continue
		}
		peerLabel = peer.t.Label
		v := ours.rep.Throughput / peer.rep.Throughput
		today = append(today, fmt.Sprintf("%s %s", pt.label, ratio(v)))
		if gap := want / v; gap > worstGap {
			worst, worstGap = pt, gap
		}
		if v < want {
			rt, by := roundTripsOn(res, pt.sc, revision, rttKey, pt.variant)
			note := fmt.Sprintf("%s at %s", pt.label, ratio(v))
			if why := joinNotes(rtNote(rt, by), cpuNote(ours, peer), far(pt, ours, rt)); why != "" {
				note += ": " + why
			}
			short = append(short, note)
		}
	}
	if len(today) == 0 {
		return g
	}
	g.measured = true
	g.met = len(short) == 0 && len(missing) == 0
	g.today = strings.Join(today, ", ") + " (× " + peerLabel + ")"
	if len(missing) > 0 {
		g.today += "; not measured: " + strings.Join(missing, ", ")
		short = append(short, "not measured in this run: "+strings.Join(missing, ", "))
	}
	if profiled {
		g.scenario, g.revision, g.gap = worst.sc, revision, worstGap
		link = profileLink(res, worst.sc, revision)
	}
	g.reason = joinNotes(strings.Join(short, ". "), link)
	return g
}

func computeGoals(res *suiteResult) []goal {
	var out []goal
	// Throughput against mcp-go (in memory) on one node with Redis
	// (issue 28).
	for _, c := range []struct {
		name string
		pt   part
		want float64
	}{
		{"echo", partEcho, 1.0},
		{fmt.Sprintf("echo, one busy session (%d calls in flight)", busyCalls), partBusy, 1.0},
		{"progress, 10 events", partProgress, 0.9},
		{"sampling round trip", partSampling, 0.9},
		{"session churn", partChurn, 0.9},
	} {
		g := goal{name: c.name + ", 1 node on Redis", target: fmt.Sprintf("≥ %.1f× mcp-go (in memory)", c.want), scenario: c.pt.sc, revision: legacy}
		if c.pt.variant == busyVariant {
			g.target += " on one busy session"
		}
		ours, ok1 := mainRow(res, c.pt.sc, legacy, "redis", c.pt.variant)
		peer, ok2 := mainRow(res, c.pt.sc, legacy, "mcpgo", c.pt.variant)
		if ok1 && ok2 {
			v := ours.rep.Throughput / peer.rep.Throughput
			rt, by := roundTripsOn(res, c.pt.sc, legacy, "redis", c.pt.variant)
			g.measured, g.met, g.gap = true, v >= c.want, c.want/v
			g.today = fmt.Sprintf("%s mcp-go (%s ops/s)", ratio(v), rate(ours.rep.Throughput))
			if by != "" {
				g.today += fmt.Sprintf(", %.2f Redis round trips/op", rt)
			}
			g.reason = joinNotes(rtNote(rt, by), cpuNote(ours, peer), farNote(res, c.pt.sc, legacy, ours), goalLink(res, c.pt))
		}
		out = append(out, g)
	}
	all := []part{partEcho, partBusy, partProgress, partSampling, partChurn}
	four := []part{partEcho, partProgress, partSampling, partChurn}
	names := func(ps []part) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.sc)
		}
		return strings.Join(s, ", ")
	}
	// Ahead of go-sdk everywhere, on one node with Redis.
	out = append(out, spanGoal(res, goal{name: "ahead of go-sdk everywhere, 1 node on Redis", target: "≥ 1.0× go-sdk (in memory) in each of echo, echo on one busy session, progress, sampling, churn"},
		legacy, "redis", "gosdk", "redis", 1.0, all, true,
		func(p part, ours row, _ float64) string { return farNote(res, p.sc, legacy, ours) }, ""))
	// Three nodes sharing one Redis.
	out = append(out, spanGoal(res, goal{name: "3 nodes on Redis: " + names(four), target: "≥ 0.8× mcp-go (in memory) in each"},
		legacy, "redis3", "mcpgo", "redis3", 0.8, four, false,
		func(p part, ours row, _ float64) string { return farNoteOn(res, p.sc, legacy, "redis3-far", ours) },
		"; see [Redis cost per operation](#redis-cost-per-operation)"))
	// One node, its Redis 0.5 ms away.
	out = append(out, spanGoal(res, goal{name: "1 node, Redis +0.5 ms away: " + names(four), target: "≥ 0.6× mcp-go (in memory) in each"},
		legacy, "redis-far", "mcpgo", "redis", 0.6, four, false,
		func(p part, ours row, rt float64) string { return nearNote(res, p.sc, legacy, "redis", ours, rt) },
		"; see [Redis at a production distance](#redis-at-a-production-distance-05-ms-each-way)"))
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
	out = append(out, pacedGoal(res))
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
			if one, ok := crossNodeReplyOf(res, "redis3", pairedOneVariant); ok {
				g.reason += fmt.Sprintf("; one call at a time, with no other work waiting for the two cores, it costs %+.2f ms p50 over %d pairs: under load the extra hop mostly waits for a core (three nodes, Redis and the load share two)",
					one.diff.P50, one.diff.Pairs)
			}
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
	// The lead of 2026-07-28 kept, on one node with Redis.
	out = append(out, spanGoal(res, goal{name: modern + " lead kept: echo, progress, sampling, 1 node on Redis", target: "≥ 1.0× mcp-go (in memory) in each"},
		modern, "redis", "mcpgo", "redis", 1.0, []part{partEcho, partProgress, partSampling}, true,
		func(p part, ours row, _ float64) string { return farNote(res, p.sc, modern, ours) }, ""))
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
	p("The goals of mcpcluster on Redis (issue 28), checked against this run. *Today* is this run's figure; where a goal is not met, the reason says where the time or the Redis traffic goes.\n\n")
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
