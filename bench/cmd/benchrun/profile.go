package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPU and allocation profiles of the Redis scenario furthest from its
// goal, taken from a node (--pprof) while mcpbench drives it.

// profileResult is what the profile phase found.
type profileResult struct {
	Scenario string `json:"scenario"`
	Revision string `json:"revision"`
	Target   string `json:"target"`
	Why      string `json:"why"`
	Seconds  int    `json:"seconds"`
	Command  string `json:"command"`
	// Throughput of the profiled run.
	Throughput float64 `json:"ops_per_s"`
	Ops        int64   `json:"ops"`
	// Top functions: CPU by own time, CPU by cumulative time (this
	// module's functions), allocated bytes by own allocations and
	// cumulative (this module's).
	CPUFlat   []profLine `json:"cpu_flat"`
	CPUCum    []profLine `json:"cpu_cum"`
	AllocFlat []profLine `json:"alloc_flat"`
	AllocCum  []profLine `json:"alloc_cum"`
	// CPUTotal and AllocTotal are pprof's totals ("Showing nodes
	// accounting for ..." line).
	// CPUAreas and AllocAreas are the shares of the samples under each
	// area's functions (callers' view: pprof -focus).
	CPUAreas   []areaShare `json:"cpu_areas"`
	AllocAreas []areaShare `json:"alloc_areas"`
	CPUTotal   string      `json:"cpu_total"`
	AllocTotal string      `json:"alloc_total"`
	Files      []string    `json:"files"`
	Err        string      `json:"error,omitempty"`
}

// areaShare is the share of a profile under an area's functions.
type areaShare struct {
	Area, Share string
}

// profileAreas are the parts of a node's work the profile summary
// separates: a sample can fall in several (a Redis call inside a
// handler).
var profileAreas = []struct{ name, focus string }{
	{"Redis client (go-redis, its hooks, RESP I/O)", `github.com/redis/go-redis`},
	{"session load (internal/session Store.Load)", `internal/session\.\(\*Store\)\.Load`},
	{"JSON (encoding/json)", `^encoding/json\.`},
	{"telemetry (OpenTelemetry spans and attributes, zerolog)", `go\.opentelemetry\.io/otel/(sdk|attribute|trace|propagation)|otelhttp/internal|semconv|github.com/rs/zerolog`},
	{"HTTP request read (net/http)", `^net/http\.\(\*conn\)\.readRequest`},
	{"HTTP response write and flush (net/http)", `^net/http\.\(\*response\)\.(finishRequest|Write|Flush)|^net/http\.\(\*chunkWriter\)`},
	{"system calls", `^syscall\.|internal/runtime/syscall`},
	{"garbage collection (background marking)", `^runtime\.gcBgMarkWorker`},
}

// profLine is one line of `go tool pprof -top`.
type profLine struct {
	Flat, FlatPct, Cum, CumPct, Func string
}

// goroutineCount reads the goroutine total of a node from /debug/pprof.
func goroutineCount(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/goroutine?debug=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("%s: unexpected goroutine profile %q", addr, line)
	}
	return strconv.ParseInt(n, 10, 64)
}

