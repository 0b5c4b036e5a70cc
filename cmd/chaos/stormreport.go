package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// stormFigures are what a storm measured: the report's JSON
// (-storm-out .json, which cmd/scaleplot -storm draws).
type stormFigures struct {
	Date     string             `json:"date"`
	CPUs     int                `json:"cpus"`
	Settings stormSettings      `json:"settings"`
	Streams  stormStreamFigures `json:"streams"`
	Calls    stormCallFigures   `json:"calls"`
	Redis    stormRedisFigures  `json:"redis"`
	Nodes    []stormNode        `json:"nodes"`
	// Curve is the recovery every 100 ms from 2 s before the kill.
	Curve    []stormPoint `json:"curve"`
	Goals    []stormGoal  `json:"goals"`
	Failures []string     `json:"failures"`
}

type stormSettings struct {
	Nodes       int    `json:"nodes"`
	Victim      string `json:"victim"`
	Streams     int    `json:"streams"`
	Calls       int    `json:"calls"`
	CallSteps   int    `json:"call_steps"`
	CallDelayMs int    `json:"call_delay_ms"`
	NotifyEvery string `json:"notify_every"`
	Bound       string `json:"bound"`
	NodeArgs    string `json:"node_args"` // -storm-node-args
}

type stormStreamFigures struct {
	Opened         int `json:"opened"`
	OnVictim       int `json:"on_victim"`
	Cut            int `json:"cut"` // after the kill
	CutOnSurvivors int `json:"cut_on_survivors"`
	CutBeforeKill  int `json:"cut_before_kill"`
	Resumed        int `json:"resumed"`
	NeverResumed   int `json:"never_resumed"`
	Gone           int `json:"gone"`   // answered 404
	Behind         int `json:"behind"` // without the last notification at the end
	Silent         int `json:"silent"` // without an event after the recovery
	// Refused are the answers other than 200 on the way, by status and
	// JSON-RPC code; ConnectFailures the requests that got no answer
	// (a connection refused or failed), Failed those by why.
	Refused         map[string]int `json:"refused"`
	ConnectFailures int            `json:"connect_failures"`
	Failed          map[string]int `json:"failed"`
	Resume          bench.Summary  `json:"resume"`      // kill → the resuming GET's 200
	FirstEvent      bench.Summary  `json:"first_event"` // kill → its first event
	Notifications   int64          `json:"notifications"`
	Events          int            `json:"events"`
	Lost            int            `json:"lost"`
	Duplicated      int            `json:"duplicated"`
	PerNodeAfter    []int          `json:"per_node_after"`
}

type stormCallFigures struct {
	Started    int            `json:"started"`
	Completed  int            `json:"completed"`
	Errors     map[string]int `json:"errors"`
	Hung       int            `json:"hung"`
	Cut        int            `json:"cut"`
	Resumed    int            `json:"resumed"`     // cut calls whose resuming GET answered 200
	ResumedAt  bench.Summary  `json:"resumed_at"`  // kill → that 200
	EndedAt    bench.Summary  `json:"ended_at"`    // kill → a cut call's end
	OutcomeAt  bench.Summary  `json:"outcome_at"`  // kill → a cut call's resume or end, the first
	UncutAfter int            `json:"uncut_after"` // calls not cut that ended after the kill
	Lost       int            `json:"lost"`
	Duplicated int            `json:"duplicated"`
	Unclear    int            `json:"unclear"`
}

// stormRedisFigures are Redis's CPU and commands. The recovery lasts
// from the kill until the last cut stream resumed and the last cut call
// ended.
type stormRedisFigures struct {
	BaselineCores         float64          `json:"baseline_cores"` // over the warm-up before the kill
	RecoveryS             float64          `json:"recovery_s"`
	LastStreamS           float64          `json:"last_stream_s"` // kill → the last stream resumed
	CoreSecondsLastStream float64          `json:"core_seconds_last_stream"`
	CoreSecondsRecovery   float64          `json:"core_seconds_recovery"`
	CoreSecondsAboveBase  float64          `json:"core_seconds_recovery_above_baseline"`
	CoreSeconds10s        float64          `json:"core_seconds_10s"`
	PeakCores             float64          `json:"peak_cores"`               // over 100 ms after the kill
	SurvivorsCores        float64          `json:"survivors_cores_recovery"` // the surviving nodes' average in the recovery
	ClientsCores          float64          `json:"clients_cores_recovery"`   // the clients' average in the recovery
	MachineCores          float64          `json:"machine_cores_recovery"`   // every process of the machine, the same
	CommandsRecovery      map[string]int64 `json:"commands_recovery"`
	Commands10s           map[string]int64 `json:"commands_10s"`
}

