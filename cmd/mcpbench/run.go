package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// scenario is one kind of operation. prepare and finish run once;
// setup, op and teardown run on each worker. A worker whose setup fails
// does not run; its error is counted as a setup error.
type scenario interface {
	prepare(ctx context.Context, r *runner) error
	setup(ctx context.Context, w *worker) error
	// op runs one operation and returns the latency to record.
	op(ctx context.Context, w *worker) (time.Duration, error)
	teardown(ctx context.Context, w *worker)
	finish(r *runner)
}

// noHooks gives a scenario empty prepare, setup, teardown and finish.
type noHooks struct{}

func (noHooks) prepare(context.Context, *runner) error { return nil }
func (noHooks) setup(context.Context, *worker) error   { return nil }
func (noHooks) teardown(context.Context, *worker)      {}
func (noHooks) finish(*runner)                         {}

// worker is one concurrent session of a run.
type worker struct {
	n    int
	r    *runner
	sess *session
	url  int // endpoint index the session was opened on
	// shared is the session the worker shares with others
	// (--sessions); nil when it has one of its own.
	shared *sharedSession
	// getReqs delivers server requests arriving on the session's GET
	// stream, when the scenario keeps one open; closeGet closes it.
	getReqs  chan incoming
	closeGet func()
	// ops counts the worker's sampling operations; lastReply is the
	// reply→result of the previous one, to pair with the next (see
	// recordReply).
	ops       int
	lastReply *replyTiming
}

// errHold is returned by operations that only hold connections open
// until the run ends.
var errHold = errors.New("mcpbench: holding streams until the end of the run")

// runner drives a scenario with cfg.concurrency workers for the
// configured duration or count, and collects the measurements.
type runner struct {
	cfg    *config
	cl     *client
	sc     scenario
	stderr io.Writer // phase lines

	measuring atomic.Bool
	stopping  chan struct{} // closed when the measured window ends
	tickets   atomic.Int64  // measured operations started (count mode)
	ops       atomic.Int64  // measured operations that succeeded
	lat       bench.Recorder
	errs      bench.Errors
	setupErrs bench.Errors

	// shared are the sessions the workers share (--sessions).
	shared []*sharedSession

	mu       sync.Mutex
	extras   map[string]*bench.Recorder
	pairs    map[string][]time.Duration
	counters map[string]int64
	notes    []string
}

func newRunner(cfg *config, cl *client, sc scenario, stderr io.Writer) *runner {
	r := &runner{cfg: cfg, cl: cl, sc: sc, stderr: stderr, stopping: make(chan struct{}), extras: map[string]*bench.Recorder{}, counters: map[string]int64{}, pairs: map[string][]time.Duration{}}
	for range cfg.sessions {
		r.shared = append(r.shared, &sharedSession{})
	}
	return r
}

// extra records a named secondary timing (only while measuring).
// pair records one signed difference between paired timings, while the
// window is open.
func (r *runner) pair(name string, d time.Duration) {
	if !r.measuring.Load() {
		return
	}
	r.mu.Lock()
	r.pairs[name] = append(r.pairs[name], d)
	r.mu.Unlock()
}

func (r *runner) extra(name string, d time.Duration) {
	if !r.measuring.Load() {
		return
	}
	r.mu.Lock()
	rec := r.extras[name]
	if rec == nil {
		rec = new(bench.Recorder)
		r.extras[name] = rec
	}
	r.mu.Unlock()
	rec.Record(d)
}

// record records a named timing whether or not the window is open
// (timings of the preparation).
func (r *runner) record(name string, d time.Duration) {
	r.mu.Lock()
	rec := r.extras[name]
	if rec == nil {
		rec = new(bench.Recorder)
		r.extras[name] = rec
	}
	r.mu.Unlock()
	rec.Record(d)
}

// count adds to a named counter (only while measuring, unless always).
func (r *runner) count(name string, n int64, always bool) {
	if !always && !r.measuring.Load() {
		return
	}
	r.mu.Lock()
	r.counters[name] += n
	r.mu.Unlock()
}

// note adds a line to the report's notes.
func (r *runner) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// phase announces a milestone on stderr for tools that watch the run
// (bench/cmd/benchrun samples server memory at these), then waits
// cfg.settle so they can look.
func (r *runner) phase(ctx context.Context, name string, n int) {
	fmt.Fprintf(r.stderr, "mcpbench: phase=%s n=%d\n", name, n)
	select {
	case <-ctx.Done():
	case <-time.After(r.cfg.settle):
	}
}

