// Command mcpbench is a load generator for MCP servers over Streamable
// HTTP. It drives many concurrent sessions against one endpoint or
// several (round robin, like a load balancer without stickiness) for a
// bounded time or number of operations, and reports throughput, latency
// percentiles, errors by kind and its own CPU share, as text and as JSON.
// Run it with --help for the scenarios and flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// config is every setting of a run.
type config struct {
	urls        []string
	scenario    string
	revision    string
	concurrency int
	// sessions is the number of sessions the workers share (worker i
	// uses session i mod sessions); 0: one session per worker.
	sessions     int
	duration     time.Duration
	count        int64
	warmup       time.Duration
	timeout      time.Duration
	text         string
	steps        int
	delayMs      int
	streams      int
	replyTo      string
	cutAfter     int
	gap          time.Duration
	settle       time.Duration
	jsonOut      string
	redisURL     string
	redisMonitor bool
	pids         []namedPID
	sources      []netip.Addr
	quiet        bool
	// resumeCut and checkSessions are for runs with a fault (a replica
	// killed mid-run): resume cut streams, and probe the sessions at the
	// end.
	resumeCut     bool
	checkSessions bool
}

// namedPID is a server process watched with --pid.
type namedPID struct {
	name string
	pid  int
}

// pidList is the repeatable --pid flag: NAME=PID or PID.
type pidList []namedPID

func (p *pidList) String() string {
	parts := make([]string, len(*p))
	for i, n := range *p {
		parts[i] = n.name + "=" + strconv.Itoa(n.pid)
	}
	return strings.Join(parts, ",")
}

func (p *pidList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(s), "=")
		if !ok {
			num, name = name, ""
		}
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 {
			return fmt.Errorf("not NAME=PID or PID: %q", s)
		}
		if name == "" {
			name = "pid" + num
		}
		*p = append(*p, namedPID{name: name, pid: pid})
	}
	return nil
}

// settings lists the parameters that matter for the scenario.
func (c *config) settings() map[string]any {
	m := map[string]any{"timeout": c.timeout.String(), "warmup": c.warmup.String(), "duration": c.duration.String()}
	if c.count > 0 {
		m["count"] = c.count
	}
	if c.sessions > 0 {
		m["sessions"] = c.sessions
	}
	switch c.scenario {
	case "echo", "tasks":
		m["text_bytes"] = len(c.text)
	case "progress", "paced-progress":
		m["steps"], m["delay_ms"] = c.steps, c.delayMs
	case "sampling":
		m["reply_to"] = c.replyTo
	case "fanout", "idle":
		m["streams"] = c.streams
	case "resume":
		m["steps"], m["delay_ms"], m["cut_after"], m["gap"], m["reply_to"] = c.steps, c.delayMs, c.cutAfter, c.gap.String(), c.replyTo
	}
	return m
}

var scenarios = []string{"echo", "progress", "paced-progress", "sampling", "churn", "fanout", "resume", "idle", "tasks"}

// sharingScenarios are the scenarios whose workers can share sessions
// (--sessions).
var sharingScenarios = []string{"echo", "progress", "sampling"}

