package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// scenarioInfo describes a main scenario on the page.
type scenarioInfo struct {
	name, title, what string
	// latencyFirst marks scenarios judged by latency, not throughput.
	latencyFirst bool
	// latencyName names what the latency measures.
	latencyName string
}

var mainScenarios = []scenarioInfo{
	{"echo", "echo: tools/call answered as JSON",
		"Each operation is one `tools/call` of `echo {text}` on an open session (2025-11-25) or a stateless request (2026-07-28). mcpcluster and mcp-go answer with a JSON body; go-sdk answers every POST with an SSE stream. The ceiling decodes the JSON-RPC request and encodes a JSON answer with nothing else. The *one busy session* rows share one session among 32 clients (`mcpbench --sessions 1 -c 32`): 32 `tools/call` in flight at once on one `Mcp-Session-Id`, as an agent running tools in parallel does; their *× best peer* is against the best peer's busy-session run.",
		false, "call"},
	{"progress", "progress: 10 progress notifications over SSE",
		"Each operation is one `tools/call` of `progress {steps: 10, delayMs: 0}` with a progress token: the answer is an SSE stream of 10 `notifications/progress` and the result. On mcpcluster's handshake revisions every event is appended to the stream's shared history (so it can be resumed on any node) before it is written.",
		false, "call"},
	{"sampling", "sampling: one server→client round trip",
		"Each operation is one `tools/call` of `sample`, which asks the client for one `sampling/createMessage`. On 2025-11-25 the request arrives on an SSE stream and mcpbench answers with a POST — to the next endpoint, which on three nodes is another node than the one running the handler (the *paired replies* rows alternate, per session, a reply to the node running it and one to another node). Each session also holds its GET stream open, as real clients do (mcp-go sends the request there). On 2026-07-28 the call returns `input_required` and mcpbench retries it with `inputResponses` and `requestState` (MRTR), on the next endpoint.",
		false, "call"},
	{"churn", "churn: a whole session per operation",
		"Each operation is `initialize` + `notifications/initialized` + one `tools/call echo` + `DELETE`, each request on the next endpoint.",
		false, "session"},
	{"fanout", "fanout: one list_changed to many open streams",
		"With 1000 open streams (GET streams of 1000 sessions on 2025-11-25, `subscriptions/listen` streams on 2026-07-28) spread over the endpoints, each operation calls `toggle_extra_tool` once; its latency is the time until every stream has received `notifications/tools/list_changed`. One operation at a time.",
		true, "all delivered"},
	{"resume", "resume: cut streams resumed with Last-Event-ID",
		"Each operation starts `progress {steps: 10, delayMs: 20}`, cuts its SSE stream after 3 notifications, waits 50 ms and resumes with `GET` + `Last-Event-ID` on the next endpoint (on three nodes: another node). The latency is the time from the resuming GET to the first replayed event; every step must arrive exactly once.",
		true, "first replayed event"},
	{"tasks", "tasks: a durable task created, polled to completion and read",
		"Each operation calls `echo_task` (the demo `echo`, allowed to run as a task) as a durable task — on 2025-11-25 with `params.task` (its record lives 10 s), on 2026-07-28 with the tasks extension negotiated — then `tasks/get` until the task is completed, then reads its result (`tasks/result` on 2025-11-25, the completed `tasks/get` on 2026-07-28). Each request goes to the next endpoint: on three nodes the task is created, polled and read on different nodes. mcpcluster only: the peers have no tasks.",
		false, "create to result"},
}

// row is one measured configuration of a scenario.
type row struct {
	t   *target
	res *result
	rep *bench.Report
}

func (r row) label() string {
	s := r.t.Label
	switch v := r.res.Spec.Variant; {
	case v == busyVariant:
		calls := busyCalls
		if r.rep != nil && r.rep.Concurrency > 0 {
			calls = r.rep.Concurrency
		}
		s += fmt.Sprintf(" (%s, %d calls in flight)", v, calls)
	case v != "":
		s += " (" + v + ")"
	}
	return s
}

// ok reports whether a run produced usable numbers: a report with
// operations and less than half of them failed.
func (r row) ok() bool {
	return r.rep != nil && r.rep.Ops > 0 && r.rep.ErrorRate() < 0.5
}

