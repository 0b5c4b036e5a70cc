// Command chaos runs mcpcluster under faults and checks that failover
// keeps its promise: three cmd/server nodes on a redis-server behind
// nginx (deploy/nginx/compose.conf, as scripts/cluster.sh runs it) carry
// a verifying load while a scenario breaks things. Every call must end
// with a result or a clear JSON-RPC error within its bound, and every
// event recorded in a stream's history must reach the client exactly
// once. It prints one table row per scenario (docs/RELIABILITY.md) and
// exits 1 when a call hung or an event was lost or duplicated.
//
//	go run ./cmd/chaos                      # every scenario (make chaos)
//	go run ./cmd/chaos -short               # kill -9 and a Redis restart, ~3 min
//	go run ./cmd/chaos -scenarios kill9,aof # some of them
//	go run ./cmd/chaos -storm               # a node's death at scale (storm.go)
//
// It needs redis-server and nginx (make chaos and scripts/test.sh
// install them); toxiproxy runs in process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// nodes is the size of the cluster.
const nodes = 3

// env is what a scenario's fault acts on.
type env struct {
	h       *harness
	cfg     config
	c       *clustertest.Cluster
	tox     *toxics
	sent    *sentinelSet
	ngx     *nginx
	rel     *releases // the upgrade scenario's: which release each node runs
	mu      sync.Mutex
	faults  []time.Time
	steps   int          // the upgrade scenario's replacements done
	checks  []string     // a scenario's own checks that failed
	notes   []string     // a scenario's own figures, for the report
	acked   ackedFigures // the lagged Sentinel failovers' (acked.go)
	sharded bool         // upgrade-cluster: every node of this build read sharded channels
}

func (e *env) fault() {
	e.mu.Lock()
	e.faults = append(e.faults, time.Now())
	e.mu.Unlock()
}

type scenario struct {
	name, title string
	// setup adjusts the cluster before it starts.
	setup func(e *env, o *clustertest.Options)
	// run breaks things while the load runs, until ctx ends.
	run func(ctx context.Context, e *env)
}

// rolling restarts every node in turn with SIGTERM. With follow, the
// harness plays the endpoints controller: once a node's /readyz fails it
// leaves nginx's upstreams, and it joins again once ready.
func rolling(ctx context.Context, e *env, follow bool) {
	if !sleep(ctx, 5*time.Second) {
		return
	}
	for i := range e.c.Nodes {
		e.fault()
		cycle(e, i, follow, (*clustertest.Node).Restart)
		if !sleep(ctx, 8*time.Second) {
			return
		}
	}
}