const usageText = `Usage: mcpbench [flags]

mcpbench drives an MCP server (Streamable HTTP) with many concurrent
sessions and reports throughput, latency percentiles (p50/p90/p99/max),
errors by kind and its own CPU share. It stops by itself after --duration
(or --count operations). Give several endpoints (--url a --url b, or
--url a,b) to spread requests round robin over them, the way a load
balancer without sticky sessions would.

Scenarios (--scenario), each for any protocol revision (--revision)
unless noted:
  echo      tools/call echo {text}: one request, one JSON answer.
  progress  tools/call progress {steps, delayMs} with a progressToken: the
            answer streams --steps progress notifications over SSE.
  paced-progress
            progress with --delay-ms 20 by default: the resume scenario's
            call, neither cut nor resumed, so that each event is appended
            to the stream's history on its own.
  sampling  tools/call sample: the server asks the client for one sampling
            round trip. Before 2026-07-28 each session also holds its GET
            stream open, the request arrives on the call's SSE stream (or
            the GET stream) and mcpbench answers with a POST to the next
            endpoint (--reply-to next, a cross-node reply in a cluster) or
            the same one, or alternately each (--reply-to alternate: the
            report's paired reply_cross_minus_same is the difference of
            each session's consecutive replies); on 2026-07-28 the call
            returns input_required and mcpbench retries it with
            inputResponses + requestState.
  churn     a whole session per operation: initialize, one echo call,
            DELETE. Handshake revisions only.
  fanout    --streams open GET streams (subscriptions/listen on
            2026-07-28); each operation calls toggle_extra_tool once and
            lasts until every stream has received tools/list_changed.
  resume    a progress call whose SSE stream is cut after --cut-after
            notifications and resumed --gap later with GET + Last-Event-ID;
            the latency is the time to the first replayed event, and every
            step must arrive exactly once. Handshake revisions only.
  idle      opens --streams idle streams and holds them for --duration (to
            measure what an open stream costs the server).
  tasks     tools/call echo as a durable task (2025-11-25: params.task;
            2026-07-28: the tasks extension negotiated), tasks/get until
            it is completed, then its result (tasks/result on 2025-11-25,
            the completed tasks/get on 2026-07-28); each request on the
            next endpoint. Calls the demo pack's echo_task.

Sessions: by default each worker (-c) opens a session of its own and
runs one operation at a time on it. --sessions N makes the workers share
N sessions instead (worker i uses session i mod N), so that a session
has several requests in flight at once: --sessions 1 -c 32 is one busy
session with 32 concurrent tools/call on one Mcp-Session-Id. Request ids
stay unique within each session. For echo, progress and sampling on the
handshake revisions (2025-03-26, 2025-06-18, 2025-11-25); 2026-07-28 has no
sessions. Sampling then tags each call's prompt so that a request
arriving on the session's one GET stream reaches the call it belongs
to, and expects its tagged answer back.

Examples:
  # 16 sessions calling echo for 10 s against a local node
  mcpbench --url http://127.0.0.1:8080/mcp

  # one busy session: 32 workers, 32 tools/call in flight on one
  # Mcp-Session-Id
  mcpbench --url http://127.0.0.1:8080/mcp --sessions 1 -c 32

  # three nodes round robin, stateless revision, JSON report for tools
  mcpbench --url http://127.0.0.1:8081/mcp,http://127.0.0.1:8082/mcp,http://127.0.0.1:8083/mcp \
      --revision 2026-07-28 --scenario sampling -d 5s --json out.json

  # from 32 local addresses of its own (worker i dials from address
  # i mod 32), e.g. behind a proxy that counts each client address as a
  # caller of its own
  mcpbench --url http://10.0.0.3:8080/mcp --source 10.0.0.100-10.0.0.131 -c 64

  # Redis cost per operation: commands (INFO commandstats) and round
  # trips (MONITOR, slows Redis: keep such runs short)
  mcpbench --scenario echo --count 2000 --redis redis://127.0.0.1:6379 --redis-monitor

  # the same summed over the primaries of a Redis Cluster, and each
  # primary's part (commands, PUBLISH, SPUBLISH, cluster-bus messages)
  mcpbench --scenario churn --redis redis-cluster://10.0.0.5:6379,10.0.0.6:6379

Operations that fail are counted by kind (http_503, rpc_-32603, timeout,
conn_refused, missing_progress, bad_result, ...) and by likely cause
(session_not_found, reply_not_delivered, node_lost, stream_lost,
timeout, ...), and left out of the latency figures. The first --warmup of every run is not measured.
While running, a progress line goes to stderr every second (-q hides it).
Lines "mcpbench: phase=NAME n=N" on stderr mark the moments sessions and
streams are all open; mcpbench then pauses --settle so a watcher can
sample the server.

Flags:
`