// rows collects the main runs of a scenario and revision.
func rows(res *suiteResult, scenario, revision, kind string) []row {
	byKey := map[string]*target{}
	for _, t := range res.Targets {
		byKey[t.Key] = t
	}
	var out []row
	for _, r := range res.Results {
		if r.Spec.Kind != kind || r.Spec.Scenario != scenario || r.Spec.Revision != revision {
			continue
		}
		out = append(out, row{t: byKey[r.Spec.Target], res: r, rep: r.Report})
	}
	return out
}

// bestPeer returns the peer row to compare with: the highest throughput
// (or, for latency-first scenarios, the lowest p50) among usable peers'
// plain runs (no variant).
func bestPeer(rs []row, latencyFirst bool) (row, bool) {
	return bestPeerOf(rs, "", latencyFirst)
}

// bestPeerFor returns the peer row to compare a run of variant with: the
// best peer's run of the same variant (one busy session against one busy
// session), or the best plain run when no peer ran the variant.
func bestPeerFor(rs []row, variant string, latencyFirst bool) (row, bool) {
	if best, ok := bestPeerOf(rs, variant, latencyFirst); ok || variant == "" {
		return best, ok
	}
	return bestPeerOf(rs, "", latencyFirst)
}

func bestPeerOf(rs []row, variant string, latencyFirst bool) (row, bool) {
	var best row
	found := false
	for _, r := range rs {
		if !r.t.Peer || !r.ok() || r.res.Spec.Variant != variant {
			continue
		}
		better := !found
		if found {
			if latencyFirst {
				better = r.rep.Latency.P50 < best.rep.Latency.P50
			} else {
				better = r.rep.Throughput > best.rep.Throughput
			}
		}
		if better {
			best, found = r, true
		}
	}
	return best, found
}

// ceiling returns the ceiling's echo row of the legacy revision.
func ceilingRow(res *suiteResult) (row, bool) {
	for _, r := range rows(res, "echo", legacy, "main") {
		if r.t.Key == "ceiling" && r.ok() {
			return r, true
		}
	}
	return row{}, false
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.0f µs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f s", v/1000)
}

