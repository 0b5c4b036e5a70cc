package main

import (
	"math"
	"strings"
	"testing"
)

// Every function of a profile lands in one bucket by its name; a
// server's main is its own code.
func TestBucketOf(t *testing.T) {
	for _, c := range []struct {
		fn   string
		ours bool
		want string
	}{
		{"github.com/mcpcluster/mcpcluster/internal/cluster/redis.(*events).AppendBatch", true, "ours"},
		{"github.com/mcpcluster/mcpcluster/mcp.(*postOut).emit", true, "ours"},
		{"main.main", true, "ours"},
		{"main.newServer.func1", false, "peer"},
		{"github.com/mcpcluster/mcpcluster/bench/peers/serve.Run", false, "peer"},
		{"github.com/mark3labs/mcp-go/server.(*StreamableHTTPServer).handlePost", false, "peer"},
		{"github.com/modelcontextprotocol/go-sdk/mcp.(*ServerSession).handle", false, "peer"},
		{"github.com/redis/go-redis/v9.(*baseClient)._getConn", true, "redis"},
		{"github.com/redis/go-redis/v9/internal/proto.(*Writer).WriteArg", true, "redis"},
		{"github.com/redis/go-redis/extra/redisotel/v9.(*tracingHook).ProcessHook.func1", true, "telemetry"},
		{"encoding/json.(*decodeState).object", false, "json"},
		{"github.com/segmentio/encoding/json.Parse", false, "json"},
		{"net/http.(*conn).serve", true, "http"},
		{"net/textproto.(*Reader).ReadMIMEHeader", true, "http"},
		{"net.(*conn).Read", true, "http"},
		{"internal/poll.(*FD).Write", true, "http"},
		{"bufio.(*Reader).fill", true, "http"},
		{"github.com/go-chi/chi/v5.(*Mux).ServeHTTP", true, "http"},
		{"internal/runtime/syscall/linux.Syscall6", true, "syscall"},
		{"syscall.Syscall", true, "syscall"},
		{"runtime.futex", true, "syscall"},
		{"runtime.usleep (inline)", true, "syscall"},
		{"runtime.mallocgcSmallNoscan", true, "gc"},
		{"runtime.(*mspan).writeHeapBitsSmall", true, "gc"},
		{"runtime.scanobject", true, "gc"},
		{"runtime.gcDrain", true, "gc"},
		{"runtime.memclrNoHeapPointers", true, "gc"},
		{"internal/runtime/gc/scan.scanSpanPackedAVX512", false, "gc"},
		{"runtime.nextFreeFast (inline)", true, "gc"},
		{"runtime.schedule", true, "runtime"},
		{"runtime.gcount", true, "runtime"},
		{"runtime.memmove", true, "runtime"},
		{"internal/runtime/maps.(*Map).getWithoutKeySmallFastStr", true, "runtime"},
		{"sync.(*Mutex).Lock", true, "runtime"},
		{"aeshashbody", true, "runtime"},
		{"go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).End", true, "telemetry"},
		{"github.com/rs/zerolog.(*Event).Msg", true, "telemetry"},
		{"github.com/prometheus/client_golang/prometheus.(*histogram).Observe", true, "telemetry"},
		{"reflect.Value.String", true, "other"},
		{"strconv.AppendInt", false, "other"},
		{"runtime/pprof.(*profileBuilder).addCPUData", false, "other"},
	} {
		if got := bucketOf(c.fn, c.ours); got != c.want {
			t.Errorf("bucketOf(%q, ours=%v) = %s, want %s", c.fn, c.ours, got, c.want)
		}
	}
}

// pprof's flat listing is read whole, and its own times, bucketed, add
// up to the profile's total.
func TestClassifyPprofTop(t *testing.T) {
	out := `File: server
Type: cpu
Duration: 8.01s, Total samples = 1.50s (18.73%)
Showing nodes accounting for 1.50s, 100% of 1.50s total
      flat  flat%   sum%        cum   cum%
     0.60s 40.00% 40.00%      0.60s 40.00%  internal/runtime/syscall/linux.Syscall6
     0.30s 20.00% 60.00%      0.30s 20.00%  runtime.futex
     200ms 13.33% 73.33%      0.90s 60.00%  github.com/mcpcluster/mcpcluster/mcp.(*postOut).emit
     0.20s 13.33% 86.67%      0.20s 13.33%  github.com/redis/go-redis/v9.(*baseClient)._getConn
     0.10s  6.67% 93.33%      0.10s  6.67%  runtime.mallocgc
     0.10s  6.67%   100%      0.10s  6.67%  encoding/json.Marshal (inline)
         0     0%   100%      0.10s  6.67%  net/http.(*conn).serve
`
	fp, err := parsePprofFlat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fp.duration != 8.01 || fp.samples != 1.5 || len(fp.funcs) != 6 {
		t.Fatalf("parsed %+v", fp)
	}
	// 1000 operations: 1 ms of CPU is 1 µs per operation.
	got := map[string]bucketCost{}
	var sum float64
	for _, b := range classify(fp, true, 1000) {
		got[b.Bucket] = b
		sum += b.Seconds
	}
	if len(got) != len(cpuBuckets) {
		t.Errorf("%d buckets, want every one of %d", len(got), len(cpuBuckets))
	}
	for key, want := range map[string]float64{"syscall": 900, "ours": 200, "redis": 200, "gc": 100, "json": 100, "http": 0, "peer": 0} {
		if math.Abs(got[key].Micros-want) > 1e-6 {
			t.Errorf("%s: %.3f µs/op, want %.0f", key, got[key].Micros, want)
		}
	}
	if math.Abs(sum-fp.samples) > 1e-9 {
		t.Errorf("buckets add up to %.3fs, want the profile's %.3fs", sum, fp.samples)
	}
	if top := got["syscall"].Top; len(top) != 2 || top[0] != "internal/runtime/syscall/linux.Syscall6 0.60s" {
		t.Errorf("system calls' top functions %q", top)
	}
	for _, bad := range []string{"no table here", "      flat  flat%   sum%        cum   cum%\n 1.5parsecs 1% 1% 1s 1% f"} {
		if _, err := parsePprofFlat(bad); err == nil {
			t.Errorf("parsePprofFlat(%q) did not fail", bad)
		}
	}
}