// fetchProfile saves a profile endpoint's answer to path.
func fetchProfile(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileSeconds is how long the profiles sample, inside a run that
// lasts a few seconds more.
const profileSeconds = 8

// runProfile profiles the first node of target key while mcpbench runs
// scenario on it, and writes the raw profiles into dir.
func (s *suiteRunner) runProfile(ctx context.Context, key, scenario, revision, why, dir string) *profileResult {
	pr := &profileResult{Scenario: scenario, Revision: revision, Target: key, Why: why, Seconds: profileSeconds,
		Command: fmt.Sprintf("cd bench && go run ./cmd/benchrun --only redis,mcpgo --scenarios profile --profile %s/%s", scenario, revision)}
	var args []string
	if scenario == "fanout" {
		args = []string{"--streams", strconv.Itoa(s.st.FanoutStreams), "--settle", "200ms"}
	}
	sp := spec{ID: "profile-" + scenario + "-" + revision + "-" + key, Kind: "profile", Scenario: scenario, Revision: revision, Target: key, Args: args}
	cpuPath := filepath.Join(dir, "profile-cpu.pb.gz")
	allocPath := filepath.Join(dir, "profile-allocs.pb.gz")
	rr, err := s.profiledRun(ctx, sp, []profileTake{{"profile", cpuPath}, {"allocs", allocPath}})
	if rr != nil && rr.Report != nil {
		pr.Throughput, pr.Ops = rr.Report.Throughput, rr.Report.Ops
	}
	if err != nil {
		pr.Err = err.Error()
		return pr
	}
	if rr.Err != "" {
		pr.Err = firstLine(rr.Err)
	}
	pr.Files = []string{filepath.Base(cpuPath), filepath.Base(allocPath)}
	pr.summarize(dir)
	return pr
}

// profileTake is one profile a run takes: a /debug/pprof endpoint
// ("profile", "allocs") sampled for profileSeconds, saved to path.
type profileTake struct {
	endpoint, path string
}

// profiledRun runs sp (kind "profile") on its target while taking each
// profile from the target's first node, once the scenario is warm. It
// returns the run's result, and an error when a profile could not be
// taken (the result may then be nil).
func (s *suiteRunner) profiledRun(ctx context.Context, sp spec, takes []profileTake) (*result, error) {
	t := s.targets[sp.Target]
	if t == nil || len(t.metrics) == 0 {
		return nil, errors.New("no node serving /debug/pprof")
	}
	for _, tk := range takes {
		if err := os.MkdirAll(filepath.Dir(tk.path), 0o755); err != nil {
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(takes))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := "http://" + t.metrics[0] + "/debug/pprof/"
	for i, tk := range takes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Sample once the sessions are open and warm.
			select {
			case <-time.After(profileWarmup(sp.Scenario)):
			case <-pctx.Done():
				errs[i] = pctx.Err()
				return
			}
			errs[i] = fetchProfile(pctx, base+tk.endpoint+"?seconds="+strconv.Itoa(profileSeconds), tk.path)
		}()
	}
	rr := s.run(ctx, sp)
	wg.Wait()
	return rr, errors.Join(errs...)
}

// summarize reads the top functions out of the saved profiles.
func (pr *profileResult) summarize(dir string) {
	if len(pr.Files) != 2 {
		return
	}
	cpuPath, allocPath := filepath.Join(dir, pr.Files[0]), filepath.Join(dir, pr.Files[1])
	var err error
	if pr.CPUTotal, pr.CPUFlat, err = pprofTop(cpuPath, false, "", 15); err == nil {
		_, pr.CPUCum, err = pprofTop(cpuPath, true, "mcpcluster", 12)
	}
	if err == nil {
		pr.AllocTotal, pr.AllocFlat, err = pprofTop(allocPath, false, "", 10, "-sample_index=alloc_space")
	}
	if err == nil {
		_, pr.AllocCum, err = pprofTop(allocPath, true, "mcpcluster", 10, "-sample_index=alloc_space")
	}
	if err != nil {
		pr.Err = err.Error()
		return
	}
	pr.CPUAreas, pr.AllocAreas = nil, nil
	for _, a := range profileAreas {
		if v, err := pprofShare(cpuPath, a.focus); err == nil {
			pr.CPUAreas = append(pr.CPUAreas, areaShare{a.name, v})
		}
		if v, err := pprofShare(allocPath, a.focus, "-sample_index=alloc_space"); err == nil {
			pr.AllocAreas = append(pr.AllocAreas, areaShare{a.name, v})
		}
	}
}

// pprofShare is the share of a profile's samples under the functions
// matching focus ("12.3%").
func pprofShare(path, focus string, extra ...string) (string, error) {
	args := append([]string{"tool", "pprof", "-top", "-nodefraction=0", "-nodecount=1000000", "-focus=" + focus}, extra...)
	out, err := exec.Command("go", append(args, path)...).Output()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "Showing nodes accounting for "); ok {
			// "1.2s, 33.3% of 3.6s total"
			if _, pct, ok := strings.Cut(rest, ", "); ok {
				v, _, _ := strings.Cut(pct, " of ")
				return v, nil
			}
		}
	}
	return "0%", nil
}

// profileWarmup is when the profiles start after mcpbench does: after
// its warm-up, and for fanout after its streams are open.
func profileWarmup(scenario string) time.Duration {
	if scenario == "fanout" {
		return 5 * time.Second
	}
	return 2 * time.Second
}