func ratio(v float64) string {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return "—"
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func rate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// serverMicros sums the CPU per operation of a run's nodes (redis
// apart).
func serverMicros(rep *bench.Report) (nodes, redis float64, ok bool) {
	for name, p := range rep.Processes {
		if name == "redis" {
			redis = p.MicrosPerOp
		} else {
			nodes += p.MicrosPerOp
			ok = true
		}
	}
	return nodes, redis, ok
}

func errorsCell(rep *bench.Report) string {
	if rep.Ops == 0 && rep.Errors == 0 {
		return "**no operation completed**"
	}
	if rep.Errors == 0 {
		return "0"
	}
	kinds := bench.SortedKinds(rep.ErrorKinds)
	return fmt.Sprintf("%d (%.1f%%, %s)", rep.Errors, 100*rep.ErrorRate(), strings.Join(kinds, ", "))
}

// renderPage writes the whole Markdown page.
func renderPage(res *suiteResult, images map[string]string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks\n\n")
	p("<!-- Generated by bench/cmd/benchrun (make bench); edits are overwritten. -->\n\n")
	p("mcpcluster measured against the official Go SDK, mcp-go and a bare net/http handler, all on one machine in one run of `make bench` (%s, %s in all). ",
		res.Started.Format("2006-01-02 15:04 UTC"), (time.Duration(res.Seconds) * time.Second).String())
	p("The machine is small and shared, and its load varies: absolute numbers move from run to run, so read the **ratios**, which were measured side by side — every configuration ran each scenario right after the others, with the same settings.\n\n")

	renderGoals(&b, res)
	renderHeadline(&b, res)
	renderMachine(&b, res)
	for _, sc := range mainScenarios {
		renderScenario(&b, res, sc, images[sc.name])
	}
	renderSampling(&b, res)
	renderRedis(&b, res)
	renderFar(&b, res)
	renderScale(&b, res)
	renderGoalProfiles(&b, res)
	renderProfile(&b, res)
	renderCapacity(&b, res)
	renderAppendCost(&b, res)
	renderIdle(&b, res)
	renderPeak(&b, res)
	renderProblems(&b, res)
	return b.String()
}

func renderMachine(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	m := res.Machine
	st := res.Settings
	p("## Machine and method\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s |\n| Cores | %d |\n| Memory | %.0f GiB |\n| Go | %s |\n| Kernel | %s |\n| Redis | %s |\n| Load average (1, 5, 15 min) at start / end | %s / %s |\n\n",
		m.CPU, m.Cores, m.MemoryGiB, m.Go, m.Kernel, m.Redis, m.LoadStart, m.LoadEnd)
	p("Command: `make bench`, which runs `%s`.\n\n", res.Command)
	p("- Every configuration runs at the same time on loopback, each in its own process(es): mcpcluster's reference node (`cmd/server`, demo tool pack) on one node with the memory backend, on one node with Redis, and on three nodes sharing one Redis (each Redis a throwaway `redis-server` of its own); the peers in `bench/peers`: the official Go SDK (%s, stateful Streamable HTTP, in-memory sessions and event store), mcp-go (%s, the same), and the ceiling, a bare `net/http` + `encoding/json` handler.\n", gosdkVersion, mcpgoVersion)
	p("- The load generator is `cmd/mcpbench`: %d concurrent sessions (closed loop: each sends its next request when the previous one is answered), connections kept alive, %s measured after %s of warm-up, operation timeout %s. With several endpoints it spreads requests round robin, like a load balancer without sticky sessions.\n",
		st.Concurrency, st.Duration, st.Warmup, st.Timeout)
	p("- The three-node configuration runs three nodes, their Redis and mcpbench on the same %d cores: it shows what spreading every session over nodes costs (each request may land on another node), not how a cluster scales out.\n", m.Cores)
	p("- The *Redis +0.5 ms* configurations are the same one and three nodes with their Redis behind toxiproxy, %s added in each direction (see [Redis at a production distance](#redis-at-a-production-distance-05-ms-each-way)); the fan-out at scale has three nodes and a Redis of its own (see [Fan-out at scale](#fan-out-at-scale)).\n", farLatency)
	p("- mcpbench shares the %d cores with the servers (and with whatever else the machine runs); its own CPU use is the *loadgen* column. *Server µs/op* is the CPU time the server process(es) used per operation (from `/proc`), which depends much less on the machine's load than ops/s does.\n", m.Cores)
	p("- *× best peer* is throughput divided by the best peer's in the same scenario and revision (for fanout and resume, which are about latency: the best peer's p50 divided by this p50; higher is better in both). *× ceiling* divides by the ceiling's echo throughput: the rate at which this machine serves plain JSON requests at all.\n")
	p("- Peers' behaviour that shapes their numbers: go-sdk answers every POST with an SSE stream, delays list_changed by 10 ms to coalesce changes, and does not offer 2026-07-28 on its stateful transport; mcp-go sends server→client requests on the session's GET stream, and its `sample` tool is written the 2026-07-28 way (it bridges older clients itself).\n\n")
}

func renderScenario(b *strings.Builder, res *suiteResult, sc scenarioInfo, image string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## %s\n\n%s\n\n", sc.title, sc.what)
	if image != "" {
		p("![%s](%s)\n\n", sc.name, image)
	}
	ceil, hasCeil := ceilingRow(res)
	extraCol := map[string]struct{ key, title string }{
		"progress": {"first_progress", "first progress p50"},
		"sampling": {"reply_to_result", "reply→result p50 / p99"},
		"fanout":   {"per_stream", "per stream p50 / p99"},
		"resume":   {"op_total", "whole call p50"},
		"churn":    {"initialize", "initialize p50"},
		"tasks":    {"done", "create→completed p50 / p99"},
	}[sc.name]
	p("| Configuration | Revision | ops/s | × best peer | × ceiling | p50 (%s) | p90 | p99 | max |", sc.latencyName)
	if extraCol.key != "" {
		p(" %s |", extraCol.title)
	}
	p(" errors | server µs/op | loadgen cores |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
	if extraCol.key != "" {
		p("---:|")
	}
	p("---|---:|---:|\n")
	any := false
	for _, rev := range []string{legacy, modern} {
		rs := rows(res, sc.name, rev, "main")
		for _, r := range rs {
			any = true
			best, hasBest := bestPeerFor(rs, r.res.Spec.Variant, sc.latencyFirst)
			isBest := hasBest && r.t.Key == best.t.Key && r.res.Spec.Variant == best.res.Spec.Variant
			if r.rep == nil {
				why := "failed"
				if r.res.Skipped {
					why = "skipped (time budget)"
				}
				p("| %s | %s | %s |||||||", r.label(), rev, why)
				if extraCol.key != "" {
					p("|")
				}
				p("|||\n")
				continue
			}
			rep := r.rep
			vsPeer, vsCeil := "—", "—"
			if hasBest && r.ok() && !isBest {
				if sc.latencyFirst {
					vsPeer = ratio(best.rep.Latency.P50 / rep.Latency.P50)
				} else {
					vsPeer = ratio(rep.Throughput / best.rep.Throughput)
				}
			}
			if isBest {
				vsPeer = "best peer"
			}
			if hasCeil && r.ok() && !sc.latencyFirst && r.t.Key != "ceiling" {
				vsCeil = ratio(rep.Throughput / ceil.rep.Throughput)
			}
			label := r.label()
			if r.t.Ours {
				label = "**" + label + "**"
			}
			if !r.ok() {
				p("| %s | %s | %s | — | — | — | — | — | — |", label, rev, rate(rep.Throughput))
			} else {
				p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", label, rev, rate(rep.Throughput), vsPeer, vsCeil,
					ms(rep.Latency.P50), ms(rep.Latency.P90), ms(rep.Latency.P99), ms(rep.Latency.Max))
			}
			if extraCol.key != "" {
				e, ok := rep.Extra[extraCol.key]
				switch {
				case !ok:
					p(" — |")
				case sc.name == "sampling" || sc.name == "fanout":
					p(" %s / %s |", ms(e.P50), ms(e.P99))
				default:
					p(" %s |", ms(e.P50))
				}
			}
			cpu := "—"
			if n, redis, ok := serverMicros(rep); ok && rep.Ops > 0 {
				cpu = fmt.Sprintf("%.0f", n)
				if redis > 0 {
					cpu += fmt.Sprintf(" (+%.0f Redis)", redis)
				}
			}
			p(" %s | %s | %.2f |\n", errorsCell(rep), cpu, rep.CPU.Cores)
		}
	}
	if !any {
		p("\n(no runs)\n")
	}
	p("\n")
}

func renderSampling(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Cross-node and same-node sampling round trips\n\n")
	p("On three nodes the handler asking for sampling runs on one node; the client's reply is a separate POST. When it lands on another node, that node routes it to the waiting handler through Redis pub/sub. *reply→result* is the time from sending the reply to receiving the call's result; *request→sampling* the time from the call to the sampling request. In the *alternating* run each session sends its replies alternately to the handler's node and to another, so both are measured side by side under the same load; the cross-node cost is the median of the differences between each session's consecutive replies (see [Goals on Redis](#goals-on-redis)).\n\n")
	p("| Configuration | Revision | reply lands on | call p50 | call p99 | request→sampling p50 | reply→result p50 | reply→result p99 |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, rev := range []string{legacy, modern} {
		for _, r := range rows(res, "sampling", rev, "main") {
			if !r.t.Ours || !r.ok() {
				continue
			}
			rq := r.rep.Extra["request_to_sampling"]
			row := func(where string, rr bench.Summary) {
				p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.t.Label, rev, where, ms(r.rep.Latency.P50), ms(r.rep.Latency.P99), ms(rq.P50), ms(rr.P50), ms(rr.P99))
			}
			switch {
			case r.res.Spec.Variant == pairedVariant:
				row("another node (alternating)", r.rep.Extra["reply_to_result_cross"])
				row("the same node (alternating)", r.rep.Extra["reply_to_result_same"])
			case r.res.Spec.Variant == pairedOneVariant:
				row("another node (alternating, one call at a time)", r.rep.Extra["reply_to_result_cross"])
				row("the same node (alternating, one call at a time)", r.rep.Extra["reply_to_result_same"])
			case r.res.Spec.Variant != "" || r.t.Nodes == 1:
				row("the same node", r.rep.Extra["reply_to_result"])
			case rev == modern:
				row("another node (retry)", r.rep.Extra["reply_to_result"])
			default:
				row("another node", r.rep.Extra["reply_to_result"])
			}
		}
	}
	p("\n")
}

