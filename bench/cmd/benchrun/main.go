// Command benchrun runs mcpcluster's benchmark suite on this machine in
// one go and writes docs/BENCHMARKS.md with its plots. It builds the
// reference node, mcpbench and the peer servers; starts every
// configuration on loopback — mcpcluster on one node with the memory
// backend, on one node with Redis, on three nodes sharing one Redis
// (each Redis a throwaway redis-server of its own), the official Go SDK,
// mcp-go, and a bare net/http handler as the ceiling — and drives each
// scenario against each configuration back to back with the same
// settings, so that the numbers compared were measured side by side
// under the same conditions. Besides throughput and latency it records
// the servers' CPU per operation, Redis commands and round trips per
// operation, memory per idle stream, Redis connections per node and
// peak RSS.
//
// Run it with `make bench` from the repository root, or from bench/:
//
//	go run ./cmd/benchrun [flags]
//
// The whole suite is bounded by --budget: runs that would start after it
// are skipped and marked so in the report.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpcluster/mcpcluster/bench/appendcost"
)

// suiteResult is everything a suite run measured; it is kept as JSON
// next to the plots so the page can be rendered again (--render).
type suiteResult struct {
	Command  string             `json:"command"`
	Started  time.Time          `json:"started"`
	Seconds  float64            `json:"seconds"`
	Machine  machine            `json:"machine"`
	Settings settings           `json:"settings"`
	Targets  []*target          `json:"targets"`
	PeakRSS  map[string][]int64 `json:"peak_rss_kb"`
	Results  []*result          `json:"results"`
	Profile  *profileResult     `json:"profile,omitempty"`
	// GoalProfiles is where the CPU goes in each handshake-era goal's
	// scenario, on our node and on mcp-go.
	GoalProfiles *goalProfiles   `json:"goal_profiles,omitempty"`
	Capacity     *capacityResult `json:"capacity,omitempty"`
	// AppendCost is the append script and its variants replayed against
	// a Redis of its own (bench/appendcost).
	AppendCost *appendcost.Result `json:"append_cost,omitempty"`
	// PacedFrom, when set, says where the paced progress runs and
	// AppendCost come from when they were measured apart from the rest
	// (a later run of their own, added to this one's results): its
	// command line and time.
	PacedFrom string `json:"paced_from,omitempty"`
}

func numCPU() int { return runtime.NumCPU() }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx))
}

