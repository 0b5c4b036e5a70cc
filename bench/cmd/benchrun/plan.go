package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// Revisions the suite compares.
const (
	legacy = "2025-11-25"
	modern = "2026-07-28"
)

// busyVariant is the echo run on one busy session: busyCalls workers
// share one session (mcpbench --sessions 1), so that it has busyCalls
// tools/call in flight at once.
const (
	busyVariant = "one busy session"
	busyCalls   = 32
)

// busyTargets are the configurations the busy-session echo runs on:
// mcpcluster on one and three nodes with Redis and in memory, and the
// peers that keep sessions.
var busyTargets = map[string]bool{"mem": true, "redis": true, "redis3": true, "mcpgo": true, "gosdk": true}

// busyArgs are mcpbench's arguments of a busy-session run.
func busyArgs() []string { return []string{"--sessions", "1", "-c", strconv.Itoa(busyCalls)} }

// spec is one mcpbench run of the suite.
type spec struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"` // main, rtt, idle
	Scenario string   `json:"scenario"`
	Revision string   `json:"revision"`
	Target   string   `json:"target"`
	Variant  string   `json:"variant,omitempty"`
	Args     []string `json:"args,omitempty"`
}

// result is what one run produced.
type result struct {
	Spec    spec          `json:"spec"`
	Report  *bench.Report `json:"report,omitempty"`
	Idle    *idleStats    `json:"idle,omitempty"`
	Err     string        `json:"error,omitempty"`
	Skipped bool          `json:"skipped,omitempty"`
	Seconds float64       `json:"seconds"`
}

// idleStats is what open idle streams cost a target.
type idleStats struct {
	Streams int `json:"streams"`
	// RSS summed over the target's nodes, in kB: before the run, with
	// every session open, with every stream open.
	RSSBaseKB     int64 `json:"rss_base_kb"`
	RSSSessionsKB int64 `json:"rss_sessions_kb"`
	RSSStreamsKB  int64 `json:"rss_streams_kb"`
	// Redis connections of each node before the run and with every
	// stream open (from /proc), and Redis's connected_clients.
	RedisConnsBefore  []int `json:"redis_conns_before,omitempty"`
	RedisConnsStreams []int `json:"redis_conns_streams,omitempty"`
	ClientsBefore     int   `json:"redis_clients_before,omitempty"`
	ClientsStreams    int   `json:"redis_clients_streams,omitempty"`
	// Redis used_memory before, with sessions, with streams (bytes).
	RedisMemBase     int64 `json:"redis_mem_base,omitempty"`
	RedisMemSessions int64 `json:"redis_mem_sessions,omitempty"`
	RedisMemStreams  int64 `json:"redis_mem_streams,omitempty"`
	// Threads of the nodes with every stream open.
	Threads int64 `json:"threads"`
	// Goroutines of the nodes (from /debug/pprof) with every session
	// open and with every stream open; 0 when not read.
	GoroutinesSessions int64 `json:"goroutines_sessions,omitempty"`
	GoroutinesStreams  int64 `json:"goroutines_streams,omitempty"`
}

// PerStreamGoroutines is the goroutines an open idle stream adds (NaN
// when not measured).
func (s *idleStats) PerStreamGoroutines() float64 {
	if s.GoroutinesSessions == 0 || s.GoroutinesStreams == 0 {
		return math.NaN()
	}
	return float64(s.GoroutinesStreams-s.GoroutinesSessions) / float64(max(s.Streams, 1))
}

// PerStreamKB is the RSS an open idle stream adds.
func (s *idleStats) PerStreamKB() float64 {
	return float64(s.RSSStreamsKB-s.RSSSessionsKB) / float64(max(s.Streams, 1))
}

// PerSessionKB is the RSS an idle session (without stream) adds.
func (s *idleStats) PerSessionKB() float64 {
	return float64(s.RSSSessionsKB-s.RSSBaseKB) / float64(max(s.Streams, 1))
}

