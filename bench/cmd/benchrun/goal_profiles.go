package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// The goal profiles: for each scenario of the handshake-era throughput
// goals, a CPU profile of mcpcluster's node on Redis and one of mcp-go,
// taken while mcpbench drives each with the suite's settings, and the
// CPU per operation of each bucket of functions (cpu_buckets.go).

// goalProfiles is what the goal profiles found.
type goalProfiles struct {
	Revision string `json:"revision"`
	Seconds  int    `json:"seconds"`
	Command  string `json:"command"`
	// Targets are the profiled configurations, in the cells' order.
	Targets   []string       `json:"targets"`
	Scenarios []*goalProfile `json:"scenarios"`
}

// goalProfile is one scenario's profiles, one per target.
type goalProfile struct {
	Scenario string          `json:"scenario"`
	Variant  string          `json:"variant,omitempty"`
	Title    string          `json:"title"`
	Runs     []*cpuBreakdown `json:"runs"`
}

// cpuBreakdown is where one target's CPU went during one profile.
type cpuBreakdown struct {
	Target     string  `json:"target"`
	Throughput float64 `json:"ops_per_s"`
	// Seconds is how long the profile sampled, CPUSeconds the CPU it
	// holds, Ops the operations completed meanwhile: the run's
	// throughput (measured over a window that contains the profile's)
	// times Seconds.
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_s"`
	Ops        float64 `json:"ops"`
	// ProcessMicros is the server's CPU per operation over the whole
	// measured run, from /proc: what the profile's total should come
	// near.
	ProcessMicros float64      `json:"process_us_per_op,omitempty"`
	Buckets       []bucketCost `json:"buckets,omitempty"`
	Err           string       `json:"error,omitempty"`
}

// goalProfileTargets are the configurations profiled: our node on
// Redis, then the peer of the goals.
var goalProfileTargets = []string{"redis", "mcpgo"}

// goalProfileScenarios are the scenarios of the handshake-era goals
// against mcp-go; slug names their raw profiles.
var goalProfileScenarios = []struct {
	pt          part
	slug, title string
}{
	{partEcho, "echo", "echo"},
	{partBusy, busyScenario, "echo, one busy session"},
	{partProgress, "progress", "progress"},
	{partSampling, "sampling", "sampling"},
	{partChurn, "churn", "churn"},
}

const goalProfilesCommand = "cd bench && go run ./cmd/benchrun --only redis,mcpgo --scenarios profile --out /tmp/b/BENCHMARKS.md --plots /tmp/b --goal-profiles-dir /tmp/b"

// runGoalProfiles profiles every goal scenario on each of the
// configurations that runs, scenario by scenario, keeping the raw
// profiles in dir; nil when none of them runs.
func (s *suiteRunner) runGoalProfiles(ctx context.Context, dir string) *goalProfiles {
	gp := &goalProfiles{Revision: legacy, Seconds: profileSeconds, Command: goalProfilesCommand}
	for _, key := range goalProfileTargets {
		if s.targets[key] != nil {
			gp.Targets = append(gp.Targets, key)
		}
	}
	if len(gp.Targets) == 0 {
		return nil
	}
	for _, g := range goalProfileScenarios {
		sc := &goalProfile{Scenario: g.pt.sc, Variant: g.pt.variant, Title: g.title}
		gp.Scenarios = append(gp.Scenarios, sc)
		for _, key := range gp.Targets {
			if ctx.Err() != nil {
				return gp
			}
			var args []string
			if g.pt.variant == busyVariant {
				args = busyArgs()
			}
			sp := spec{ID: fmt.Sprintf("profile-%s-%s-%s", g.slug, legacy, key), Kind: "profile", Scenario: g.pt.sc, Revision: legacy,
				Target: key, Variant: g.pt.variant, Args: args}
			cb := s.profileCPU(ctx, sp, filepath.Join(dir, fmt.Sprintf("profile-cpu-%s-%s.pb.gz", g.slug, key)))
			sc.Runs = append(sc.Runs, cb)
			if cb.Err != "" {
				s.logf("goal profile %s on %s: %s", g.title, key, cb.Err)
			} else {
				s.logf("goal profile %s on %s: %.0f ops/s, %.0f µs/op in the profile (%.0f from /proc)", g.title, key, cb.Throughput, cb.total(), cb.ProcessMicros)
			}
		}
	}
	return gp
}

