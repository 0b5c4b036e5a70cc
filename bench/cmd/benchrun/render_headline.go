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
			if !r.t.Ours || !r.ok() {
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

func samplingPair(res *suiteResult) (cross, same row, ok bool) {
	for _, r := range rows(res, "sampling", legacy, "main") {
		if r.t.Key != "redis3" || !r.ok() {
			continue
		}
		if r.res.Spec.Variant == "" {
			cross = r
		} else {
			same = r
		}
	}
	return cross, same, cross.rep != nil && same.rep != nil
}

func headlineSampling(res *suiteResult) string {
	cross, same, ok := samplingPair(res)
	if !ok {
		return ""
	}
	c, s := cross.rep.Extra["reply_to_result"], same.rep.Extra["reply_to_result"]
	return fmt.Sprintf("cross-node p50 %s / p99 %s, same-node p50 %s / p99 %s", ms(c.P50), ms(c.P99), ms(s.P50), ms(s.P99))
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
