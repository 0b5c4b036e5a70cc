package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// Sections about Redis beyond loopback: Redis 0.5 ms away, the fan-out
// at scale and the capacity model.

func renderFar(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var far []*target
	for _, t := range res.Targets {
		if t.Far {
			far = append(far, t)
		}
	}
	if len(far) == 0 {
		return
	}
	p("## Redis at a production distance (+0.5 ms each way)\n\n")
	p("Loopback Redis answers in tens of microseconds; production Redis is 0.2 to 1 ms away. The *+0.5 ms* configurations reach their own Redis through [toxiproxy](https://github.com/Shopify/toxiproxy) (run inside benchrun, with a latency toxic at microsecond resolution) that delays every chunk by %s in each direction. Measured PING round trip at start, direct → through the proxy: ", farLatency)
	var pings []string
	for _, t := range far {
		pings = append(pings, fmt.Sprintf("%s %s → %s", t.Label, ms(t.PingDirect), ms(t.PingFar)))
	}
	p("%s (the proxy's own hops add a little to the 1 ms). Every Redis scenario ran there right after its loopback runs; *round trips/op* are the loopback MONITOR counts of the same code path (see [Redis cost per operation](#redis-cost-per-operation)). Throughput is what 16 closed-loop sessions reach, so it falls with every round trip an operation waits for.\n\n", strings.Join(pings, "; "))
	p("| Operation | Revision | round trips/op | 1 node ops/s: loopback → +0.5 ms | 1 node p50 | 3 nodes ops/s: loopback → +0.5 ms | 3 nodes p50 |\n|---|---|---:|---|---|---|---|\n")
	cell := func(sc, rev, near, farKey string) (string, string) {
		a, ok1 := mainRow(res, sc, rev, near, "")
		f, ok2 := mainRow(res, sc, rev, farKey, "")
		if !ok1 || !ok2 {
			return "—", "—"
		}
		return fmt.Sprintf("%s → %s (%s)", rate(a.rep.Throughput), rate(f.rep.Throughput), ratio(f.rep.Throughput/a.rep.Throughput)),
			fmt.Sprintf("%s → %s", ms(a.rep.Latency.P50), ms(f.rep.Latency.P50))
	}
	for _, sc := range mainScenarios {
		for _, rev := range []string{legacy, modern} {
			t1, l1 := cell(sc.name, rev, "redis", "redis-far")
			t3, l3 := cell(sc.name, rev, "redis3", "redis3-far")
			if t1 == "—" && t3 == "—" {
				continue
			}
			rt := "—"
			if rep := rttRow(res, sc.name, rev, "redis", ""); rep != nil && rep.Ops > 0 {
				rt = fmt.Sprintf("%.2f", rep.Redis.RoundTripsPerOp)
			}
			name := sc.name
			if sc.latencyFirst {
				name += " (p50: " + sc.latencyName + ")"
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", name, rev, rt, t1, l1, t3, l3)
		}
	}
	// The cross-node reply.
	reply := func(key string) string {
		cn, ok := crossNodeReply(res, key)
		if !ok {
			return "—"
		}
		out := fmt.Sprintf("another node %s, same node %s", ms(cn.cross.P50), ms(cn.same.P50))
		if cn.paired {
			out += fmt.Sprintf(" (alternating; paired difference %+.2f ms)", cn.diff.P50)
		}
		return out
	}
	p("\nCross-node sampling reply (3 nodes, %s, reply→result p50): %s on loopback; %s at +0.5 ms.\n\n",
		legacy, reply("redis3"), reply("redis3-far"))
}

func renderScale(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var runs []*result
	for _, r := range res.Results {
		if r.Spec.Kind == "scale" || r.Spec.Variant == "scale" {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	n := res.Settings.ScaleStreams
	p("## Fan-out at scale\n\n")
	p("%d sessions spread round robin over three nodes sharing one Redis (a configuration of its own, started with `--max-sessions 30000 --caller-max-sessions 15000 --caller-max-streams 15000` since 10,000 sessions and the control session exceed the default deployment cap, and all come from one address: one caller, which may hold at most half of the cap), each holding its GET stream open (`subscriptions/listen` streams on %s). Each operation calls `toggle_extra_tool` once and lasts until every stream has received `notifications/tools/list_changed`; a few operations, one at a time, with an operation timeout of %s. Round trips are counted in a second run with MONITOR. The goal is every stream served within 1 s.\n\n", n, modern, 3*res.Settings.Timeout)
	p("| Revision | toggles | all delivered p50 | worst | per stream p50 / p99 | streams opened | errors | server µs/op | Redis round trips/toggle | Redis commands/toggle |\n|---|---:|---:|---:|---|---:|---|---:|---:|---:|\n")
	for _, rev := range []string{legacy, modern} {
		var lat, rtt *bench.Report
		for _, r := range runs {
			if r.Spec.Revision != rev || r.Report == nil {
				continue
			}
			if r.Spec.Kind == "scale" {
				lat = r.Report
			} else {
				rtt = r.Report
			}
		}
		if lat == nil {
			p("| %s | failed |||||||||\n", rev)
			continue
		}
		ps := lat.Extra["per_stream"]
		cpu := "—"
		if nodes, redis, ok := serverMicros(lat); ok && lat.Ops > 0 {
			cpu = fmt.Sprintf("%.0f (+%.0f Redis)", nodes, redis)
		}
		rt, cmds := "—", "—"
		if rtt != nil && rtt.Redis != nil && rtt.Ops > 0 {
			rt = fmt.Sprintf("%.0f", rtt.Redis.RoundTripsPerOp)
		}
		if lat.Redis != nil && lat.Ops > 0 {
			cmds = fmt.Sprintf("%.0f", lat.Redis.CommandsPerOp)
		}
		p("| %s | %d | %s | %s | %s / %s | %d | %s | %s | %s | %s |\n", rev, lat.Ops, ms(lat.Latency.P50), ms(lat.Latency.Max), ms(ps.P50), ms(ps.P99), lat.Counters["streams_opened"], errorsCell(lat), cpu, rt, cmds)
	}
	p("\n")
}

func renderCapacity(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := res.Capacity
	if c == nil {
		return
	}
	p("## Capacity model\n\n")
	if c.Err != "" {
		p("redis-benchmark failed: `%s`.\n\n", oneLine(c.Err))
		return
	}
	p("Measured %s on this machine: `%s` against a throwaway `redis-server` %s of the suite's own (one Redis primary, single-threaded, sharing the 2 cores with redis-benchmark). The script is `%s`; PUBLISH reaches one subscriber.\n\n", res.Started.Format("2006-01-02"), c.Command, res.Machine.Redis, capacityScript)
	p("| command | per second | p50 |\n|---|---:|---:|\n")
	for _, r := range c.Rates {
		p("| %s | %.0f | %s |\n", r.Name, r.PerSec, ms(r.Latency))
	}
	evalsha, publish, simple := c.rate("EVALSHA"), c.rate("PUBLISH"), c.rate("PEXPIRE")
	p("\nOne primary's time per operation is modelled two ways: **(A)** the operation's loopback round trips, each at the redis-benchmark rate of its kind (EVALSHA/EVAL at the script rate, PUBLISH at the PUBLISH rate, anything else at the PEXPIRE rate); the backend's scripts run more commands inside than the 2-command script, so (A) is optimistic; **(B)** the Redis CPU per operation measured in the 1-node run (`/proc`), which includes everything Redis did. Ops/s per primary is one second divided by that time, at 100%% of one core: plan for half. *Node cores per primary* is how many cores of nodes, each doing one second ÷ its node CPU per operation, one primary keeps busy at that rate: the number of nodes one primary supports, on nodes of one core each.\n\n")
	p("| Operation | Revision | round trips/op | Redis µs/op (A) | ops/s per primary (A) | Redis CPU µs/op (B) | ops/s per primary (B) | node CPU µs/op | node cores per primary (B) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, o := range []struct{ sc, rev, name string }{
		{"echo", legacy, "echo"}, {"progress", legacy, "progress, 10 events"}, {"sampling", legacy, "sampling"},
		{"churn", legacy, "session (init, call, DELETE)"}, {"resume", legacy, "resume"}, {"echo", modern, "stateless echo"},
		{"tasks", legacy, "task (create, poll, result)"}, {"tasks", modern, "stateless task (create, poll)"},
	} {
		rep := rttRow(res, o.sc, o.rev, "redis", "")
		r, ok := mainRow(res, o.sc, o.rev, "redis", "")
		if rep == nil || rep.Ops == 0 || !ok {
			continue
		}
		var micros float64
		for cmd, n := range rep.Redis.RoundTrips {
			switch strings.ToUpper(cmd) {
			case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL":
				micros += n * 1e6 / evalsha
			case "PUBLISH", "SPUBLISH":
				micros += n * 1e6 / publish
			default:
				micros += n * 1e6 / simple
			}
		}
		nodeUs, redisUs, _ := serverMicros(r.rep)
		a, bb := "—", "—"
		if rep.Redis.RoundTripsPerOp < 0.05 {
			a = "not bound by Redis"
		} else if micros > 0 {
			a = fmt.Sprintf("%.0f", 1e6/micros)
		}
		cores := "—"
		if redisUs >= 1 {
			bb = fmt.Sprintf("%.0f", 1e6/redisUs)
			if nodeUs > 0 {
				cores = fmt.Sprintf("%.1f", nodeUs/redisUs)
			}
		}
		p("| %s | %s | %.2f | %.1f | %s | %.1f | %s | %.0f | %s |\n", o.name, o.rev, rep.Redis.RoundTripsPerOp, micros, a, redisUs, bb, nodeUs, cores)
	}
	// Idle streams.
	var idleCmds float64
	for _, r := range res.Results {
		if r.Spec.Kind == "idle" && r.Spec.Target == "redis" && r.Report != nil && r.Report.Redis != nil {
			idleCmds = r.Report.Redis.CommandsPerOp
		}
	}
	if idleCmds > 0 {
		streams := simple / idleCmds
		p("\n**Open streams.** An idle stream costs %.2f Redis commands per second (simple commands: PEXPIRE, PTTL, GET), so one primary doing nothing but keeping streams alive at the PEXPIRE rate (%.0f/s) carries about **%s open streams** (%s at half load: %.1f nodes of 10,000 streams each). At the goal of 0.05 commands per stream per second the same primary would carry %s at half load.\n",
			idleCmds, simple, human(streams), human(streams/2), streams/2/10000, human(simple/0.05/2))
	}
	renderRedisCluster(b, res)
}

// human rounds a large number for prose.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1f million", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0f,000", math.Round(v/1e3))
	}
	return fmt.Sprintf("%.0f", v)
}

func renderRedisCluster(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pub := func(sc, rev string) float64 {
		if rep := rttRow(res, sc, rev, "redis3", ""); rep != nil && rep.Ops > 0 {
			return rep.Redis.RoundTrips["publish"] + rep.Redis.RoundTrips["PUBLISH"]
		}
		return math.NaN()
	}
	p("\n**What Redis Cluster changes.** A cluster spreads keys over 16,384 hash slots on several primaries, so the model above holds per primary and the operations that touch one session scale with the number of primaries, under these conditions:\n\n")
	p("- *One hash slot per session.* Every key of a session carries the session id as a hash tag (`P:{S}:…`, `internal/cluster/redis`), so a script that touches one session's keys runs on one primary. The deployment-wide keys (`P:sessions`, `P:nodes`, `P:registry`, subscriptions by URI, stream owners `P:x:…`) have no session tag: a script that touches them and a session's keys at once cannot run on a cluster, and those keys each live on one primary, which all nodes share.\n")
	pubs := ""
	if a, c := pub("sampling", legacy), pub("churn", legacy); !math.IsNaN(a) && !math.IsNaN(c) {
		pubs = fmt.Sprintf(" (%.2f PUBLISH per sampling call and %.2f per session life on 3 nodes in this run)", a, c)
	}
	p("- *Pub/sub.* On a cluster, `PUBLISH` is broadcast to every shard, so each primary carries every bus message: the pub/sub load does not shrink as primaries are added%s. Sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis 7) delivers a message only within the shard that owns the channel's slot; with one channel per node (the reply channel) that bounds each primary's pub/sub traffic to the nodes whose channels hash to it. The broadcast topic every node listens on stays one channel, on one shard.\n", pubs)
	p("- *Known gap.* The stream-owner key is refreshed by Append only on a single server, not on Redis Cluster (issue 16); this suite runs a single primary and does not measure a cluster.\n\n")
}