// urlList is a repeatable, comma-separated --url flag.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u = append(*u, s)
		}
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("mcpbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var urls urlList
	fs.Var(&urls, "url", "MCP endpoint; repeat or comma-separate for several (round robin) (default http://127.0.0.1:8080/mcp)")
	fs.StringVar(&c.scenario, "scenario", "echo", "what to run: "+strings.Join(scenarios, ", "))
	fs.StringVar(&c.revision, "revision", rev20251125, "protocol revision: "+strings.Join(revisions, ", "))
	fs.IntVar(&c.concurrency, "c", 16, "concurrent workers, each running one operation at a time on a session of its own, or on a shared one with --sessions (fanout and idle use one)")
	fs.IntVar(&c.concurrency, "concurrency", 16, "same as -c")
	fs.IntVar(&c.sessions, "sessions", 0, "echo, progress, sampling on a handshake revision: the workers share this many sessions, worker i using session i mod N (--sessions 1 -c 32: one busy session with 32 calls in flight); 0: one session per worker")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "measured duration, after the warm-up")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "same as -d")
	fs.Int64Var(&c.count, "count", 0, "stop after this many measured operations (0: run for the duration, which still bounds the run)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before the measured window")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "time limit of one operation (and of opening sessions and streams)")
	fs.StringVar(&c.text, "text", "hello", "echo: the text sent and expected back")
	fs.IntVar(&c.steps, "steps", 10, "progress, paced-progress, resume: progress notifications per call")
	fs.IntVar(&c.delayMs, "delay-ms", -1, "progress, paced-progress, resume: pause between steps in the tool; -1: 0 for progress, 20 for paced-progress and resume")
	fs.IntVar(&c.streams, "streams", 100, "fanout, idle: number of open streams")
	fs.StringVar(&c.replyTo, "reply-to", "next", "sampling, resume: send the reply / resuming GET to the same endpoint as the call (same) or the next one (next); sampling: alternate between the two per operation, and report their paired difference (alternate)")
	fs.IntVar(&c.cutAfter, "cut-after", 3, "resume: progress notifications received before the stream is cut")
	fs.DurationVar(&c.gap, "gap", 50*time.Millisecond, "resume: pause between the cut and the resuming GET")
	fs.DurationVar(&c.settle, "settle", time.Second, "pause after each phase line (sessions-ready, streams-open)")
	fs.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this file (- for stdout; the text report then goes to stderr)")
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL of the servers' shared state: report Redis commands per operation (INFO commandstats) and connected clients; a redis-cluster://host:port[,host:port...] URL watches every primary of that cluster and reports each one's part too")
	fs.BoolVar(&c.redisMonitor, "redis-monitor", false, "with --redis: also count round trips per operation with MONITOR (slows Redis down)")
	var pids pidList
	fs.Var(&pids, "pid", "server process to watch (NAME=PID or PID; repeat or comma-separate): report its CPU per operation (Linux /proc; same machine only)")
	var sources sourceList
	fs.Var(&sources, "source", "local IPv4 addresses to dial from: a comma-separated list of addresses and ranges (10.0.0.100-10.0.0.131, or 10.0.0.100-131); worker i's connections come from address i mod their number (default: the system's choice)")
	fs.BoolVar(&c.resumeCut, "resume-cut", false, "progress, sampling: resume a call's SSE stream (and sampling's GET stream) that ends without its response, with GET + Last-Event-ID, retrying 5xx and connection errors until the operation's timeout; reports streams cut, resumed and lost")
	fs.BoolVar(&c.checkSessions, "check-sessions", false, "at the end, send each session a ping before its DELETE and report how many the server still knew (sessions_alive) or had lost (sessions_lost: HTTP 404)")
	fs.BoolVar(&c.quiet, "q", false, "no progress line")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	c.urls = urls
	c.pids = pids
	c.sources = sources
	if len(c.urls) == 0 {
		c.urls = []string{"http://127.0.0.1:8080/mcp"}
	}
	if c.delayMs < 0 {
		c.delayMs = 0
		if c.scenario == "resume" || c.scenario == "paced-progress" {
			c.delayMs = 20
		}
	}
	if c.scenario == "fanout" || c.scenario == "idle" {
		c.concurrency = 1
	}
	return c, c.validate()
}