type stormNode struct {
	ID               string  `json:"id"`
	GoroutinesBefore int     `json:"goroutines_before"`
	RSSMiBBefore     float64 `json:"rss_mib_before"`
	GoroutinesAfter  int     `json:"goroutines_after"`
	RSSMiBAfter      float64 `json:"rss_mib_after"`
}

type stormPoint struct {
	T              float64 `json:"t_s"` // from the kill
	StreamsResumed int     `json:"streams_resumed"`
	CallsEnded     int     `json:"calls_ended"` // of the cut calls
	RedisCores     float64 `json:"redis_cores"`
	SurvivorsCores float64 `json:"survivors_cores"` // the surviving nodes together
	ClientsCores   float64 `json:"clients_cores"`   // the harness: every client
	MachineCores   float64 `json:"machine_cores"`   // every process of the machine
}

type stormGoal struct {
	Goal string `json:"goal"`
	Met  bool   `json:"met"`
	Got  string `json:"got"`
}

// latency summarizes durations (in milliseconds, as the benchmarks'
// reports do).
func latency(ds []time.Duration) bench.Summary {
	var h bench.Histogram
	for _, d := range ds {
		h.Record(d)
	}
	return h.Summary()
}

func (m *storm) figures(kill time.Time, onVictim int64, behind int, before, after []nodeFigures, st, cst *stats) *stormFigures {
	o := m.opts
	f := &stormFigures{Date: kill.UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(),
		Settings: stormSettings{Nodes: len(m.nodes), Victim: m.c.Nodes[stormVictim].ID, Streams: o.streams, Calls: o.calls,
			CallSteps: o.steps, CallDelayMs: stormDelayMs, NotifyEvery: o.every.String(), Bound: m.cfg.bound.String(), NodeArgs: *stormArgs}}
	fs := &f.Streams
	fs.OnVictim, fs.Behind, fs.Refused, fs.Failed = int(onVictim), behind, map[string]int{}, map[string]int{}
	fs.Notifications = m.toggles.Load()
	fs.PerNodeAfter = make([]int, len(m.nodes))
	var resumes, firsts []time.Duration
	for _, ss := range m.streams {
		if ss == nil || !ss.open {
			continue
		}
		fs.Opened++
		fs.Events += ss.events
		lost, dup := ss.tr.result(0, false)
		fs.Lost += lost
		fs.Duplicated += dup
		if lost > 0 || dup > 0 {
			m.h.Logf("storm: GET stream (session %.8s): %d lost, %d duplicated; seqs %v", ss.s.id, lost, dup, describeSeqs(ss.tr))
		}
		fs.ConnectFailures += ss.tries
		for k, n := range ss.failed {
			fs.Failed[strings.TrimSpace(k)] += n
		}
		for k, n := range ss.refused {
			fs.Refused[k] += n
		}
		fs.PerNodeAfter[ss.node]++
		if ss.gone {
			fs.Gone++
		}
		if ss.lastEvent.Before(m.recovered) {
			fs.Silent++
		}
		switch {
		case ss.cutAt.IsZero() && ss.cuts > 0:
			fs.CutBeforeKill++
		case ss.cutAt.IsZero():
			continue
		}
		fs.Cut++
		if ss.home != stormVictim {
			fs.CutOnSurvivors++
		}
		if ss.resumedAt.IsZero() {
			fs.NeverResumed++
			continue
		}
		fs.Resumed++
		resumes = append(resumes, ss.resumedAt.Sub(kill))
		if !ss.firstAt.IsZero() {
			firsts = append(firsts, ss.firstAt.Sub(kill))
		}
	}
	slices.Sort(resumes) // the curve counts them in order
	fs.Resume, fs.FirstEvent = latency(resumes), latency(firsts)

	fc := &f.Calls
	cst.mu.Lock()
	fc.Started, fc.Completed, fc.Hung, fc.Lost, fc.Duplicated, fc.Unclear = cst.started, cst.completed, cst.hung, cst.lost, cst.dup, cst.unclear
	fc.Errors = maps.Clone(cst.errs)
	cst.mu.Unlock()
	var resumedAt, endedAt, outcomeAt []time.Duration
	for _, c := range m.calls {
		if c == nil {
			continue
		}
		if c.tr == nil || c.tr.cut.IsZero() || c.tr.cut.Before(kill) {
			if c.end.After(kill) {
				fc.UncutAfter++
			}
			continue
		}
		fc.Cut++
		endedAt = append(endedAt, c.end.Sub(kill))
		outcome := c.end
		if !c.tr.resumed.IsZero() {
			fc.Resumed++
			resumedAt = append(resumedAt, c.tr.resumed.Sub(kill))
			outcome = c.tr.resumed
		}
		outcomeAt = append(outcomeAt, outcome.Sub(kill))
	}
	slices.Sort(endedAt)
	fc.ResumedAt, fc.EndedAt, fc.OutcomeAt = latency(resumedAt), latency(endedAt), latency(outcomeAt)

	r := m.redis
	fr := &f.Redis
	fr.BaselineCores = r.coreSeconds(redisProc, kill.Add(-o.warmup+time.Second), kill) / (o.warmup - time.Second).Seconds()
	end := kill
	if len(resumes) > 0 {
		end = kill.Add(resumes[len(resumes)-1])
	}
	fr.LastStreamS, fr.CoreSecondsLastStream = end.Sub(kill).Seconds(), r.coreSeconds(redisProc, kill, end)
	if len(endedAt) > 0 {
		end = maxTime(end, kill.Add(endedAt[len(endedAt)-1]))
	}
	fr.RecoveryS = end.Sub(kill).Seconds()
	fr.CoreSecondsRecovery = r.coreSeconds(redisProc, kill, end)
	for i, n := range m.c.Nodes {
		if i != stormVictim {
			fr.SurvivorsCores += r.coreSeconds(n.ID, kill, end) / max(fr.RecoveryS, 0.1)
		}
	}
	fr.ClientsCores = r.coreSeconds(clientsProc, kill, end) / max(fr.RecoveryS, 0.1)
	fr.MachineCores = r.coreSeconds(machineProc, kill, end) / max(fr.RecoveryS, 0.1)
	fr.CoreSecondsAboveBase = fr.CoreSecondsRecovery - fr.BaselineCores*fr.RecoveryS
	fr.CoreSeconds10s = r.coreSeconds(redisProc, kill, kill.Add(10*time.Second))
	fr.CommandsRecovery, fr.Commands10s = r.commands(kill, end), r.commands(kill, kill.Add(10*time.Second))

	for i, n := range m.c.Nodes {
		sn := stormNode{ID: n.ID}
		if i < len(before) {
			sn.GoroutinesBefore, sn.RSSMiBBefore = before[i].goroutines, before[i].rssMiB
		}
		if i < len(after) {
			sn.GoroutinesAfter, sn.RSSMiBAfter = after[i].goroutines, after[i].rssMiB
		}
		f.Nodes = append(f.Nodes, sn)
	}
	last := max(end.Sub(kill), 10*time.Second) + 2*time.Second
	for t := -2 * time.Second; t <= last; t += 100 * time.Millisecond {
		a, b := kill.Add(t-100*time.Millisecond), kill.Add(t)
		p := stormPoint{T: t.Seconds(), RedisCores: r.coreSeconds(redisProc, a, b) / 0.1, ClientsCores: r.coreSeconds(clientsProc, a, b) / 0.1,
			MachineCores: r.coreSeconds(machineProc, a, b) / 0.1}
		for i, n := range m.c.Nodes {
			if i != stormVictim {
				p.SurvivorsCores += r.coreSeconds(n.ID, a, b) / 0.1
			}
		}
		p.StreamsResumed = countUpTo(resumes, t)
		p.CallsEnded = countUpTo(endedAt, t)
		if t > 0 {
			fr.PeakCores = max(fr.PeakCores, p.RedisCores)
		}
		f.Curve = append(f.Curve, p)
	}
	f.check(o)
	return f
}