// profileCPU takes a CPU profile of sp's target while mcpbench runs sp,
// saves it to path and sorts its CPU into the buckets.
func (s *suiteRunner) profileCPU(ctx context.Context, sp spec, path string) *cpuBreakdown {
	cb := &cpuBreakdown{Target: sp.Target}
	rr, err := s.profiledRun(ctx, sp, []profileTake{{"profile", path}})
	if err != nil {
		cb.Err = err.Error()
		return cb
	}
	r := row{t: s.targets[sp.Target], res: rr, rep: rr.Report}
	if !r.ok() {
		cb.Err = "no usable run: " + firstLine(rr.Err)
		return cb
	}
	cb.Throughput = rr.Report.Throughput
	cb.ProcessMicros, _, _ = serverMicros(rr.Report)
	fp, err := pprofFlat(path)
	if err != nil {
		cb.Err = err.Error()
		return cb
	}
	cb.Seconds = fp.duration
	if cb.Seconds == 0 {
		cb.Seconds = profileSeconds
	}
	ops := cb.Throughput * cb.Seconds
	for _, f := range fp.funcs {
		cb.CPUSeconds += f.seconds
	}
	cb.Buckets = classify(fp, r.t.Ours, ops)
	cb.Ops, cb.CPUSeconds = math.Round(ops), round(cb.CPUSeconds, 3)
	return cb
}

// total is the CPU per operation of the whole profile.
func (cb *cpuBreakdown) total() float64 {
	var sum float64
	for _, b := range cb.Buckets {
		sum += b.Micros
	}
	return sum
}

// measured reports whether the goal profiles measured a scenario (of a
// variant) on some target.
func (gp *goalProfiles) measured(scenario, variant string) bool {
	if gp == nil {
		return false
	}
	for _, sc := range gp.Scenarios {
		if sc.Scenario != scenario || sc.Variant != variant {
			continue
		}
		for _, r := range sc.Runs {
			if r.Err == "" {
				return true
			}
		}
	}
	return false
}

// cpuAnchor is the anchor of the goal profiles' section.
const cpuAnchor = "#where-the-cpu-goes-per-goal"

// goalLink ends the reason of a handshake-era goal against mcp-go: where
// the CPU goes when the goal profiles measured its scenario (beside the
// slowest scenario's profiles when they are of it), else profileLink.
func goalLink(res *suiteResult, pt part) string {
	if !res.GoalProfiles.measured(pt.sc, pt.variant) {
		return profileLink(res, pt.sc, legacy)
	}
	link := "; see [where the CPU goes](" + cpuAnchor + ")"
	if p := res.Profile; p != nil && p.Err == "" && p.Scenario == pt.sc && pt.variant == "" && p.Revision == legacy {
		link += " and [the profiles](#profiles-of-the-slowest-redis-scenario)"
	}
	return link
}