// run executes the whole benchmark and returns its report.
func (r *runner) run(ctx context.Context, progress io.Writer) (*bench.Report, error) {
	cfg := r.cfg
	if err := r.sc.prepare(ctx, r); err != nil {
		return nil, fmt.Errorf("preparing %s: %w", cfg.scenario, err)
	}
	// The scenario's finish counts what it saw while closing (streams
	// the server closed early): it runs before the report is made.
	finish := sync.OnceFunc(func() { r.sc.finish(r) })
	defer finish()

	workers := make([]*worker, cfg.concurrency)
	var alive atomic.Int64
	setupCtx, cancelSetup := context.WithTimeout(ctx, cfg.timeout)
	var setupWG sync.WaitGroup
	for i := range workers {
		w := &worker{n: i, r: r}
		workers[i] = w
		setupWG.Add(1)
		go func() {
			defer setupWG.Done()
			if err := r.sc.setup(withSource(setupCtx, w.n), w); err != nil {
				r.setupErrs.Add(err)
				workers[w.n] = nil
				return
			}
			alive.Add(1)
		}()
	}
	setupWG.Wait()
	cancelSetup()
	if alive.Load() == 0 {
		return r.report(0, time.Now(), bench.CPUTimes{}), fmt.Errorf("no worker could be set up: %v", r.setupErrs.Snapshot())
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, w := range workers {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.loop(withSource(runCtx, w.n), w)
		}()
	}

	// Warm-up, then the measured window.
	if cfg.warmup > 0 {
		select {
		case <-time.After(cfg.warmup):
		case <-ctx.Done():
		}
	}
	r.lat.Reset()
	r.errs.Reset()
	var rs *redisWatch
	if cfg.redisURL != "" {
		var err error
		if rs, err = startRedisWatch(ctx, cfg.redisURL, cfg.redisMonitor); err != nil {
			r.note("redis statistics unavailable: %v", err)
			rs = nil
		}
	}
	procs0 := r.procCPU()
	cpu0 := bench.SelfCPU()
	start := time.Now()
	r.measuring.Store(true)

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	stopProgress := r.showProgress(progress, start)
	select {
	case <-time.After(cfg.duration):
	case <-finished: // count reached
	case <-ctx.Done():
	}
	r.measuring.Store(false)
	end := time.Now()
	cpu := bench.SelfCPU().Sub(cpu0)
	procs1 := r.procCPU()
	stopProgress()
	var redisStats *bench.RedisStats
	if rs != nil {
		ops, unit := float64(r.ops.Load()), "op"
		if cfg.scenario == "idle" {
			ops, unit = float64(cfg.streams)*end.Sub(start).Seconds(), "stream-second"
		}
		var err error
		if redisStats, err = rs.finish(ctx, ops, unit); err != nil {
			r.note("redis statistics unavailable: %v", err)
		}
	}
	// Let the operations under way finish (they are not counted), so
	// that none is cut half-way, leaving sessions behind; cut those
	// still running after a grace period.
	close(r.stopping)
	select {
	case <-finished:
	case <-time.After(min(cfg.timeout, 5*time.Second)):
	case <-ctx.Done():
	}
	stop()
	wg.Wait()

	// Teardown (DELETE of the sessions) is bounded more tightly: some
	// servers hold a DELETE while a request of the session still waits
	// for its client, which an interrupted operation never answers.
	tctx, cancel := context.WithTimeout(context.Background(), min(cfg.timeout, 3*time.Second))
	defer cancel()
	var twg sync.WaitGroup
	for _, w := range workers {
		if w != nil {
			twg.Add(1)
			go func() { defer twg.Done(); r.sc.teardown(withSource(tctx, w.n), w) }()
		}
	}
	twg.Wait()
	ops := r.ops.Load()
	var procs map[string]bench.ProcessCPU
	for _, p := range cfg.pids {
		a, ok0 := procs0[p.name]
		b, ok1 := procs1[p.name]
		if !ok0 || !ok1 {
			r.note("no CPU figures for %s (pid %d)", p.name, p.pid)
			continue
		}
		used := b.Sub(a).Total()
		pc := bench.ProcessCPU{PID: p.pid, Cores: used.Seconds() / end.Sub(start).Seconds()}
		if ops > 0 {
			pc.MicrosPerOp = float64(used.Microseconds()) / float64(ops)
		}
		if procs == nil {
			procs = map[string]bench.ProcessCPU{}
		}
		procs[p.name] = pc
	}
	finish()
	rep := r.report(end.Sub(start), start, cpu)
	rep.Redis = redisStats
	rep.Processes = procs
	return rep, nil
}

// procCPU reads the CPU times of the watched processes.
func (r *runner) procCPU() map[string]bench.CPUTimes {
	out := map[string]bench.CPUTimes{}
	for _, p := range r.cfg.pids {
		if t, err := bench.ProcCPU(p.pid); err == nil {
			out[p.name] = t
		}
	}
	return out
}