// validate checks the configuration; each error names the flag.
func (c *config) validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: "+format, append([]any{name}, args...)...))
	}
	for _, u := range c.urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			bad("url", "not an http(s) URL: %q", u)
		}
	}
	if !slices.Contains(scenarios, c.scenario) {
		bad("scenario", "must be one of %s, not %q", strings.Join(scenarios, ", "), c.scenario)
	}
	if !slices.Contains(revisions, c.revision) {
		bad("revision", "must be one of %s, not %q", strings.Join(revisions, ", "), c.revision)
	}
	if c.revision == rev20260728 && (c.scenario == "churn" || c.scenario == "resume") {
		bad("scenario", "%s needs sessions and resumable streams, which %s does not have", c.scenario, rev20260728)
	}
	if c.scenario == "tasks" && c.revision != rev20251125 && c.revision != rev20260728 {
		bad("scenario", "tasks exist on %s and %s only, not on %s", rev20251125, rev20260728, c.revision)
	}
	if c.concurrency < 1 {
		bad("c", "must be at least 1")
	}
	switch {
	case c.sessions < 0:
		bad("sessions", "must not be negative")
	case c.sessions == 0:
	case c.revision == rev20260728:
		bad("sessions", "%s has no sessions (each request stands alone): leave --sessions at 0, or use a handshake revision (%s, %s or %s)", rev20260728, rev20250326, rev20250618, rev20251125)
	case !slices.Contains(sharingScenarios, c.scenario):
		bad("sessions", "only %s share sessions, not %s", strings.Join(sharingScenarios, ", "), c.scenario)
	case c.sessions > c.concurrency:
		bad("sessions", "%d sessions for %d workers (-c): at most one per worker", c.sessions, c.concurrency)
	}
	if c.duration <= 0 {
		bad("duration", "must be positive")
	}
	if c.count < 0 {
		bad("count", "must not be negative")
	}
	if c.warmup < 0 {
		bad("warmup", "must not be negative")
	}
	if c.timeout <= 0 {
		bad("timeout", "must be positive")
	}
	if c.steps < 1 || c.steps > 1000 {
		bad("steps", "must be between 1 and 1000")
	}
	if c.streams < 1 {
		bad("streams", "must be at least 1")
	}
	switch {
	case c.replyTo == "alternate" && c.scenario != "sampling":
		bad("reply-to", "alternate is for the sampling scenario")
	case c.replyTo != "same" && c.replyTo != "next" && c.replyTo != "alternate":
		bad("reply-to", "must be same, next or alternate, not %q", c.replyTo)
	}
	if c.scenario == "resume" && (c.cutAfter < 1 || c.cutAfter >= c.steps) {
		bad("cut-after", "must be between 1 and --steps - 1")
	}
	if c.redisMonitor && c.redisURL == "" {
		bad("redis-monitor", "needs --redis")
	}
	return errors.Join(errs...)
}