// breakdown is a profile of key whose buckets cost the given µs per
// operation.
func breakdown(key string, byBucket map[string]float64, process float64) *cpuBreakdown {
	cb := &cpuBreakdown{Target: key, Throughput: 1000, Seconds: 8, Ops: 8000, ProcessMicros: process}
	for _, b := range cpuBuckets {
		cb.Buckets = append(cb.Buckets, bucketCost{Bucket: b.key, Micros: byBucket[b.key], Seconds: byBucket[b.key] * 8000 / 1e6})
	}
	return cb
}

// The section puts our node and mcp-go side by side in each goal's
// scenario, and the goals' reasons link to it.
func TestRenderGoalProfiles(t *testing.T) {
	res := goalSuite()
	res.GoalProfiles = &goalProfiles{Revision: legacy, Seconds: 8, Command: goalProfilesCommand, Targets: []string{"redis", "mcpgo"},
		Scenarios: []*goalProfile{
			{Scenario: "echo", Title: "echo", Runs: []*cpuBreakdown{
				breakdown("redis", map[string]float64{"ours": 40, "redis": 30, "syscall": 60, "gc": 12.5}, 150),
				breakdown("mcpgo", map[string]float64{"peer": 20, "syscall": 50, "gc": 7.25}, 80),
			}},
			{Scenario: "echo", Variant: busyVariant, Title: "echo, one busy session", Runs: []*cpuBreakdown{
				breakdown("redis", map[string]float64{"ours": 45, "json": 10}, 60),
				{Target: "mcpgo", Err: "no usable run: mcpbench: exit status 1"},
			}},
			{Scenario: "sampling", Title: "sampling", Runs: []*cpuBreakdown{
				breakdown("redis", map[string]float64{"ours": 100, "redis": 200}, 310),
				breakdown("mcpgo", map[string]float64{"peer": 30, "http": 25}, 60),
			}},
		}}
	var b strings.Builder
	renderGoalProfiles(&b, res)
	page := b.String()
	for _, want := range []string{
		"## Where the CPU goes, per goal\n",
		"| µs per operation | echo | echo, one busy session | sampling |",
		"| mcpcluster's code | 40 / — | 45 / — | 100 / — |",
		"| the peer's library | — / 20 | — / — | — / 30 |",
		"| Redis client | 30 / 0 | 0 / — | 200 / 0 |",
		"| system calls | 60 / 50 | 0 / — | 0 / 0 |",
		"| memory and GC | 12 / 7.2 | 0 / — |",
		"| **total (profile)** | 142 / 77 | 55 / — | 300 / 55 |",
		"| whole process, whole run (`/proc`) | 150 / 80 | 60 / — | 310 / 60 |",
		"µs of CPU per operation, mcpcluster, 1 node, Redis / mcp-go**",
		"`" + goalProfilesCommand + "`",
		"- echo, one busy session on mcpgo: `no usable run: mcpbench: exit status 1`",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("section lacks %q:\n%s", want, page)
		}
	}
	// Sampling and the busy session are short of their goals in
	// goalSuite: their reasons point at the section.
	for _, g := range computeGoals(res) {
		switch g.name {
		case "sampling round trip, 1 node on Redis", "echo, one busy session (32 calls in flight), 1 node on Redis":
			if !strings.HasSuffix(g.reason, "; see [where the CPU goes](#where-the-cpu-goes-per-goal)") {
				t.Errorf("%s: reason %q does not end with the link to where the CPU goes", g.name, g.reason)
			}
		case "session churn, 1 node on Redis":
			if strings.Contains(g.reason, cpuAnchor) {
				t.Errorf("%s: reason %q links to profiles that were not taken", g.name, g.reason)
			}
		}
	}
	// No goal profiles, no section.
	res.GoalProfiles = nil
	b.Reset()
	renderGoalProfiles(&b, res)
	if b.Len() != 0 {
		t.Errorf("section without goal profiles:\n%s", b.String())
	}
}