// loop runs operations on w until the run ends or the count is reached.
func (r *runner) loop(ctx context.Context, w *worker) {
	cfg := r.cfg
	for ctx.Err() == nil {
		select {
		case <-r.stopping:
			return
		default:
		}
		measured := r.measuring.Load()
		if cfg.count > 0 && measured && r.tickets.Add(1) > cfg.count {
			return
		}
		octx, cancel := context.WithTimeout(ctx, cfg.timeout)
		began := time.Now()
		d, err := r.sc.op(octx, w)
		cancel()
		if ctx.Err() != nil {
			// Interrupted by the end of the run: not counted, but an
			// operation stuck for long should not go unnoticed, even
			// one begun in the warm-up (it held the whole window).
			if !errors.Is(err, errHold) && time.Since(began) >= min(time.Second, cfg.timeout) {
				r.count("stuck_at_end", 1, true)
			}
			return
		}
		if !measured || !r.measuring.Load() {
			continue // warm-up, or finished after the window closed
		}
		if err != nil {
			r.errs.Add(err)
			// Do not spin on a dead endpoint.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		r.lat.Record(d)
		r.ops.Add(1)
	}
}

// report assembles the report of the measured window.
func (r *runner) report(elapsed time.Duration, start time.Time, cpu bench.CPUTimes) *bench.Report {
	cfg := r.cfg
	h := r.lat.Snapshot()
	rep := &bench.Report{
		Command:     os.Args,
		Scenario:    cfg.scenario,
		Revision:    cfg.revision,
		URLs:        cfg.urls,
		Concurrency: cfg.concurrency,
		Settings:    cfg.settings(),
		Started:     start.UTC().Format(time.RFC3339Nano),
		Elapsed:     elapsed.Seconds(),
		Ops:         r.ops.Load(),
		Errors:      r.errs.Total(),
		Latency:     h.Summary(),
		ErrorKinds:  r.errs.Snapshot(),
		SetupErrors: r.setupErrs.Snapshot(),
		CPU:         bench.ShareOf(cpu, elapsed),
	}
	if elapsed > 0 {
		rep.Throughput = float64(rep.Ops) / elapsed.Seconds()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.extras) > 0 {
		rep.Extra = map[string]bench.Summary{}
		for k, rec := range r.extras {
			rep.Extra[k] = rec.Snapshot().Summary()
		}
	}
	if len(r.pairs) > 0 {
		rep.Paired = map[string]bench.Difference{}
		for k, ds := range r.pairs {
			rep.Paired[k] = bench.Differences(slices.Clone(ds))
		}
	}
	if len(r.counters) > 0 {
		rep.Counters = map[string]int64{}
		for k, v := range r.counters {
			rep.Counters[k] = v
		}
	}
	rep.Notes = append([]string(nil), r.notes...)
	if len(rep.ErrorKinds) == 0 {
		rep.ErrorKinds = nil
	}
	if len(rep.SetupErrors) == 0 {
		rep.SetupErrors = nil
	}
	if c := r.errs.Classes(); len(c) > 0 {
		rep.ErrorClasses = c
	}
	if c := r.setupErrs.Classes(); len(c) > 0 {
		rep.SetupErrorClasses = c
	}
	return rep
}

// showProgress prints a status line every second until the returned
// function is called. On a terminal the line is rewritten in place.
func (r *runner) showProgress(w io.Writer, start time.Time) func() {
	if w == nil {
		return func() {}
	}
	tty := isTerminal(w)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		lastOps, lastT := int64(0), start
		cpu0 := bench.SelfCPU()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(w)
				}
				return
			case now := <-t.C:
				ops := r.ops.Load()
				h := r.lat.Snapshot()
				cpu := bench.SelfCPU()
				share := bench.ShareOf(cpu.Sub(cpu0), now.Sub(lastT))
				rate := float64(ops-lastOps) / now.Sub(lastT).Seconds()
				line := fmt.Sprintf("[%5.1fs/%s] ops %d  %.0f/s  errors %d  p50 %s  p99 %s  cpu %.2f cores",
					now.Sub(start).Seconds(), r.cfg.duration, ops, rate, r.errs.Total(),
					fmtMs(bench.Millis(h.Quantile(0.5))), fmtMs(bench.Millis(h.Quantile(0.99))), share.Cores)
				if tty {
					fmt.Fprintf(w, "\r%-100s", line)
				} else {
					fmt.Fprintln(w, line)
				}
				lastOps, lastT, cpu0 = ops, now, cpu
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// dropProbe removes the probe's own commands from MONITOR counts.
func dropProbe(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if k != "info" {
			out[k] = v
		}
	}
	return out
}

// sortedKeys returns the keys of a map, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