// costCells are a MONITOR run's cells of the Redis cost table: round
// trips, requests read and commands per operation.
func costCells(rep *bench.Report) string {
	if rep == nil || rep.Ops == 0 {
		return "— | — | —"
	}
	reads := "—"
	if rep.Redis.ReadsPerOp > 0 {
		reads = fmt.Sprintf("%.2f", rep.Redis.ReadsPerOp)
	}
	return fmt.Sprintf("%.2f | %s | %.1f", rep.Redis.RoundTripsPerOp, reads, rep.Redis.CommandsPerOp)
}

func renderRedis(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Redis cost per operation\n\n")
	p("Short runs (2 s, %d sessions) with Redis's `MONITOR` attached count the commands the nodes send (*round trips*: each is one when sent alone; a busy node sends the script calls that waited for a round trip together in one pipeline (`--redis-pipelines`), so this is an upper bound: see [Shared round trips against concurrency](#shared-round-trips-against-concurrency)) apart from the commands its Lua scripts run inside Redis; `INFO commandstats` deltas give all commands executed. Both are divided by the operations completed in the window (fanout: per toggle with 100 streams). Background work in the window (membership heartbeats, claim renewals of open streams) is included.\n\n", res.Settings.Concurrency)
	p("*Requests read* are the read events Redis processed in the window (`INFO stats` `total_reads_processed`, the probe's own excluded): each request as it arrives, one per round trip however many script calls a shared pipeline carries, so they count what MONITOR cannot; they include the nodes' pub/sub pings.\n\n")
	p("| Operation | Revision | 1 node: round trips/op | 1 node: requests read/op | 1 node: commands/op | 3 nodes: round trips/op | 3 nodes: requests read/op | 3 nodes: commands/op | round trips by command (1 node) |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, sc := range []string{"echo", "progress", "sampling", "churn", "resume", "fanout", "tasks"} {
		for _, rev := range []string{legacy, modern} {
			one, three := rttRow(res, sc, rev, "redis", ""), rttRow(res, sc, rev, "redis3", "")
			if one == nil && three == nil {
				continue
			}
			by := "—"
			if one != nil && one.Ops > 0 {
				by = perOpList(one.Redis.RoundTrips)
			}
			p("| %s | %s | %s | %s | %s |\n", sc, rev, costCells(one), costCells(three), by)
		}
	}
	if one, three := rttRow(res, "echo", legacy, "redis", busyVariant), rttRow(res, "echo", legacy, "redis3", busyVariant); one != nil || three != nil {
		by := "—"
		if one != nil && one.Ops > 0 {
			by = perOpList(one.Redis.RoundTrips)
		}
		p("| echo, %s (%d calls in flight) | %s | %s | %s | %s |\n", busyVariant, busyCalls, legacy, costCells(one), costCells(three), by)
	}
	if cross := rttRow(res, "sampling", legacy, "redis3", "same-node reply"); cross != nil && cross.Ops > 0 {
		p("| sampling, reply on the same node | %s | | | | %s | |\n", legacy, costCells(cross))
	}
	p("\n")
	for _, r := range res.Results {
		if r.Spec.Kind == "idle" && r.Report != nil && r.Report.Redis != nil && r.Spec.Target == "redis" {
			rs := r.Report.Redis
			p("An open idle GET stream costs %.2f Redis commands per second (%s), from the %d-stream idle run on one node.\n\n",
				rs.CommandsPerOp, perOpList(rs.Commands), res.Settings.IdleStreams)
		}
	}
}