// countUpTo counts the sorted durations ds up to t.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func countUpTo(ds []time.Duration, t time.Duration) int {
	return sort.Search(len(ds), func(i int) bool { return ds[i] > t })
}

// check fills the failures (lost, repeated or hung work: the run fails)
// and the goals (measured against the targets).
func (f *stormFigures) check(o stormOptions) {
	fs, fc := f.Streams, f.Calls
	fail := func(cond bool, format string, args ...any) {
		if cond {
			f.Failures = append(f.Failures, fmt.Sprintf(format, args...))
		}
	}
	fail(fs.Opened < o.streams, "%d of %d GET streams opened", fs.Opened, o.streams)
	fail(fs.Lost > 0 || fs.Duplicated > 0, "GET streams: %d events lost, %d duplicated", fs.Lost, fs.Duplicated)
	fail(fs.NeverResumed > 0, "%d of %d cut GET streams never resumed", fs.NeverResumed, fs.Cut)
	fail(fs.Cut < fs.OnVictim, "%d GET streams on the killed node, %d seen cut", fs.OnVictim, fs.Cut)
	fail(fs.Gone > 0, "%d GET streams answered 404 (session or stream unknown)", fs.Gone)
	fail(fs.Behind > 0, "%d GET streams without the last notification at the end", fs.Behind)
	fail(fs.Silent > 0, "%d GET streams without an event after the recovery", fs.Silent)
	fail(fs.CutBeforeKill > 0, "%d GET streams cut before the kill", fs.CutBeforeKill)
	fail(fc.Started < o.calls, "%d of %d calls started", fc.Started, o.calls)
	fail(fc.Hung > 0, "%d calls hung (no end within the bound)", fc.Hung)
	fail(fc.Lost > 0 || fc.Duplicated > 0, "calls: %d events lost, %d duplicated", fc.Lost, fc.Duplicated)
	fail(fc.Unclear > 0, "%d calls ended with an error in internal terms", fc.Unclear)
	ended := fc.Completed + fc.Hung
	for _, n := range fc.Errors {
		ended += n
	}
	fail(ended < fc.Started, "%d of %d calls without an outcome", fc.Started-ended, fc.Started)

	goal := func(what string, met bool, got string) {
		f.Goals = append(f.Goals, stormGoal{Goal: what, Met: met, Got: got})
	}
	goal("every stream resumed on the survivors within 10 s", fs.NeverResumed == 0 && fs.Resume.Max <= 10000,
		fmt.Sprintf("%d of %d, the last %.2f s after the kill", fs.Resumed, fs.Cut, fs.Resume.Max/1000))
	goal("every cut call ended or resumed within 10 s", fc.Hung == 0 && fc.OutcomeAt.Max <= 10000,
		fmt.Sprintf("%d cut calls, the last %.2f s after the kill", fc.Cut, fc.OutcomeAt.Max/1000))
	goal("Redis CPU for the whole recovery ≤ 2 core-seconds", f.Redis.CoreSecondsRecovery <= 2,
		fmt.Sprintf("%.2f core-s in the %.2f s until the last stream resumed and the last cut call ended, %.2f above the rate before the kill; %.2f in the 10 s after the kill", f.Redis.CoreSecondsRecovery, f.Redis.RecoveryS, f.Redis.CoreSecondsAboveBase, f.Redis.CoreSeconds10s))
	goal("nothing lost or repeated", fs.Lost+fs.Duplicated+fc.Lost+fc.Duplicated == 0,
		fmt.Sprintf("%d events on the GET streams, %d lost, %d duplicated; calls %d lost, %d duplicated", fs.Events, fs.Lost, fs.Duplicated, fc.Lost, fc.Duplicated))
}