func run(ctx context.Context) int {
	var (
		root     = flag.String("root", "", "repository root (default: the parent of the bench module)")
		outPage  = flag.String("out", "docs/BENCHMARKS.md", "page to write, relative to the root")
		outPlots = flag.String("plots", "docs/bench", "directory of the plots and results.json, relative to the root")
		st       settings
		budget   = flag.Duration("budget", 19*time.Minute, "time limit of the whole suite; runs that would start later are skipped")
		only     = flag.String("only", "", "comma-separated configurations to run (mem, redis, redis3, redis-far, redis3-far, redis-wait, redis-linger, redis3-scale, gosdk, mcpgo, ceiling); default all")
		scen     = flag.String("scenarios", "", "comma-separated scenarios or kinds of run to keep (echo, progress, sampling, churn, fanout, resume, tasks, idle, rtt, scale, profile, capacity, appendcost, paced-progress, "+busyScenario+"); default all. echo includes the echo runs on one busy session ("+strconv.Itoa(busyCalls)+" calls in flight on one Mcp-Session-Id); "+busyScenario+" keeps only those (and their rtt runs)")
		render   = flag.String("render", "", "render the page from a results.json of an earlier run instead of running")
		command  = flag.String("command", "", "the command line to show in the page (default: this one)")
		profile  = flag.String("profile", "", "SCENARIO/REVISION to profile on one node with Redis (default: the Redis scenario furthest from its goal in this run; none: no profiling at all, neither this profile nor the goal profiles)")
		goalDir  = flag.String("goal-profiles-dir", "", "directory to keep the raw CPU profiles of the goal profiles in (profile-cpu-SCENARIO-TARGET.pb.gz); default: the run's temporary directory, removed at the end")
	)
	flag.DurationVar(&st.Duration, "d", 3*time.Second, "measured duration of each run")
	flag.DurationVar(&st.Warmup, "warmup", time.Second, "warm-up of each run")
	flag.IntVar(&st.Concurrency, "c", 16, "concurrent sessions of each run")
	flag.IntVar(&st.FanoutStreams, "fanout-streams", 1000, "open streams in the fanout scenario")
	flag.IntVar(&st.IdleStreams, "idle-streams", 1000, "open idle streams when measuring memory and Redis connections per stream")
	flag.IntVar(&st.ScaleStreams, "scale-streams", 10000, "open streams (sessions) of the fan-out at scale, over three nodes")
	flag.DurationVar(&st.Timeout, "timeout", 10*time.Second, "time limit of one operation")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: benchrun [flags]\n\nRuns the benchmark suite against mcpcluster, the official Go SDK, mcp-go and a\nnet/http ceiling on this machine, and writes docs/BENCHMARKS.md with plots.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "benchrun: "+format+"\n", args...)
	}
	r, err := findRoot(*root)
	if err != nil {
		logf("%v", err)
		return 2
	}
	page, plots := underRoot(r, *outPage), underRoot(r, *outPlots)

	// The peers' versions are read before a render too: the page names
	// them.
	readPeerVersions(r)
	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			logf("%v", err)
			return 1
		}
		var res suiteResult
		if err := json.Unmarshal(b, &res); err != nil {
			logf("%s: %v", *render, err)
			return 1
		}
		if res.Profile != nil && res.Profile.Err == "" && len(res.Profile.CPUFlat) == 0 {
			res.Profile.summarize(plots)
		}
		return writeOutputs(&res, page, plots, r, logf)
	}

	start := time.Now()
	cmdline := *command
	if cmdline == "" {
		cmdline = "cd bench && go run ./cmd/benchrun " + strings.Join(os.Args[1:], " ")
	}
	res := &suiteResult{Command: strings.TrimSpace(cmdline), Started: start.UTC(), Settings: st, PeakRSS: map[string][]int64{}}
	res.Machine = describeMachine()
	dir, err := os.MkdirTemp("", "benchrun-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer os.RemoveAll(dir)

	bins, err := build(r, dir, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	var want map[string]bool
	if *only != "" {
		want = map[string]bool{}
		for _, k := range strings.Split(*only, ",") {
			want[strings.TrimSpace(k)] = true
		}
	}
	targets, err := startTargets(bins, dir, want, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()
	res.Targets = targets
	byKey := map[string]*target{}
	for _, t := range targets {
		byKey[t.Key] = t
	}
	specs := plan(targets, st)
	var keep map[string]bool
	if *scen != "" {
		keep = map[string]bool{}
		for _, s := range strings.Split(*scen, ",") {
			keep[strings.TrimSpace(s)] = true
		}
		var filtered []spec
		for _, sp := range specs {
			if kept(sp, keep) {
				filtered = append(filtered, sp)
			}
		}
		specs = filtered
	}
	phase := func(name string) bool { return keep == nil || keep[name] }
	sr := &suiteRunner{bins: bins, dir: dir, targets: byKey, st: st, logf: logf,
		deadline: start.Add(*budget - 25*time.Second)}
	for i, sp := range specs {
		if ctx.Err() != nil {
			break
		}
		rr := sr.run(ctx, sp)
		res.Results = append(res.Results, rr)
		logf("[%d/%d] %s", i+1, len(specs), summarize(rr))
	}
	for _, t := range targets {
		res.PeakRSS[t.Key] = peakRSS(t)
	}
	// The profile phase: the slowest Redis scenario's CPU and
	// allocations, then where the CPU goes in each goal's scenario.
	if phase("profile") && *profile != "none" && ctx.Err() == nil && byKey["redis"] != nil {
		sc, rev, why := slowestScenario(res)
		if *profile != "" {
			sc, rev, _ = strings.Cut(*profile, "/")
			if rev == "" {
				rev = legacy
			}
			why = "chosen with --profile"
		}
		if sc != "" {
			logf("profiling %s on %s (%s)", sc, rev, why)
			res.Profile = sr.runProfile(ctx, "redis", sc, rev, why, plots)
			if res.Profile.Err != "" {
				logf("profile: %s", res.Profile.Err)
			}
		}
	}
	if phase("profile") && *profile != "none" && ctx.Err() == nil {
		rawDir := dir
		if *goalDir != "" {
			rawDir = underRoot(r, *goalDir)
		}
		res.GoalProfiles = sr.runGoalProfiles(ctx, rawDir)
	}
	if phase("capacity") && ctx.Err() == nil {
		res.Capacity = measureCapacity(ctx, dir, logf)
		if res.Capacity.Err != "" {
			logf("capacity: %s", res.Capacity.Err)
		}
	}
	if phase("appendcost") && ctx.Err() == nil {
		logf("appendcost: the append script and its variants against a Redis of its own")
		res.AppendCost = appendcost.Measure(ctx, appendcost.DefaultOptions())
		if res.AppendCost.Err != "" {
			logf("appendcost: %s", res.AppendCost.Err)
		}
	}
	res.Machine.LoadEnd = loadAvg()
	res.Seconds = time.Since(start).Seconds()
	code := writeOutputs(res, page, plots, r, logf)
	logf("done in %s", time.Since(start).Round(time.Second))
	return code
}

// busyScenario is the --scenarios name of the echo runs on one busy
// session alone (echo keeps them too).
const busyScenario = "busy-session"

// kept reports whether --scenarios keeps a run: a scenario keeps its
// main runs, a kind (idle, rtt, scale) every run of that kind; the runs
// at scale only with "scale"; busy-session the runs on one busy session,
// main and rtt.
func kept(sp spec, keep map[string]bool) bool {
	if sp.Kind == "scale" || sp.Variant == "scale" {
		return keep["scale"]
	}
	if sp.Variant == busyVariant && keep[busyScenario] {
		return true
	}
	return keep[sp.Scenario] && sp.Kind != "rtt" || keep[sp.Kind]
}

// summarize is the progress line of a finished run.
func summarize(r *result) string {
	id := r.Spec.ID
	switch {
	case r.Skipped:
		return id + ": skipped (time budget)"
	case r.Report == nil:
		return id + ": FAILED: " + firstLine(r.Err)
	}
	rep := r.Report
	s := fmt.Sprintf("%s: %.0f ops/s, p50 %.2fms, p99 %.2fms, %d errors", id, rep.Throughput, rep.Latency.P50, rep.Latency.P99, rep.Errors)
	if noOperation(r) {
		s += ": NO OPERATION COMPLETED"
	}
	if r.Idle != nil {
		s += fmt.Sprintf(", %.1f kB/stream", r.Idle.PerStreamKB())
	}
	if rep.Redis != nil && rep.Redis.RoundTrips != nil {
		s += fmt.Sprintf(", %.2f Redis round trips/%s", rep.Redis.RoundTripsPerOp, rep.Redis.Unit)
		if rep.Redis.ReadsPerOp > 0 {
			s += fmt.Sprintf(" (%.2f requests read)", rep.Redis.ReadsPerOp)
		}
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// findRoot returns the repository root: the flag, or the parent of the
// bench module this command belongs to.
func findRoot(flagRoot string) (string, error) {
	if flagRoot != "" {
		return filepath.Abs(flagRoot)
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the bench module: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if filepath.Base(filepath.Dir(mod)) != "bench" {
		return "", fmt.Errorf("run benchrun from the bench module (bench/), or pass --root; go.mod here is %q", mod)
	}
	return filepath.Dir(filepath.Dir(mod)), nil
}

// writeOutputs writes results.json, the plots and the page.
func writeOutputs(res *suiteResult, page, plots, root string, logf func(string, ...any)) int {
	if err := os.MkdirAll(plots, 0o755); err != nil {
		logf("%v", err)
		return 1
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(plots, "results.json"), append(b, '\n'), 0o644); err != nil {
		logf("%v", err)
		return 1
	}
	rel, err := filepath.Rel(filepath.Dir(page), plots)
	if err != nil {
		rel = plots
	}
	images, err := writePlots(res, plots, rel)
	if err != nil {
		logf("plots: %v", err)
		return 1
	}
	text := renderPage(res, images)
	// Hand-written sections measured by other means (go test -bench) are
	// kept beside the plots and appended as they are.
	for _, name := range []string{"round-trips.md", "library-choices.md"} {
		if extra, err := os.ReadFile(filepath.Join(plots, name)); err == nil {
			text += "\n" + string(extra)
		}
	}
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		logf("%v", err)
		return 1
	}
	relPage, _ := filepath.Rel(root, page)
	logf("wrote %s and %d plots", relPage, len(images))
	return 0
}

// underRoot resolves a path relative to the repository root (absolute
// paths are kept).
func underRoot(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}