// pprofTop runs `go tool pprof -top` and parses its lines; with only, it
// keeps the functions whose name contains it.
func pprofTop(path string, cum bool, only string, n int, extra ...string) (string, []profLine, error) {
	args := []string{"tool", "pprof", "-top"}
	if cum {
		args = append(args, "-cum", "-nodecount=300")
	} else {
		args = append(args, "-nodecount="+strconv.Itoa(n))
	}
	args = append(args, extra...)
	args = append(args, path)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		return "", nil, fmt.Errorf("go tool pprof %s: %w", filepath.Base(path), err)
	}
	header, rows, _ := pprofTable(string(out))
	var total string
	for _, line := range header {
		if i := strings.Index(line, "% of "); i > 0 && total == "" && strings.HasPrefix(line, "Showing nodes accounting for") {
			total = strings.TrimSpace(line[i+len("% of "):])
		}
		if d, ok := strings.CutPrefix(line, "Duration: "); ok && strings.Contains(d, "Total samples") {
			total = strings.TrimSpace(d) // CPU: the samples and their share of one core
		}
	}
	var lines []profLine
	for _, r := range rows {
		// With only, keep this module's functions, without the
		// middleware wrappers every request passes through.
		if only != "" && (!strings.Contains(r.fn, only) || strings.Contains(r.fn, "-fm") || strings.Contains(r.fn, ".func")) {
			continue
		}
		lines = append(lines, profLine{Flat: r.f[0], FlatPct: r.f[1], Cum: r.f[3], CumPct: r.f[4], Func: r.fn})
		if len(lines) == n {
			break
		}
	}
	return total, lines, nil
}

// pprofRow is a row of `go tool pprof -top`'s table: its figures (flat,
// flat%, sum%, cum, cum%) and its function's name, which may hold
// spaces.
type pprofRow struct {
	f  [5]string
	fn string
}

// pprofTable splits `go tool pprof -top`'s text into the lines above
// its table and the table's rows; ok is false when it has no table.
func pprofTable(out string) (header []string, rows []pprofRow, ok bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == "flat":
			ok = true
		case !ok:
			header = append(header, line)
		case len(f) >= 6:
			rows = append(rows, pprofRow{f: [5]string(f[:5]), fn: strings.Join(f[5:], " ")})
		}
	}
	return header, rows, ok
}

func renderProfile(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pr := res.Profile
	if pr == nil {
		return
	}
	p("## Profiles of the slowest Redis scenario\n\n")
	if pr.Err != "" {
		p("Profiling %s on %s failed: `%s`.\n\n", pr.Scenario, pr.Revision, oneLine(pr.Err))
		return
	}
	label := pr.Target
	if t := targetByKey(res, pr.Target); t != nil {
		label = t.Label
	}
	p("The scenario furthest from its goal in this run is **%s on %s** (%s). Its node (%s) was profiled for %d s while mcpbench drove it with the suite's settings (%s ops/s during the profile, which costs a few percent). Reproduce with `%s`; the raw profiles are `docs/bench/%s` (`go tool pprof -top docs/bench/%s`).\n\n",
		pr.Scenario, pr.Revision, pr.Why, label, pr.Seconds, rate(pr.Throughput), pr.Command, strings.Join(pr.Files, "`, `docs/bench/"), firstOr(pr.Files, ""))
	table := func(title string, ls []profLine) {
		if len(ls) == 0 {
			return
		}
		p("%s\n\n| flat | flat%% | cum | cum%% | function |\n|---:|---:|---:|---:|---|\n", title)
		for _, l := range ls {
			p("| %s | %s | %s | %s | `%s` |\n", l.Flat, l.FlatPct, l.Cum, l.CumPct, l.Func)
		}
		p("\n")
	}
	if len(pr.CPUAreas) > 0 {
		p("**Where the time and the allocations go**, as the share of samples under each area's functions (callers' view, `go tool pprof -focus`; areas overlap, so shares do not add up):\n\n| area | CPU | allocated bytes |\n|---|---:|---:|\n")
		for i, a := range pr.CPUAreas {
			alloc := "—"
			if i < len(pr.AllocAreas) {
				alloc = pr.AllocAreas[i].Share
			}
			p("| %s | %s | %s |\n", a.Area, a.Share, alloc)
		}
		p("\n")
	}
	table(fmt.Sprintf("**CPU, top functions by own time** (profile: %s):", pr.CPUTotal), pr.CPUFlat)
	table("**CPU, mcpcluster's functions by cumulative time** (callees included; the middleware every request passes through left out):", pr.CPUCum)
	table(fmt.Sprintf("**Allocated bytes, top functions by own allocations** (profile: %s):", pr.AllocTotal), pr.AllocFlat)
	table("**Allocated bytes, mcpcluster's functions, cumulative**:", pr.AllocCum)
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

func targetByKey(res *suiteResult, key string) *target {
	for _, t := range res.Targets {
		if t.Key == key {
			return t
		}
	}
	return nil
}