// write puts the figures in path.json and the report in path.md.
func (f *stormFigures) write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(path+".md", []byte(f.markdown()), 0o644)
}

func ms(v float64) string { return fmt.Sprintf("%.2f s", v/1000) }

func cells(l bench.Summary) string {
	if l.Count == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", ms(l.P50), ms(l.P99), ms(l.Max))
}

// topCommands lists the most frequent commands.
func topCommands(c map[string]int64, n int) string {
	keys := slices.Collect(maps.Keys(c))
	sort.Slice(keys, func(i, j int) bool { return c[keys[i]] > c[keys[j]] || c[keys[i]] == c[keys[j]] && keys[i] < keys[j] })
	var parts []string
	var total int64
	for i, k := range keys {
		total += c[k]
		if i < n {
			parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

func (f *stormFigures) markdown() string {
	var b strings.Builder
	s, fs, fc, fr := f.Settings, f.Streams, f.Calls, f.Redis
	fmt.Fprintf(&b, "Measured %s on %d CPU cores shared by Redis, the %d nodes and the clients, all on loopback. %d legacy sessions, each with its GET stream open on one node (connected to directly, a third on each); %d progress calls in flight (%d steps, %d ms apart) through a round-robin router; a tools/list_changed to every session every %s. %s killed with SIGKILL; each client whose stream broke waited the retry hint the node sent (up to a quarter more at random) and resumed with GET + Last-Event-ID on another node; each cut call resumed through the router.\n\n",
		f.Date, f.CPUs, s.Nodes, s.Streams, s.Calls, s.CallSteps, s.CallDelayMs, s.NotifyEvery, s.Victim)
	if s.NodeArgs != "" {
		fmt.Fprintf(&b, "The nodes ran with `%s` besides the storm's flags.\n\n", s.NodeArgs)
	}
	b.WriteString("| figure | value |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("GET streams open / on the killed node", "%d / %d", fs.Opened, fs.OnVictim)
	row("streams cut / resumed on the survivors / never resumed", "%d / %d / **%d**", fs.Cut, fs.Resumed, fs.NeverResumed)
	row("kill → resuming GET answered 200 (p50 / p99 / max)", "%s", cells(fs.Resume))
	row("kill → first event on the new node (p50 / p99 / max)", "%s", cells(fs.FirstEvent))
	row("answers other than 200 on the way; requests without an answer", "%s; %d (%s)", describeCounts(fs.Refused), fs.ConnectFailures, describeCounts(fs.Failed))
	row("streams per node at the end", "%v", fs.PerNodeAfter)
	row("notifications sent / events received on the GET streams", "%d / %d", fs.Notifications, fs.Events)
	row("events lost / duplicated / streams behind at the end / silent after the recovery", "**%d** / **%d** / **%d** / **%d**", fs.Lost, fs.Duplicated, fs.Behind, fs.Silent)
	row("calls started / completed / hung", "%d / %d / **%d**", fc.Started, fc.Completed, fc.Hung)
	row("calls cut / resumed / errors", "%d / %d / %s", fc.Cut, fc.Resumed, describeCounts(fc.Errors))
	row("kill → cut call resumed (p50 / p99 / max)", "%s", cells(fc.ResumedAt))
	row("kill → cut call ended (p50 / p99 / max)", "%s", cells(fc.EndedAt))
	row("call events lost / duplicated", "**%d** / **%d**", fc.Lost, fc.Duplicated)
	row("Redis CPU before the kill", "%.2f cores", fr.BaselineCores)
	row("Redis CPU, the recovery (kill → last stream resumed and last cut call ended)", "%.2f core-s in %.2f s (%.2f above the rate before the kill)", fr.CoreSecondsRecovery, fr.RecoveryS, fr.CoreSecondsAboveBase)
	row("Redis CPU, kill → last stream resumed", "%.2f core-s in %.2f s", fr.CoreSecondsLastStream, fr.LastStreamS)
	row("Redis CPU, kill → 10 s after", "%.2f core-s (peak %.2f cores over 100 ms)", fr.CoreSeconds10s, fr.PeakCores)
	row("CPU in the recovery, average: the surviving nodes together / the clients / the whole machine", "%.2f / %.2f / %.2f cores of %d", fr.SurvivorsCores, fr.ClientsCores, fr.MachineCores, f.CPUs)
	row("Redis commands, the recovery", "%s", topCommands(fr.CommandsRecovery, 8))
	row("Redis commands, kill → 10 s after", "%s", topCommands(fr.Commands10s, 8))
	var nodes []string
	for _, n := range f.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s %d/%.0f → %d/%.0f", n.ID, n.GoroutinesBefore, n.RSSMiBBefore, n.GoroutinesAfter, n.RSSMiBAfter))
	}
	row("nodes' goroutines/RSS MiB before → after", "%s", strings.Join(nodes, ", "))
	b.WriteString("\n")
	for _, g := range f.Goals {
		mark := "met"
		if !g.Met {
			mark = "**not met**"
		}
		fmt.Fprintf(&b, "- %s: %s (%s)\n", g.Goal, mark, g.Got)
	}
	for _, x := range f.Failures {
		fmt.Fprintf(&b, "- FAILED: %s\n", x)
	}
	return b.String()
}

func describeCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