// settings are the suite's fixed parameters.
type settings struct {
	Duration      time.Duration `json:"duration"`
	Warmup        time.Duration `json:"warmup"`
	Concurrency   int           `json:"concurrency"`
	FanoutStreams int           `json:"fanout_streams"`
	IdleStreams   int           `json:"idle_streams"`
	ScaleStreams  int           `json:"scale_streams,omitempty"`
	Timeout       time.Duration `json:"timeout"`
}

// plan lists the runs of the suite, in order: the idle-stream
// measurements, the main scenarios scenario by scenario (each
// configuration right after the other, so that they share the machine's
// conditions), then the short runs that count Redis round trips with
// MONITOR.
func plan(targets []*target, st settings) []spec {
	var out []spec
	add := func(kind, scenario, revision string, t *target, variant string, args ...string) {
		id := fmt.Sprintf("%s-%s-%s-%s", kind, scenario, revision, t.Key)
		if variant != "" {
			id += "-" + strings.ReplaceAll(variant, " ", "_")
		}
		out = append(out, spec{ID: id, Kind: kind, Scenario: scenario, Revision: revision, Target: t.Key, Variant: variant, Args: args})
	}
	// Memory per stream first, while the processes are fresh: a heap
	// that earlier runs grew absorbs new streams without growing RSS.
	for _, t := range targets {
		if t.Key != "ceiling" && !t.Far && !t.ScaleOnly {
			add("idle", "idle", legacy, t, "", "--streams", strconv.Itoa(st.IdleStreams), "--settle", "1500ms")
		}
	}
	for _, sc := range []string{"echo", "progress", "sampling", "churn", "fanout", "resume", "tasks"} {
		for _, rev := range []string{legacy, modern} {
			if rev == modern && (sc == "churn" || sc == "resume") {
				continue
			}
			for _, t := range targets {
				if t.ScaleOnly || !t.supports(sc) || (rev == modern && !t.Modern) || (sc == "tasks" && !t.Ours) {
					continue
				}
				var args []string
				switch sc {
				case "fanout":
					args = []string{"--streams", strconv.Itoa(st.FanoutStreams), "--settle", "200ms"}
				}
				add("main", sc, rev, t, "", args...)
				// The cross-node round trip against its reference, the
				// reply on the node running the handler, measured side
				// by side: each session alternates the two.
				if sc == "sampling" && rev == legacy && t.Nodes > 1 {
					add("main", sc, rev, t, pairedVariant, "--reply-to", "alternate")
					// The same one call at a time: the hop alone, with
					// no other work waiting for the cores.
					add("main", sc, rev, t, pairedOneVariant, "--reply-to", "alternate", "-c", "1")
				}
			}
			// One busy session: every configuration's right after the
			// others'.
			if sc == "echo" && rev == legacy {
				for _, t := range targets {
					if busyTargets[t.Key] && !t.ScaleOnly {
						add("main", sc, rev, t, busyVariant, busyArgs()...)
					}
				}
			}
		}
	}
	// A progress call whose events are 20 ms apart, so that each is
	// appended to the stream's history on its own: what one such append
	// costs Redis, on the configurations with a loopback Redis of their
	// own.
	for _, t := range targets {
		if pacedTarget(t) && t.supports(pacedScenario) {
			add("main", pacedScenario, legacy, t, "")
		}
	}
	// Round trips are a property of the code path, counted once on
	// loopback Redis; the far configurations reuse them.
	for _, t := range targets {
		if !t.Redis || t.Far || t.ScaleOnly {
			continue
		}
		for _, sc := range []string{"echo", "progress", "sampling", "churn", "resume", "fanout", "tasks"} {
			for _, rev := range []string{legacy, modern} {
				if rev == modern && (sc == "churn" || sc == "resume") || !t.supports(sc) || rev == modern && !t.Modern {
					continue
				}
				args := []string{"--redis-monitor"}
				if sc == "fanout" {
					args = append(args, "--streams", "100", "--settle", "200ms")
				}
				add("rtt", sc, rev, t, "", args...)
				if sc == "sampling" && rev == legacy && t.Nodes > 1 {
					add("rtt", sc, rev, t, "same-node reply", "--redis-monitor", "--reply-to", "same")
				}
				if sc == "echo" && rev == legacy && busyTargets[t.Key] {
					add("rtt", sc, rev, t, busyVariant, append([]string{"--redis-monitor"}, busyArgs()...)...)
				}
			}
		}
		if pacedTarget(t) && t.supports(pacedScenario) {
			add("rtt", pacedScenario, legacy, t, "", "--redis-monitor")
		}
	}
	// The fan-out at scale: 10,000 sessions over three nodes, a few
	// toggles timed without MONITOR, then two counted with it.
	for _, t := range targets {
		if !t.ScaleOnly {
			continue
		}
		for _, rev := range []string{legacy, modern} {
			n := strconv.Itoa(st.ScaleStreams)
			add("scale", "fanout", rev, t, "", "--streams", n, "--settle", "500ms", "--count", "5")
			add("rtt", "fanout", rev, t, "scale", "--streams", n, "--settle", "500ms", "--count", "2", "--redis-monitor")
		}
	}
	return out
}