// perOpList renders per-operation counts, largest first.
func perOpList(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v >= 0.005 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", strings.ToUpper(k), m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func renderIdle(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	n := res.Settings.IdleStreams
	p("## Open idle streams: memory and Redis connections\n\n")
	p("Measured first, on freshly started processes. mcpbench opens %d sessions, pauses, opens one GET stream on each, and holds them. The RSS of the server process(es) is read from `/proc` one second after each step, and the goroutines from `/debug/pprof` (mcpcluster's `--pprof`, the SDK peers' `--pprof-addr`); the deltas are divided by %d (garbage collection makes them approximate). Redis connections per node are the node's TCP connections to its Redis (from `/proc`); Redis memory is `INFO memory` `used_memory`.\n\n", n, n)
	p("| Configuration | RSS before | + per session | + per open stream | + goroutines per stream | threads with streams | Redis connections per node: before → with streams | Redis bytes per session | Redis bytes per stream |\n|---|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, t := range res.Targets {
		st := idleRow(res, t.Key)
		if st == nil {
			continue
		}
		conns, perSess, perStream := "—", "—", "—"
		if len(st.RedisConnsStreams) > 0 {
			conns = ints(st.RedisConnsBefore) + " → " + ints(st.RedisConnsStreams)
			perSess = fmt.Sprintf("%.0f", float64(st.RedisMemSessions-st.RedisMemBase)/float64(max(st.Streams, 1)))
			perStream = fmt.Sprintf("%.0f", float64(st.RedisMemStreams-st.RedisMemSessions)/float64(max(st.Streams, 1)))
		}
		gor := "—"
		if g := st.PerStreamGoroutines(); !math.IsNaN(g) {
			gor = fmt.Sprintf("%.1f", g)
		}
		p("| %s | %.1f MB | %.1f kB | %.1f kB | %s | %d | %s | %s | %s |\n", t.Label, float64(st.RSSBaseKB)/1024, st.PerSessionKB(), st.PerStreamKB(), gor, st.Threads, conns, perSess, perStream)
	}
	p("\n")
}

