package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The storm (make storm): a node's death at scale. Three nodes on one
// Redis; -storm-streams legacy sessions, each holding its GET stream
// open on a node connected to directly (session i on node i mod 3);
// -storm-calls progress calls in flight through the in-process router
// (round robin over the nodes); a tools/list_changed every
// -storm-notify-every, so every GET stream carries numbered events
// before, during and after the fault. Then node1 is killed with SIGKILL.
// A client whose GET stream breaks waits the retry hint the node sent
// (and up to a quarter more, drawn at random), then resumes it with
// GET + Last-Event-ID on another node, the next one again when a node
// refuses the connection; a cut call resumes through the router.
//
// Measured: when each stream resumed (the resuming GET answered 200)
// and first got an event again, when each cut call resumed and ended,
// Redis's CPU (from /proc every 100 ms) and its commands (INFO
// commandstats) from the kill until the last stream resumed and until
// 10 s after the kill. Checked, failing the run: every event of every
// stream arrived exactly once (the event ids' positions, as the
// scenarios check them), every cut stream resumed and every stream
// caught up with the last notification, and every call ended within
// -bound.

var (
	stormRun     = flag.Bool("storm", false, "instead of the scenarios, kill -9 one of three nodes under many GET streams and calls and measure the recovery (make storm; with -short 1000 streams and 20 calls)")
	stormStreams = flag.Int("storm-streams", 10000, "the storm's sessions, each with its GET stream")
	stormCalls   = flag.Int("storm-calls", 500, "the storm's progress calls in flight at the kill")
	stormSteps   = flag.Int("storm-call-steps", 40, "steps of each storm call, 500 ms apart")
	stormEvery   = flag.Duration("storm-notify-every", time.Second, "time between the storm's tools/list_changed notifications")
	stormOut     = flag.String("storm-out", "", "write the storm's report to this path plus .md and its figures to this path plus .json")
	stormArgs    = flag.String("storm-node-args", "", "extra flags for every node of the storm, separated by spaces (e.g. \"--redis-pipelines 16\")")
)

// stormVictim is the index of the node killed; the notifications are
// sent through stormNotifier.
const (
	stormVictim   = 0
	stormNotifier = 1
	stormDelayMs  = 500
)

// storm is one run.
type storm struct {
	h       *harness
	c       *clustertest.Cluster
	cfg     config
	opts    stormOptions
	nodes   []*client // one per node, connected to directly
	streams []*stormStream
	calls   []*stormCall
	killAt  atomic.Int64 // unix ns; 0 before the kill
	opened  atomic.Int64 // streams whose first GET answered 200
	cut     atomic.Int64 // streams cut after the kill
	resumed atomic.Int64 // of those, resumed
	ended   atomic.Int64 // calls ended
	toggles atomic.Int64 // notifications caused
	redis   *stormRedis
	// recovered is when every cut stream had resumed and every call
	// ended (or the bound passed); notifications go on after it.
	recovered time.Time
}

type stormOptions struct {
	streams, calls, steps int
	every                 time.Duration
	warmup                time.Duration
}

// stormStream is one session's GET stream. Its goroutine owns every
// field but the atomics until it returns.
type stormStream struct {
	i, home, node int
	s             *session
	tr            *tracker
	broadcast     atomic.Uint64 // position of the last broadcast event received
	events        int
	cuts          int       // times the stream broke
	cutAt         time.Time // first break after the kill
	resumedAt     time.Time // the resuming GET's 200 after it
	firstAt       time.Time // the first event after it
	lastEvent     time.Time
	refused       map[string]int
	failed        map[string]int // requests that got no answer, by why
	tries         int            // connections refused or failed
	gone          bool           // the session or stream is unknown (404)
	open          bool
}

// stormCall is one progress call.
type stormCall struct {
	start, end time.Time
	final      *jsonrpc.Message
	how        string
	tr         *tracker
}

