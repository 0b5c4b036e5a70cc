package main

import (
	"fmt"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// The headline of the page: the few figures a reader looks for first.

func renderHeadline(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Headline\n\n")
	ceil, hasCeil := ceilingRow(res)
	for _, rev := range []string{legacy, modern} {
		rs := rows(res, "echo", rev, "main")
		best, hasBest := bestPeer(rs, false)
		var parts []string
		for _, r := range rs {
			if !r.t.Ours || !r.ok() || r.res.Spec.Variant != "" {
				continue
			}
			s := fmt.Sprintf("%s **%s ops/s**", r.label(), rate(r.rep.Throughput))
			var rel []string
			if hasBest {
				rel = append(rel, fmt.Sprintf("%s %s", ratio(r.rep.Throughput/best.rep.Throughput), best.t.Label))
			}
			if gs := find(rs, "gosdk"); gs.ok() && (!hasBest || best.t.Key != "gosdk") {
				rel = append(rel, fmt.Sprintf("%s go-sdk", ratio(r.rep.Throughput/gs.rep.Throughput)))
			}
			if hasCeil {
				rel = append(rel, fmt.Sprintf("%s the ceiling", ratio(r.rep.Throughput/ceil.rep.Throughput)))
			}
			if len(rel) > 0 {
				s += " = " + strings.Join(rel, ", ")
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			p("- **echo on %s** (tools/call → JSON, %d sessions): %s.\n", rev, res.Settings.Concurrency, strings.Join(parts, "; "))
		}
	}
	if line := headlineBusy(res); line != "" {
		p("- **echo on one busy session** (%s, %d `tools/call` in flight on one `Mcp-Session-Id`): %s.\n", legacy, busyCalls, line)
	}
	if line := headlineRedis(res); line != "" {
		p("- **Redis round trips per operation** (1 node, counted with MONITOR): %s.\n", line)
	}
	if line := headlineIdle(res); line != "" {
		p("- **Memory per open idle SSE stream** (%d GET streams, RSS delta ÷ %d): %s.\n", res.Settings.IdleStreams, res.Settings.IdleStreams, line)
	}
	if line := headlineConns(res); line != "" {
		p("- **Redis connections per node with %d open streams**: %s.\n", res.Settings.IdleStreams, line)
	}
	if line := headlineTasks(res); line != "" {
		p("- **Durable tasks** (create, poll tasks/get to completed, read the result; %d clients): %s.\n", res.Settings.Concurrency, line)
	}
	if line := headlineSampling(res); line != "" {
		p("- **Sampling round trip on 3 nodes** (reply POST → result): %s.\n", line)
	}
	p("\n")
}

// headlineBusy gives each mcpcluster configuration's echo rate on one
// busy session against the peers' on theirs.
func headlineBusy(res *suiteResult) string {
	rs := rows(res, "echo", legacy, "main")
	var parts []string
	for _, r := range rs {
		if !r.t.Ours || !r.ok() || r.res.Spec.Variant != busyVariant {
			continue
		}
		s := fmt.Sprintf("%s **%s ops/s**", r.t.Label, rate(r.rep.Throughput))
		var rel []string
		for _, key := range []string{"mcpgo", "gosdk"} {
			if pr, ok := mainRow(res, "echo", legacy, key, busyVariant); ok {
				rel = append(rel, fmt.Sprintf("%s %s", ratio(r.rep.Throughput/pr.rep.Throughput), pr.t.Label))
			}
		}
		if len(rel) > 0 {
			s += " = " + strings.Join(rel, ", ")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func find(rs []row, key string) row {
	for _, r := range rs {
		if r.t.Key == key && r.res.Spec.Variant == "" {
			return r
		}
	}
	return row{t: &target{}}
}

// rttRow returns the MONITOR run of a scenario on a target.
func rttRow(res *suiteResult, scenario, revision, key, variant string) *bench.Report {
	for _, r := range res.Results {
		s := r.Spec
		if s.Kind == "rtt" && s.Scenario == scenario && s.Revision == revision && s.Target == key && s.Variant == variant && r.Report != nil && r.Report.Redis != nil {
			return r.Report
		}
	}
	return nil
}

func headlineRedis(res *suiteResult) string {
	var parts []string
	for _, c := range []struct{ sc, rev, name string }{
		{"echo", legacy, "legacy echo"}, {"echo", modern, "stateless echo"},
		{"progress", legacy, "progress call (10 notifications)"}, {"sampling", legacy, "sampling call"},
		{"churn", legacy, "session life (init+call+DELETE)"},
		{"tasks", legacy, "task (create, poll, result)"}, {"tasks", modern, "stateless task (create, poll)"},
	} {
		if rep := rttRow(res, c.sc, c.rev, "redis", ""); rep != nil && rep.Ops > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", c.name, rep.Redis.RoundTripsPerOp))
		}
	}
	return strings.Join(parts, ", ")
}

func idleRow(res *suiteResult, key string) *idleStats {
	for _, r := range res.Results {
		if r.Spec.Kind == "idle" && r.Spec.Target == key && r.Idle != nil && r.Idle.RSSStreamsKB > 0 && r.Report != nil {
			return r.Idle
		}
	}
	return nil
}

func headlineIdle(res *suiteResult) string {
	var parts []string
	for _, t := range res.Targets {
		if st := idleRow(res, t.Key); st != nil {
			parts = append(parts, fmt.Sprintf("%s %.1f kB", t.Label, st.PerStreamKB()))
		}
	}
	return strings.Join(parts, ", ")
}

func headlineConns(res *suiteResult) string {
	var parts []string
	for _, t := range res.Targets {
		st := idleRow(res, t.Key)
		if st == nil || len(st.RedisConnsStreams) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (before the streams: %s)", t.Label, ints(st.RedisConnsStreams), ints(st.RedisConnsBefore)))
	}
	return strings.Join(parts, "; ")
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " / ")
}

// pairedVariant is the sampling run on three nodes whose sessions
// alternate their replies between the node running the handler and
// another (mcpbench --reply-to alternate): the cross-node cost is the
// paired difference within it.
const pairedVariant = "paired replies"

// pairedOneVariant is pairedVariant with one session, one call at a
// time (mcpbench -c 1): what the hop costs when no other work waits for
// the machine's cores.
const pairedOneVariant = "paired replies, one call at a time"

// crossNode is the cross-node reply's cost on target key: from the
// paired run, or else (results of older runs) from two separate runs.
type crossNode struct {
	cross, same bench.Summary // reply→result
	diff        bench.Difference
	paired      bool
}

func crossNodeReply(res *suiteResult, key string) (crossNode, bool) {
	return crossNodeReplyOf(res, key, pairedVariant)
}

// crossNodeReplyOf is crossNodeReply from the paired run variant.
func crossNodeReplyOf(res *suiteResult, key, variant string) (crossNode, bool) {
	if r, ok := mainRow(res, "sampling", legacy, key, variant); ok {
		if d := r.rep.Paired["reply_cross_minus_same"]; d.Pairs > 0 {
			return crossNode{cross: r.rep.Extra["reply_to_result_cross"], same: r.rep.Extra["reply_to_result_same"], diff: d, paired: true}, true
		}
	}
	if variant != pairedVariant {
		return crossNode{}, false
	}
	cross, okC := mainRow(res, "sampling", legacy, key, "")
	same, okS := mainRow(res, "sampling", legacy, key, "same-node reply")
	if !okC || !okS {
		return crossNode{}, false
	}
	c, s := cross.rep.Extra["reply_to_result"], same.rep.Extra["reply_to_result"]
	return crossNode{cross: c, same: s, diff: bench.Difference{P50: c.P50 - s.P50}}, true
}

func headlineSampling(res *suiteResult) string {
	cn, ok := crossNodeReply(res, "redis3")
	if !ok {
		return ""
	}
	out := fmt.Sprintf("cross-node p50 %s / p99 %s, same-node p50 %s / p99 %s", ms(cn.cross.P50), ms(cn.cross.P99), ms(cn.same.P50), ms(cn.same.P99))
	if cn.paired {
		out += fmt.Sprintf(", alternating in one run: cross-node minus same-node %+.2f ms p50 over %d pairs", cn.diff.P50, cn.diff.Pairs)
	}
	return out
}

// headlineTasks gives each mcpcluster configuration's task rate and
// latency, with the Redis round trips per task where counted.
func headlineTasks(res *suiteResult) string {
	var parts []string
	for _, rev := range []string{legacy, modern} {
		for _, r := range rows(res, "tasks", rev, "main") {
			if !r.t.Ours || !r.ok() || r.t.Far {
				continue
			}
			s := fmt.Sprintf("%s on %s **%s tasks/s**, p50 %s", r.label(), rev, rate(r.rep.Throughput), ms(r.rep.Latency.P50))
			if rep := rttRow(res, "tasks", rev, r.t.Key, ""); rep != nil && rep.Ops > 0 {
				s += fmt.Sprintf(", %.1f Redis round trips/task", rep.Redis.RoundTripsPerOp)
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}