// cycle stops node i with SIGTERM and starts it again with start. With
// follow, the node leaves nginx's upstreams once its /readyz fails and
// joins them once ready again; the upgrade scenario's releases follow
// the same steps.
func cycle(e *env, i int, follow bool, start func(n *clustertest.Node)) {
	n := e.c.Nodes[i]
	all := make([]string, len(e.c.Nodes))
	for j, m := range e.c.Nodes {
		all[j] = m.Addr
	}
	if e.rel != nil {
		e.rel.set(n.ID, "", false)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	if follow {
		for ready(n) {
			time.Sleep(50 * time.Millisecond)
		}
		others := append(append([]string(nil), all[:i]...), all[i+1:]...)
		e.ngx.route(e.h, others)
	}
	if err := <-stopped; err != nil {
		e.h.Logf("%v", err)
	}
	if e.cfg.logs != "" { // the stopped process's log
		_ = os.MkdirAll(e.cfg.logs, 0o755)
		_ = os.WriteFile(filepath.Join(e.cfg.logs, fmt.Sprintf("%s-%s-%s.log", e.h.name, n.ID, time.Now().Format("150405.000"))), []byte(n.Logs()), 0o644)
	}
	start(n)
	for follow && !ready(n) {
		time.Sleep(50 * time.Millisecond)
	}
	if follow {
		e.ngx.route(e.h, all)
	}
	if e.rel != nil {
		e.rel.set(n.ID, "", true)
	}
}

func redisOutage(ctx context.Context, e *env) {
	if !sleep(ctx, 10*time.Second) {
		return
	}
	e.fault()
	e.c.Redis.Kill()
	time.Sleep(5 * time.Second)
	e.c.Redis.Restart()
}

// withSentinels makes the cluster's Redis the primary of a Sentinel
// set: a replica and three sentinels join it before the first node
// starts, and the nodes find the primary through the sentinels.
func withSentinels(e *env, o *clustertest.Options) {
	o.NodeArgs = func(c *clustertest.Cluster, i int) []string {
		if e.sent == nil {
			e.sent = startSentinels(e.h, c.Redis, "")
		}
		return []string{"--redis-url", e.sent.url()}
	}
}

// withToxics puts a toxiproxy proxy between each node and the cluster's
// Redis, started before the first node.
func withToxics(e *env, o *clustertest.Options) {
	o.NodeArgs = func(c *clustertest.Cluster, i int) []string {
		if e.tox == nil {
			e.tox = startToxics(e.h, nodes, c.Redis.Addr())
		}
		return []string{"--redis-url", e.tox.url(i)}
	}
}

// cut drops every byte both ways on the given nodes' links (all when
// none) for d, holding the connections open.
func cut(e *env, d time.Duration, which ...int) {
	e.tox.add(e.h, `{"name":"cut-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, which...)
	e.tox.add(e.h, `{"name":"cut-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`, which...)
	time.Sleep(d)
	e.tox.remove(e.h, "cut-down", which...)
	e.tox.remove(e.h, "cut-up", which...)
}

type config struct {
	duration  time.Duration
	bound     time.Duration
	progress  int
	sampling  int
	modern    int
	listeners int
	tasks     int
	logs      string
	logLevel  string
	nginxConf string
	previous  string
}

type result struct {
	sc            scenario
	st            *stats
	before, after []nodeFigures
	recovery      time.Duration
	faults        int
	elapsed       time.Duration
	failures      []string // a scenario's own checks that failed
	acked         ackedFigures
}

func main() {
	var (
		names = flag.String("scenarios", "", "comma-separated scenarios (default all): "+scenarioNames())
		short = flag.Bool("short", false, "the short run: kill9 and redis, 50 s of load each")
		cfg   config
		out   = flag.String("out", "", "also write the markdown report to this file")
	)
	flag.StringVar(&cfg.nginxConf, "nginx-conf", "", "nginx site configuration to run instead of deploy/nginx/compose.conf (to compare another one)")
	flag.StringVar(&cfg.logLevel, "node-log-level", "warn", "the nodes' --log-level")
	flag.StringVar(&cfg.logs, "logs", "", "write each node's log to this directory, per scenario (each process's, when a scenario restarts nodes gracefully)")
	flag.DurationVar(&cfg.duration, "duration", 75*time.Second, "load per scenario (faults run within it)")
	flag.DurationVar(&cfg.bound, "bound", 60*time.Second, "a call not ended after this long counts as hung")
	flag.IntVar(&cfg.progress, "progress", 10, "legacy sessions with a GET stream, each running progress calls")
	flag.IntVar(&cfg.sampling, "sampling", 6, "legacy sessions running sampling calls (replies through the balancer)")
	flag.IntVar(&cfg.modern, "modern", 6, "2026-07-28 clients (echo and MRTR sample calls)")
	flag.IntVar(&cfg.listeners, "listeners", 6, "2026-07-28 subscriptions/listen streams")
	flag.IntVar(&cfg.tasks, "tasks", 4, "task clients of the upgrade scenario (echo_task as a durable task, both protocol eras)")
	flag.StringVar(&cfg.previous, "previous", "", "cmd/server of the previous release, for the upgrade scenario (scripts/previous.sh builds it)")
	flag.Parse()
	if *stormRun {
		os.Exit(runStorm(*short, cfg))
	}
	want := map[string]bool{}
	if *short {
		want["kill9"], want["redis"] = true, true
		if !flagSet("duration") {
			cfg.duration = 50 * time.Second
		}
	}
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var results []result
	for _, sc := range scenarios {
		if len(want) > 0 && !want[sc.name] || len(want) == 0 && sc.name == "soak" { // the soak only when named
			continue
		}
		fmt.Fprintf(os.Stderr, "chaos: %s: %s (%s of load)\n", sc.name, sc.title, cfg.duration)
		r := runScenario(sc, cfg)
		fmt.Fprintf(os.Stderr, "chaos: %s: %s\n", sc.name, r.row())
		results = append(results, r)
	}
	report := markdown(results, cfg)
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(2)
		}
	}
	for _, r := range results {
		if r.st.hung > 0 || r.lostUntold() > 0 || r.st.dup > 0 || r.st.unclear > 0 || len(r.failures) > 0 {
			fmt.Fprintln(os.Stderr, "chaos: FAIL: hung calls, lost/duplicated events, errors in internal terms or a failed check of the scenario")
			os.Exit(1)
		}
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func scenarioNames() string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func runScenario(sc scenario, cfg config) result {
	h := &harness{name: sc.name}
	defer h.cleanup()
	e := &env{h: h, cfg: cfg}
	opts := clustertest.Options{Nodes: nodes, Args: []string{"--metrics-addr", "", "--log-level", cfg.logLevel, "--retry", "500ms", "--drain-delay", "1s", "--drain-timeout", "15s", "--trusted-proxies", "127.0.0.1"}}
	if sc.setup != nil {
		sc.setup(e, &opts)
	}
	e.c = clustertest.Start(h, opts)
	if strings.HasPrefix(sc.name, "upgrade") {
		e.rel = newReleases(e.c, relPrevious)
	}
	var addrs []string
	for _, n := range e.c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	conf := cfg.nginxConf
	if conf == "" {
		conf = filepath.Join(moduleRoot(), "deploy/nginx/compose.conf")
	}
	e.ngx = startNginx(h, conf, addrs)
	url := e.ngx.url
	st := newStats()
	r := result{sc: sc, st: st}
	time.Sleep(time.Second)
	for _, n := range e.c.Nodes {
		r.before = append(r.before, readFigures(n))
	}

	start := time.Now()
	ctx, stop := context.WithTimeout(context.Background(), cfg.duration)
	defer stop()
	cl := newClient(url, st, cfg.bound)
	cl.rel = e.rel
	var wg sync.WaitGroup
	spawn := func(n int, f func()) {
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
	}
	spawn(cfg.progress, func() { progressWorker(ctx, cl) })
	spawn(cfg.sampling, func() { samplingWorker(ctx, cl) })
	spawn(cfg.modern, func() {
		for ctx.Err() == nil {
			final, _ := cl.call(nil, "echo", map[string]any{"text": "hello"}, 0)
			backoff(ctx, final)
			cl.mrtr()
			sleep(ctx, 200*time.Millisecond)
		}
	})
	spawn(cfg.listeners, func() { cl.listen(ctx) })
	spawn(1, func() { bumper(ctx, cl) })
	spawn(1, func() { cl.probe(ctx, 250*time.Millisecond) })
	if e.rel != nil {
		spawn(cfg.tasks, func() { cl.taskWorker(ctx) })
		spawn(2, func() { cl.changeWorker(ctx) })
	}
	faultDone := make(chan struct{})
	go func() { defer close(faultDone); sc.run(ctx, e) }()
	<-ctx.Done()
	<-faultDone
	wg.Wait() // each call is bounded by cfg.bound
	r.elapsed = time.Since(start)
	r.faults = len(e.faults)
	r.recovery = recovery(e.faults, st.probeFails)
	if e.rel != nil {
		r.failures = upgradeFailures(e, st)
	}
	e.mu.Lock()
	r.failures = append(r.failures, e.checks...)
	st.notes = append(st.notes, e.notes...)
	r.acked = e.acked
	e.mu.Unlock()
	// Stop nginx (its keep-alive connections to the nodes hold a goroutine
	// each) and let the nodes' streams and timers settle: until
	// --resume-grace (10s) has passed, a request whose stream dropped
	// still waits to be resumed.
	e.ngx.stop()
	cl.hc.CloseIdleConnections() // the client's own connections to nodes (the upgrade scenario's)
	writeLogs(cfg.logs, sc.name, e.c.Nodes)
	time.Sleep(12 * time.Second)
	for _, n := range e.c.Nodes {
		r.after = append(r.after, readFigures(n))
	}
	return r
}

// writeLogs writes each node's log to dir (nothing when dir is ""), as
// <name>-<node id>.log.
func writeLogs(dir, name string, nodes []*clustertest.Node) {
	if dir == "" {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	for _, n := range nodes {
		_ = os.WriteFile(filepath.Join(dir, name+"-"+n.ID+".log"), []byte(n.Logs()), 0o644)
	}
}

// recovery is the longest time from a fault until the prober's last
// failure after it (0 when the prober never failed).
func recovery(faults, fails []time.Time) time.Duration {
	var worst time.Duration
	for i, f := range faults {
		end := f.Add(time.Hour)
		if i+1 < len(faults) {
			end = faults[i+1]
		}
		for _, x := range fails {
			if !x.Before(f) && x.Before(end) {
				worst = max(worst, x.Sub(f)+250*time.Millisecond)
			}
		}
	}
	return worst
}

// backoff pauses a client after a call that did not succeed, as a client
// that is told to retry later does.
func backoff(ctx context.Context, final *jsonrpc.Message) {
	if final == nil || final.Error != nil {
		sleep(ctx, 250*time.Millisecond)
	}
}

// progressWorker is a legacy session with a GET stream open, running
// progress calls one after another; a new session replaces one that is
// gone (Redis lost its data).
func progressWorker(ctx context.Context, cl *client) {
	for ctx.Err() == nil {
		s, err := cl.initialize(ctx)
		if err != nil {
			return
		}
		gctx, stopGet := context.WithCancel(ctx)
		got := make(chan struct{})
		go func() { defer close(got); cl.getStream(gctx, s) }()
		for ctx.Err() == nil {
			final, how := cl.call(s, "progress", map[string]any{"steps": 20, "delayMs": 100}, 20)
			if strings.Contains(how, "404") {
				break
			}
			backoff(ctx, final)
		}
		stopGet()
		<-got
	}
}

func samplingWorker(ctx context.Context, cl *client) {
	for ctx.Err() == nil {
		s, err := cl.initialize(ctx)
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			final, how := cl.call(s, "sample", map[string]any{"prompt": "What is the answer?"}, 0)
			if final != nil && final.Error == nil && !strings.Contains(string(final.Result), sampleAnswer) {
				cl.st.note("sample answered %.200s", final.Result)
			}
			if strings.Contains(how, "404") {
				break
			}
			backoff(ctx, final)
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// bumper changes the tool list every 3 s, so every session's GET stream
// and every listen stream gets notifications/tools/list_changed.
func bumper(ctx context.Context, cl *client) {
	for ctx.Err() == nil {
		s, err := cl.initialize(ctx)
		if err != nil {
			return
		}
		for sleep(ctx, 3*time.Second) {
			if _, how := cl.call(s, "toggle_extra_tool", nil, 0); strings.Contains(how, "404") {
				break
			}
		}
	}
}

func (r result) row() string {
	st := r.st
	var errs []string
	keys := make([]string, 0, len(st.errs))
	for k := range st.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, fmt.Sprintf("%s ×%d", k, st.errs[k]))
	}
	if len(errs) == 0 {
		errs = append(errs, "none")
	}
	return fmt.Sprintf("| %s | %d | %d | %s | **%d** | **%s** | **%d** | **%d** | %d/%d | %d | %s | %s | %s |",
		r.sc.name, st.started, st.completed, strings.Join(errs, ", "), st.hung, st.lostCell(), st.dup, st.unclear,
		st.resumed, st.resumes, st.getReconnects, r.recovery.Round(100*time.Millisecond), figures(r.before), figures(r.after))
}

func figures(fs []nodeFigures) string {
	var p []string
	for _, f := range fs {
		if !f.ok {
			p = append(p, "down")
			continue
		}
		p = append(p, fmt.Sprintf("%d/%.0f", f.goroutines, f.rssMiB))
	}
	return strings.Join(p, " ")
}

func markdown(rs []result, cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Load per scenario: %s; %d legacy sessions with a GET stream running progress calls (20 steps, 100 ms apart), %d legacy sessions running sampling calls, %d 2026-07-28 clients (echo + MRTR), %d subscriptions/listen streams, a tools/list_changed every 3 s, a prober every 250 ms. A call not ended within %s counts as hung.\n\n",
		cfg.duration, cfg.progress, cfg.sampling, cfg.modern, cfg.listeners, cfg.bound)
	b.WriteString("| scenario | calls | completed | clear errors (HTTP status, JSON-RPC code) | hung | events lost | events duplicated | unclear errors | resumed/cut calls | GET stream reconnects | recovery | goroutines/RSS MiB before | after |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		b.WriteString(r.row() + "\n")
	}
	b.WriteString("\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "- `%s`: %s; %d fault(s); probes %d, failed %d; sampling replies retried %d; listen streams reopened %d, list_changed received %d\n",
			r.sc.name, r.sc.title, r.faults, r.st.probes, r.st.probeFail, r.st.repliesRetried, r.st.listenReopens, r.st.listenUpdates)
		if a := r.acked; a.created > 0 {
			fmt.Fprintf(&b, "  - sessions whose creation was acknowledged: %d; creations refused (-31000 or no answer) %d; acknowledged and lost in the failover: **%d**\n", a.created, a.refused, a.lost)
		}
		if r.st.tasksCreated > 0 {
			fmt.Fprintf(&b, "  - tasks created %d, read to their result %d; %s\n", r.st.tasksCreated, r.st.tasksDone, r.st.cross.describe())
		}
		for _, f := range r.failures {
			fmt.Fprintf(&b, "  - FAILED: %s\n", f)
		}
		for _, n := range r.st.notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	return b.String()
}