// micros formats CPU per operation.
func micros(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func renderGoalProfiles(b *strings.Builder, res *suiteResult) {
	gp := res.GoalProfiles
	if gp == nil || len(gp.Scenarios) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	labels := make([]string, len(gp.Targets))
	ours := map[string]bool{}
	for i, k := range gp.Targets {
		labels[i] = k
		if t := targetByKey(res, k); t != nil {
			labels[i], ours[k] = t.Label, t.Ours
		}
	}
	p("## Where the CPU goes, per goal\n\n")
	p("For each scenario of the %s throughput goals against mcp-go (see [Goals on Redis](#goals-on-redis)), a CPU profile of %s, each taken for %d s while mcpbench drove it with the suite's settings, one configuration right after the other. ",
		gp.Revision, strings.Join(labels, " and of "), gp.Seconds)
	p("Every function's own time (`go tool pprof -top -flat`: own times add up to the profile's total) goes to one bucket by its name; each bucket is divided by the operations completed during the profile (the run's throughput, measured over a window that contains the profile's, times the profile's duration). ")
	p("Cells are **µs of CPU per operation, %s**, of the server's process alone (Redis's own CPU is in the scenarios' *server µs/op*). The *whole process* row is the process's CPU per operation from `/proc` over the whole measured run, for comparison: the profile's total comes out somewhat below it. Profiling costs a few percent of throughput on both sides. Reproduce with `%s`.\n\n", strings.Join(labels, " / "), gp.Command)
	p("| µs per operation |")
	for _, sc := range gp.Scenarios {
		p(" %s |", sc.Title)
	}
	p("\n|---|")
	for range gp.Scenarios {
		p("---:|")
	}
	p("\n")
	// cells writes a row: each scenario's cell holds value of each
	// target's profile, formatted by format, or a dash.
	cells := func(name string, format func(float64) string, value func(*cpuBreakdown) (float64, bool)) {
		p("| %s |", name)
		for _, sc := range gp.Scenarios {
			var vs []string
			for _, k := range gp.Targets {
				v, ok := 0.0, false
				if r := sc.run(k); r != nil && r.Err == "" {
					v, ok = value(r)
				}
				if ok {
					vs = append(vs, format(v))
				} else {
					vs = append(vs, "—")
				}
			}
			p(" %s |", strings.Join(vs, " / "))
		}
		p("\n")
	}
	for _, bk := range cpuBuckets {
		// A server's own code is not applicable to the other's, and has
		// no row when that server was not profiled.
		if (bk.key == "ours" || bk.key == "peer") && !profiled(gp.Targets, ours, bk.key == "ours") {
			continue
		}
		cells(bk.name, micros, func(r *cpuBreakdown) (float64, bool) {
			if bk.key == "ours" && !ours[r.Target] || bk.key == "peer" && ours[r.Target] {
				return 0, false
			}
			return r.bucket(bk.key), true
		})
	}
	cells("**total (profile)**", micros, func(r *cpuBreakdown) (float64, bool) { return r.total(), true })
	cells("whole process, whole run (`/proc`)", micros, func(r *cpuBreakdown) (float64, bool) { return r.ProcessMicros, r.ProcessMicros > 0 })
	cells("ops/s during the profile", rate, func(r *cpuBreakdown) (float64, bool) { return r.Throughput, true })
	p("\n")
	p("The buckets, by function name (the first that matches):\n\n")
	for _, bk := range cpuBuckets {
		p("- *%s*: %s.\n", bk.name, bk.what)
	}
	p("\n")
	var failed []string
	for _, sc := range gp.Scenarios {
		for _, r := range sc.Runs {
			if r.Err != "" {
				failed = append(failed, fmt.Sprintf("- %s on %s: `%s`", sc.Title, r.Target, oneLine(r.Err)))
			}
		}
	}
	if len(failed) > 0 {
		p("Profiles that failed:\n\n%s\n\n", strings.Join(failed, "\n"))
	}
}

// run is a scenario's profile of target key.
func (sc *goalProfile) run(key string) *cpuBreakdown {
	for _, r := range sc.Runs {
		if r.Target == key {
			return r
		}
	}
	return nil
}

// profiled reports whether keys include one of mcpcluster's
// configurations (wantOurs) or a peer.
func profiled(keys []string, ours map[string]bool, wantOurs bool) bool {
	for _, k := range keys {
		if ours[k] == wantOurs {
			return true
		}
	}
	return false
}

// bucket is the CPU per operation of a bucket.
func (cb *cpuBreakdown) bucket(key string) float64 {
	for _, c := range cb.Buckets {
		if c.Bucket == key {
			return c.Micros
		}
	}
	return 0
}