func runStorm(short bool, cfg config) int {
	o := stormOptions{streams: *stormStreams, calls: *stormCalls, steps: *stormSteps, every: *stormEvery, warmup: 3 * time.Second}
	if short {
		if !flagSet("storm-streams") {
			o.streams = 1000
		}
		if !flagSet("storm-calls") {
			o.calls = 20
		}
		if !flagSet("storm-call-steps") {
			o.steps = 20
		}
	}
	h := &harness{name: "storm"}
	// The harness holds a connection per stream, three per call (the
	// router's two sides) and its own: past its open-file limit, dials
	// fail with EMFILE and the run measures the harness.
	if got, need := raiseNoFile(uint64(4*o.streams+20000)), uint64(o.streams+4*o.calls+1000); got < need {
		h.Logf("storm: the open-file limit is %d and may not be raised (the hard limit); %d streams and %d calls need about %d", got, o.streams, o.calls, need)
	}
	defer h.cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		h.Logf("interrupted: stopping everything started")
		h.cleanup()
		os.Exit(130)
	}()
	m := &storm{h: h, cfg: cfg, opts: o}
	big := strconv.Itoa(4 * (o.streams + o.calls + 100))
	m.c = clustertest.Start(h, clustertest.Options{Nodes: nodes, Args: []string{"--metrics-addr", "", "--log-level", cfg.logLevel,
		// Every client is 127.0.0.1: the per-caller limits are checked
		// at bounds the run never reaches, as the benchmarks do.
		"--caller-rate", "100000000", "--caller-burst", "100000000",
		"--max-sessions", big, "--caller-max-sessions", big, "--caller-max-streams", big, "--max-open-streams", big},
		NodeArgs: func(*clustertest.Cluster, int) []string { return strings.Fields(*stormArgs) }})
	st := newStats()
	for _, n := range m.c.Nodes {
		m.nodes = append(m.nodes, newClient(n.URL, st, cfg.bound))
	}
	var err error
	survivors := map[string]int{}
	for i, n := range m.c.Nodes {
		if i != stormVictim {
			survivors[n.ID] = n.PID()
		}
	}
	if m.redis, err = watchRedis(m.c.Redis, survivors); err != nil {
		h.Fatalf("watching Redis: %v", err)
	}
	defer m.redis.stop()
	f := m.run(st)
	if *stormOut != "" {
		if err := f.write(*stormOut); err != nil {
			h.Logf("%v", err)
			return 2
		}
	}
	fmt.Print(f.markdown())
	if len(f.Failures) > 0 {
		fmt.Fprintln(os.Stderr, "chaos: storm: FAIL:", len(f.Failures), "check(s) failed")
		return 1
	}
	return 0
}

// run opens the streams and the calls, kills the node, waits for the
// recovery and returns what it measured.
func (m *storm) run(st *stats) *stormFigures {
	h, o := m.h, m.opts
	sctx, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	var streams sync.WaitGroup
	t0 := time.Now()
	m.streams = make([]*stormStream, o.streams)
	parallel(o.streams, 32, func(i int) {
		home := i % len(m.nodes)
		ictx, cancel := context.WithTimeout(sctx, 2*time.Minute)
		defer cancel()
		s, err := m.nodes[home].initialize(ictx)
		if err != nil {
			return
		}
		ss := &stormStream{i: i, home: home, node: home, s: s, tr: newTracker(), refused: map[string]int{}, failed: map[string]int{}}
		m.streams[i] = ss
		streams.Add(1)
		go func() { defer streams.Done(); m.follow(sctx, ss) }()
	})
	m.waitFor(time.Minute, func() bool { return m.opened.Load() >= int64(o.streams) })
	h.Logf("storm: %d of %d sessions with their GET stream open in %s", m.opened.Load(), o.streams, time.Since(t0).Round(100*time.Millisecond))

	nctx, stopNotes := context.WithCancel(context.Background())
	var notes sync.WaitGroup
	notes.Add(1)
	go func() { defer notes.Done(); m.notify(nctx) }()

	cc := newClient(m.c.URL(), newStats(), m.cfg.bound)
	m.calls = make([]*stormCall, o.calls)
	var calls sync.WaitGroup
	for i := range o.calls {
		calls.Add(1)
		go func() {
			defer calls.Done()
			defer m.ended.Add(1)
			ictx, cancel := context.WithTimeout(sctx, time.Minute)
			s, err := cc.initialize(ictx)
			cancel()
			rec := &stormCall{start: time.Now()}
			m.calls[i] = rec
			if err != nil {
				rec.how, rec.end = "no session", time.Now()
				return
			}
			rec.final, rec.how, rec.tr = cc.track(s, "progress", map[string]any{"steps": o.steps, "delayMs": stormDelayMs}, o.steps)
			rec.end = time.Now()
		}()
	}
	m.waitFor(time.Minute, func() bool {
		cc.st.mu.Lock()
		defer cc.st.mu.Unlock()
		return cc.st.started >= o.calls
	})
	time.Sleep(o.warmup) // every call has progressed; Redis's steady state before the kill
	before := m.nodeFigures()
	victimStreams := int64(0)
	for _, ss := range m.streams {
		if ss != nil && ss.home == stormVictim {
			victimStreams++
		}
	}
	m.redis.count()
	kill := time.Now()
	m.killAt.Store(kill.UnixNano())
	m.c.Nodes[stormVictim].Kill()
	h.Logf("storm: %s killed (SIGKILL) holding %d GET streams", m.c.Nodes[stormVictim].ID, victimStreams)

	m.waitFor(m.cfg.bound+5*time.Second, func() bool {
		return time.Since(kill) > 11*time.Second && m.ended.Load() >= int64(o.calls) &&
			m.cut.Load() >= victimStreams && m.resumed.Load() >= m.cut.Load()
	})
	calls.Wait() // each call is bounded by -bound
	m.recovered = time.Now()
	h.Logf("storm: %d of %d cut streams resumed, %d calls ended, %s after the kill", m.resumed.Load(), m.cut.Load(), m.ended.Load(), m.recovered.Sub(kill).Round(100*time.Millisecond))
	// Notifications flow a while longer after the recovery, then stop;
	// every stream must then hold the last one.
	time.Sleep(3 * o.every)
	stopNotes()
	notes.Wait()
	time.Sleep(time.Second)
	var last uint64
	for _, ss := range m.streams {
		if ss != nil {
			last = max(last, ss.broadcast.Load())
		}
	}
	m.waitFor(10*time.Second, func() bool { return m.behind(last) == 0 })
	behind := m.behind(last)
	after := m.nodeFigures()
	stopStreams()
	streams.Wait()
	writeLogs(m.cfg.logs, "storm", m.c.Nodes)
	return m.figures(kill, victimStreams, behind, before, after, st, cc.st)
}