// pacedScenario is the progress call with its events 20 ms apart
// (mcpbench's paced-progress).
const pacedScenario = "paced-progress"

// pacedTarget reports whether the paced progress runs on t: our
// configurations on a loopback Redis without a replica.
func pacedTarget(t *target) bool {
	return t.Ours && t.Redis && !t.Far && !t.ScaleOnly && !t.Replica
}

// suiteRunner executes specs against running targets.
type suiteRunner struct {
	bins     *binaries
	dir      string
	targets  map[string]*target
	st       settings
	logf     func(string, ...any)
	deadline time.Time
}

// run executes one spec.
func (s *suiteRunner) run(ctx context.Context, sp spec) *result {
	res := &result{Spec: sp}
	if time.Now().After(s.deadline) {
		res.Skipped = true
		res.Err = "skipped: the time budget was spent"
		return res
	}
	start := time.Now()
	defer func() { res.Seconds = time.Since(start).Seconds() }()
	t := s.targets[sp.Target]
	dur, warm := s.st.Duration, s.st.Warmup
	switch sp.Kind {
	case "rtt":
		dur, warm = 2*time.Second, 500*time.Millisecond
	case "idle":
		dur, warm = 3*time.Second, 0
	case "scale":
		// Every toggle is measured, the first (cold) one too: a real
		// list_changed is rare.
		dur, warm = 30*time.Second, 0
	case "profile":
		dur, warm = profileWarmup(sp.Scenario)+(profileSeconds+1)*time.Second, time.Second
	}
	if sp.Variant == "scale" {
		dur, warm = 30*time.Second, 0
	}
	timeout := s.st.Timeout
	if sp.Kind == "scale" || sp.Variant == "scale" {
		timeout = 3 * s.st.Timeout
	}
	jsonPath := filepath.Join(s.dir, sp.ID+".json")
	args := []string{
		"--url", strings.Join(t.urls, ","), "--scenario", sp.Scenario, "--revision", sp.Revision,
		"-c", strconv.Itoa(s.st.Concurrency), "-d", dur.String(), "--warmup", warm.String(),
		"--timeout", timeout.String(), "-q", "--json", jsonPath,
	}
	args = append(args, t.pidArgs()...)
	if t.redisURL != "" {
		args = append(args, "--redis", t.redisURL)
	}
	args = append(args, sp.Args...)

	var idle *idleWatch
	if sp.Kind == "idle" {
		idle = s.newIdleWatch(ctx, t)
		res.Idle = idle.st
	}
	rctx, cancel := context.WithTimeout(ctx, dur+warm+timeout+90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, s.bins.mcpbench, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	out := &tailBuffer{max: 32 << 10}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		res.Err = err.Error()
		return res
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if idle != nil && strings.HasPrefix(line, "mcpbench: phase=") {
				idle.phase(line)
			}
		}
	}()
	wg.Wait()
	err = cmd.Wait()
	if idle != nil {
		idle.wait()
	}
	if rep, rerr := bench.ReadReport(jsonPath); rerr == nil {
		res.Report = rep
	}
	if err != nil || res.Report == nil {
		res.Err = fmt.Sprintf("mcpbench: %v\n%s", err, out.String())
	}
	return res
}