func newScenario(c *config) scenario {
	switch c.scenario {
	case "progress", "paced-progress":
		return &progressScenario{}
	case "sampling":
		return &samplingScenario{}
	case "churn":
		return churnScenario{}
	case "fanout":
		return &fanoutScenario{}
	case "resume":
		return resumeScenario{}
	case "idle":
		return &idleScenario{}
	case "tasks":
		return &taskScenario{text: c.text}
	}
	return &echoScenario{text: c.text}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpbench: %v\n(see mcpbench --help)\n", err)
		return 2
	}
	// Connections: one per worker for requests, one per replying POST,
	// one per stream.
	cl := newClient(cfg.urls, cfg.revision, 2*cfg.concurrency+cfg.streams+16, cfg.sources)
	if cfg.scenario == "tasks" && cl.modern {
		cl.caps["extensions"] = map[string]any{extensionTasks: map[string]any{}}
	}
	defer cl.closeIdle()
	r := newRunner(cfg, cl, newScenario(cfg), stderr)
	var progress io.Writer = stderr
	if cfg.quiet {
		progress = nil
	}
	text := stdout
	if cfg.jsonOut == "-" {
		text = stderr
	}
	shared := ""
	if cfg.sessions > 0 {
		shared = fmt.Sprintf(" sharing %d session(s)", cfg.sessions)
	}
	fmt.Fprintf(stderr, "mcpbench: %s on %s, %d worker(s)%s, %d endpoint(s), %s (+%s warm-up)\n",
		cfg.scenario, cfg.revision, cfg.concurrency, shared, len(cfg.urls), cfg.duration, cfg.warmup)
	rep, err := r.run(ctx, progress)
	if rep != nil {
		printReport(text, rep)
		if cfg.jsonOut != "" {
			if werr := writeJSON(cfg.jsonOut, stdout, rep); werr != nil {
				fmt.Fprintf(stderr, "mcpbench: writing %s: %v\n", cfg.jsonOut, werr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpbench: %v\n", err)
		return 1
	}
	return 0
}

func writeJSON(path string, stdout io.Writer, rep *bench.Report) error {
	if path == "-" {
		return rep.WriteJSON(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fmtMs renders milliseconds with a sensible precision.
func fmtMs(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1000)
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmt.Sprintf("%.2fs", ms/1000)
}

func fmtSummary(s bench.Summary) string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s  (mean %s, n=%d)",
		fmtMs(s.P50), fmtMs(s.P90), fmtMs(s.P99), fmtMs(s.Max), fmtMs(s.Mean), s.Count)
}

// printReport writes the human-readable report.
func printReport(w io.Writer, r *bench.Report) {
	shared := ""
	if n, ok := r.Settings["sessions"]; ok {
		shared = fmt.Sprintf(" sharing %v session(s)", n)
	}
	fmt.Fprintf(w, "\n%s on %s: %d worker(s)%s, %d endpoint(s), %.2fs measured\n", r.Scenario, r.Revision, r.Concurrency, shared, len(r.URLs), r.Elapsed)
	fmt.Fprintf(w, "  operations   %d ok, %d failed (%.2f%%)\n", r.Ops, r.Errors, 100*r.ErrorRate())
	fmt.Fprintf(w, "  throughput   %.1f ops/s\n", r.Throughput)
	fmt.Fprintf(w, "  latency      %s\n", fmtSummary(r.Latency))
	for _, k := range sortedKeys(r.Extra) {
		fmt.Fprintf(w, "  %-12s %s\n", k, fmtSummary(r.Extra[k]))
	}
	for _, k := range sortedKeys(r.Counters) {
		fmt.Fprintf(w, "  %-24s %d\n", k, r.Counters[k])
	}
	if len(r.ErrorKinds) > 0 {
		fmt.Fprintf(w, "  errors by kind:\n")
		for _, k := range bench.SortedKinds(r.ErrorKinds) {
			e := r.ErrorKinds[k]
			fmt.Fprintf(w, "    %-20s %8d  e.g. %s\n", k, e.Count, e.Example)
		}
	}
	if len(r.ErrorClasses)+len(r.SetupErrorClasses) > 0 {
		fmt.Fprintf(w, "  errors by cause:        %s\n", classList(r.ErrorClasses))
		fmt.Fprintf(w, "  setup errors by cause:  %s\n", classList(r.SetupErrorClasses))
	}
	if len(r.SetupErrors) > 0 {
		fmt.Fprintf(w, "  setup errors by kind:\n")
		for _, k := range bench.SortedKinds(r.SetupErrors) {
			e := r.SetupErrors[k]
			fmt.Fprintf(w, "    %-20s %8d  e.g. %s\n", k, e.Count, e.Example)
		}
	}
	fmt.Fprintf(w, "  mcpbench cpu %.2f cores (%.0f%% of %d CPUs)\n", r.CPU.Cores, 100*r.CPU.OfMachine, r.CPU.CPUs)
	for _, k := range sortedKeys(r.Processes) {
		p := r.Processes[k]
		fmt.Fprintf(w, "  %-12s cpu %.2f cores, %.1f µs/op (pid %d)\n", k, p.Cores, p.MicrosPerOp, p.PID)
	}
	if rs := r.Redis; rs != nil {
		fmt.Fprintf(w, "  redis        %.2f commands/%s", rs.CommandsPerOp, rs.Unit)
		if rs.RoundTrips != nil {
			fmt.Fprintf(w, ", %.2f round trips/%s", rs.RoundTripsPerOp, rs.Unit)
		}
		if rs.ReadsPerOp > 0 {
			fmt.Fprintf(w, ", %.2f requests read/%s", rs.ReadsPerOp, rs.Unit)
		}
		fmt.Fprintf(w, " over %.0f %ss; connected clients %d → %d\n", rs.Ops, rs.Unit, rs.ClientsBefore, rs.ClientsAfter)
		if rs.RoundTrips != nil {
			fmt.Fprintf(w, "    round trips: %s\n", perOpList(rs.RoundTrips))
		}
		fmt.Fprintf(w, "    commands:    %s\n", perOpList(rs.Commands))
		for _, sh := range rs.Shards {
			fmt.Fprintf(w, "    primary %s: %.2f commands, %.2f publish, %.2f spublish, %.2f bus publish messages received /%s\n",
				sh.Addr, sh.CommandsPerOp, sh.PublishPerOp, sh.SPublishPerOp, sh.BusPublishPerOp, rs.Unit)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// classList renders counts by error class, largest first ("none" when
// empty).
func classList(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// perOpList renders per-operation counts, largest first.
func perOpList(m map[string]float64) string {
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int {
		switch {
		case m[a] > m[b]:
			return -1
		case m[a] < m[b]:
			return 1
		}
		return 0
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