// follow holds one stream open until ctx ends, resuming it on another
// node whenever it breaks.
func (m *storm) follow(ctx context.Context, ss *stormStream) {
	ss.tr.onEvent = func() {
		ss.events++
		ss.lastEvent = time.Now()
		for _, at := range ss.tr.getAt { // one stream: the session's
			ss.broadcast.Store(at[0])
		}
		if !ss.resumedAt.IsZero() && ss.firstAt.IsZero() {
			ss.firstAt = time.Now()
		}
	}
	for ctx.Err() == nil {
		cl := m.nodes[ss.node]
		req := cl.newRequest(ctx, "GET", ss.s, nil, "", "")
		req.Header.Set("Accept", "text/event-stream")
		if ss.tr.last != "" {
			req.Header.Set("Last-Event-ID", ss.tr.last)
		}
		resp, err := cl.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A refused connection: the next node, soon.
			ss.tries++
			ss.failed[failure(err)]++
			ss.node = m.next(ss)
			sleep(ctx, time.Duration(100+rand.IntN(100))*time.Millisecond)
			continue
		}
		if resp.StatusCode != 200 {
			key := errorKey(resp)
			resp.Body.Close()
			ss.refused[key]++
			if resp.StatusCode == 404 {
				ss.gone = true
				return
			}
			sleep(ctx, m.retry(ss))
			continue
		}
		if !ss.open {
			ss.open = true
			m.opened.Add(1)
		}
		if !ss.cutAt.IsZero() && ss.resumedAt.IsZero() {
			ss.resumedAt = time.Now()
			m.resumed.Add(1)
		}
		cl.read(ctx, ss.s, -1, resp, ss.tr)
		if ctx.Err() != nil {
			return
		}
		ss.cuts++
		if m.killAt.Load() != 0 && ss.cutAt.IsZero() {
			ss.cutAt = time.Now()
			m.cut.Add(1)
		}
		ss.node = m.next(ss)
		sleep(ctx, m.retry(ss))
	}
}

// failure names why a request got no answer: the system call's error
// (connection refused, cannot assign requested address, ...) when
// there is one, else the error's last part.
func failure(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	msg := err.Error()
	return msg[strings.LastIndex(msg, ": ")+1:]
}

// retry is the pause before a stream reconnects: the node's retry hint
// (1 s without one) and up to a quarter more.
func (m *storm) retry(ss *stormStream) time.Duration {
	d := ss.tr.retry
	if d <= 0 {
		d = time.Second
	}
	return d + rand.N(d/4+1)
}

// next is the node a stream tries after its own: one of the others,
// spread by the stream's index.
func (m *storm) next(ss *stormStream) int {
	n := len(m.nodes)
	return (ss.node + 1 + (ss.i/n+ss.tries+ss.cuts)%(n-1)) % n
}

// notify calls toggle_extra_tool every -storm-notify-every on a session
// of a surviving node: each call is a tools/list_changed to every
// session's GET stream.
func (m *storm) notify(ctx context.Context) {
	cl := newClient(m.nodes[stormNotifier].url, newStats(), m.cfg.bound)
	s, err := cl.initialize(ctx)
	if err != nil {
		return
	}
	for sleep(ctx, m.opts.every) {
		if final, _ := cl.call(s, "toggle_extra_tool", nil, 0); final != nil && final.Error == nil {
			m.toggles.Add(1)
		}
	}
}

// behind counts the streams that have not received the broadcast at
// position last.
func (m *storm) behind(last uint64) int {
	n := 0
	for _, ss := range m.streams {
		if ss != nil && ss.broadcast.Load() < last {
			n++
		}
	}
	return n
}

func (m *storm) waitFor(d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *storm) nodeFigures() []nodeFigures {
	var out []nodeFigures
	for _, n := range m.c.Nodes {
		out = append(out, readFigures(n))
	}
	return out
}

// parallel runs f(0..n-1) with at most width at once.
func parallel(n, width int, f func(i int)) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// raiseNoFile lifts the process's open-file limit to n (the nodes and
// Redis, started after, inherit it), as far as the hard limit goes for
// a process that may not raise it, and returns the limit it has.
func raiseNoFile(n uint64) uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	if r.Cur >= n {
		return r.Cur
	}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: max(n, r.Max)}) == nil {
		return n
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: r.Max, Max: r.Max})
	return r.Max
}