// idleWatch samples a target while mcpbench holds idle streams open.
type idleWatch struct {
	s    *suiteRunner
	ctx  context.Context
	t    *target
	st   *idleStats
	wg   sync.WaitGroup
	port int
}

// The watcher samples this long after a phase line (mcpbench pauses for
// --settle, 1.5s, after each).
const sampleAfter = time.Second

func (s *suiteRunner) newIdleWatch(ctx context.Context, t *target) *idleWatch {
	w := &idleWatch{s: s, ctx: ctx, t: t, st: &idleStats{Streams: s.st.IdleStreams}}
	w.st.RSSBaseKB = w.rss()
	if t.redis != nil {
		_, p, _ := strings.Cut(strings.TrimPrefix(t.redisURL, "redis://"), ":")
		w.port, _ = strconv.Atoi(p)
		w.st.RedisConnsBefore = w.conns()
		w.st.ClientsBefore, w.st.RedisMemBase = w.redisInfo()
	}
	return w
}

func (w *idleWatch) rss() int64 {
	var sum int64
	for _, n := range w.t.nodes {
		if kb, err := procStatus(n.pid(), "VmRSS"); err == nil {
			sum += kb
		}
	}
	return sum
}

// goroutines sums the goroutines of the target's nodes (0 when a node
// does not serve /debug/pprof).
func (w *idleWatch) goroutines() int64 {
	if len(w.t.metrics) != len(w.t.nodes) {
		return 0
	}
	var sum int64
	for _, addr := range w.t.metrics {
		n, err := goroutineCount(w.ctx, addr)
		if err != nil {
			return 0
		}
		sum += n
	}
	return sum
}

func (w *idleWatch) conns() []int {
	out := make([]int, len(w.t.nodes))
	for i, n := range w.t.nodes {
		out[i], _ = socketsTo(n.pid(), w.port)
	}
	return out
}

func (w *idleWatch) redisInfo() (int, int64) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	p, err := bench.DialRedis(ctx, w.t.redisURL)
	if err != nil {
		return 0, 0
	}
	defer p.Close()
	clients, _ := p.ConnectedClients(ctx)
	info, err := p.Info(ctx, "memory")
	if err != nil {
		return clients, 0
	}
	mem, _ := strconv.ParseInt(info["used_memory"], 10, 64)
	// The probe's own connection is not the servers'.
	return clients - 1, mem
}

// phase samples the target a moment after a phase line.
func (w *idleWatch) phase(line string) {
	name := strings.TrimPrefix(strings.Fields(line)[1], "phase=")
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		time.Sleep(sampleAfter)
		switch name {
		case "sessions-ready":
			w.st.RSSSessionsKB = w.rss()
			w.st.GoroutinesSessions = w.goroutines()
			if w.t.redis != nil {
				_, w.st.RedisMemSessions = w.redisInfo()
			}
		case "streams-open":
			w.st.RSSStreamsKB = w.rss()
			w.st.GoroutinesStreams = w.goroutines()
			for _, n := range w.t.nodes {
				if th, err := procStatus(n.pid(), "Threads"); err == nil {
					w.st.Threads += th
				}
			}
			if w.t.redis != nil {
				w.st.RedisConnsStreams = w.conns()
				w.st.ClientsStreams, w.st.RedisMemStreams = w.redisInfo()
			}
		}
	}()
}

func (w *idleWatch) wait() { w.wg.Wait() }

// peakRSS reads VmHWM of every node of a target, in kB.
func peakRSS(t *target) []int64 {
	out := make([]int64, len(t.nodes))
	for i, n := range t.nodes {
		out[i], _ = procStatus(n.pid(), "VmHWM")
	}
	return out
}

// machine describes where the suite ran.
type machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Go        string  `json:"go"`
	Kernel    string  `json:"kernel"`
	Redis     string  `json:"redis"`
	LoadStart string  `json:"load_start"`
	LoadEnd   string  `json:"load_end"`
}

func describeMachine() machine {
	m := machine{Cores: numCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.Go = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.Redis = v
			}
		}
	}
	m.LoadStart = loadAvg()
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