func renderPeak(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Peak RSS per node\n\n`VmHWM` of each server process at the end of the whole suite (after every scenario, including %d-stream fanout and idle runs; the scale-runs configuration after the %d-session fan-out).\n\n", res.Settings.FanoutStreams, res.Settings.ScaleStreams)
	p("| Configuration | peak RSS per node |\n|---|---|\n")
	for _, t := range res.Targets {
		kb := res.PeakRSS[t.Key]
		if len(kb) == 0 {
			continue
		}
		parts := make([]string, len(kb))
		for i, v := range kb {
			parts[i] = fmt.Sprintf("%.1f MB", float64(v)/1024)
		}
		p("| %s | %s |\n", t.Label, strings.Join(parts, " / "))
	}
	p("\n")
}

func renderProblems(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var lines []string
	for _, r := range res.Results {
		s := r.Spec
		name := fmt.Sprintf("%s %s %s on %s", s.Kind, s.Scenario, s.Revision, s.Target)
		if s.Variant != "" {
			name += " (" + s.Variant + ")"
		}
		switch {
		case r.Skipped:
			lines = append(lines, fmt.Sprintf("- %s: skipped, the time budget was spent.", name))
			continue
		case r.Report == nil:
			lines = append(lines, fmt.Sprintf("- %s: failed: `%s`", name, firstLine(r.Err)))
			continue
		}
		rep := r.Report
		if noOperation(r) {
			lines = append(lines, fmt.Sprintf("- %s: **no operation completed** in the measured window (%d failed); its numbers are not measurements", name, rep.Errors))
		}
		for _, k := range bench.SortedKinds(rep.ErrorKinds) {
			e := rep.ErrorKinds[k]
			lines = append(lines, fmt.Sprintf("- %s: %d × `%s`, e.g. `%s`", name, e.Count, k, oneLine(e.Example)))
		}
		for _, k := range bench.SortedKinds(rep.SetupErrors) {
			e := rep.SetupErrors[k]
			lines = append(lines, fmt.Sprintf("- %s: %d × `%s` while opening sessions or streams, e.g. `%s`", name, e.Count, k, oneLine(e.Example)))
		}
		for _, c := range []string{"stuck_at_end", "duplicate_notifications", "streams_closed_by_server"} {
			if v := rep.Counters[c]; v > 0 {
				lines = append(lines, fmt.Sprintf("- %s: %s = %d", name, c, v))
			}
		}
		for _, n := range rep.Notes {
			lines = append(lines, fmt.Sprintf("- %s: %s", name, n))
		}
	}
	p("## Errors and anomalies\n\n")
	if len(lines) == 0 {
		p("None: every run completed without errors.\n")
		return
	}
	p("Every failed operation of the suite, by run and kind (the tables above leave failed operations out of the latencies).\n\n")
	p("%s\n", strings.Join(lines, "\n"))
}

// noOperation reports a run meant to count operations (every kind but
// idle, which holds streams open) that completed none: a failure to
// flag, not a throughput of 0.
func noOperation(r *result) bool {
	return r.Report != nil && r.Report.Ops == 0 && r.Spec.Kind != "idle"
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
