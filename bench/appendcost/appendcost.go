// Package appendcost measures what appending one event to a stream's
// history costs Redis: the backend's append script (appendBatchScript of
// internal/cluster/redis) and variants of it, replayed with the
// arguments the backend sends against a redis-server of its own, side by
// side in rounds, with Redis's CPU read from /proc.
package appendcost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	credis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
)

// Options are the parameters of a measurement.
type Options struct {
	Rounds  int           // rounds of every variant in every mode
	Window  time.Duration // each back-to-back measurement
	Paced   time.Duration // each paced measurement
	Streams int           // streams of the concurrent modes
}

// DefaultOptions take about a minute and a half.
func DefaultOptions() Options {
	return Options{Rounds: 3, Window: 400 * time.Millisecond, Paced: 3 * time.Second, Streams: 16}
}

// Result is one run's figures.
type Result struct {
	Redis    string    `json:"redis"`
	Started  time.Time `json:"started"`
	Options  Options   `json:"options"`
	Variants []Variant `json:"variants"`
	Modes    []string  `json:"modes"`
	// Cells holds, per mode then per variant (in the order of Modes and
	// Variants), the median of the rounds.
	Cells [][]Cell `json:"cells"`
	// IdleUsPerSec is the CPU per second of Redis's main thread with its
	// clients connected and nothing sent: the cron's own cost.
	IdleUsPerSec float64 `json:"idle_us_per_s"`
	Err          string  `json:"error,omitempty"`
}

// Variant is one script measured.
type Variant struct {
	Name string `json:"name"`
	What string `json:"what"`
	src  string
	sha  string
}

// Cell is what one call of a variant cost in one mode.
type Cell struct {
	Calls int64 `json:"calls"`
	// ProcUs is Redis's CPU per call from /proc/PID/stat (every thread,
	// 10 ms ticks); MainUs from /proc/PID/schedstat (the main thread, ns).
	ProcUs float64 `json:"proc_us"`
	MainUs float64 `json:"main_us"`
	// ScriptUs is the EVALSHA's own time per call (INFO commandstats
	// usec ÷ calls): the script's work, inside Redis's call().
	ScriptUs float64 `json:"script_us"`
	// Reads is INFO stats total_reads_processed per call.
	Reads float64 `json:"reads"`
	// Commands are the commands executed per call, by name (the
	// EVALSHA and those its script ran), with their usec per call.
	Commands map[string]CommandCost `json:"commands,omitempty"`
}

// CommandCost is one command's share of a call.
type CommandCost struct {
	Calls  float64 `json:"calls"`
	UsecPC float64 `json:"usec_per_call"`
}

// Mode names.
const (
	ModeOne      = "one stream, back to back"
	ModeConc     = "16 streams, 16 connections"
	ModePipeline = "16 streams, one pipeline"
	ModePaced    = "one stream, paced 20 ms"
	ModePaced16  = "16 streams, each paced 20 ms"
)

// pace is the paced modes' pause between a stream's events, the paced
// progress call's delayMs.
const pace = 20 * time.Millisecond

// variants derives the variants from the backend's script. A variant
// whose edit no longer applies is an error: the script changed and the
// edit must follow it.
func variants() ([]Variant, error) {
	src := credis.AppendBatchSource()
	var errs []error
	edit := func(s, old, repl string) string {
		if strings.Count(s, old) != 1 {
			errs = append(errs, fmt.Errorf("the append script no longer holds %q once", old))
			return s
		}
		return strings.Replace(s, old, repl, 1)
	}
	noLRU := edit(src, "  touch_lru(KEYS[3], ARGV[2], ttl, tonumber(ARGV[5]), ARGV[7], ARGV[8], now)\n", "")
	noLRU = edit(noLRU, "    redis.call('ZADD', KEYS[3], string.format('%.0f', now), ARGV[2])\n", "")
	noTok := edit(src, "local at = string.find(toks, tok, 1, true)", "local at = nil")
	if i, j := strings.Index(noTok, "if ARGV[3] == '1' then\n  toks = tok .. first"), strings.Index(noTok, "local now = now_us()\nlocal refresh"); i < 0 || j < i {
		errs = append(errs, errors.New("the append script no longer builds its tokens before the refresh"))
	} else {
		noTok = noTok[:i] + "toks = ''\n" + noTok[j:]
	}
	// The meta without owner, request and toks; touched is kept, or every
	// append would refresh the TTLs and the LRU.
	fewer := edit(src, "redis.call('HSET', KEYS[1], unpack(fields))",
		"if refresh then redis.call('HSET', KEYS[1], 'last', last, 'done', ARGV[3], 'touched', math.floor(now / 1000)) else redis.call('HSET', KEYS[1], 'last', last, 'done', ARGV[3]) end")
	// Both: no token string and the HSET of last and done.
	lean := edit(noTok, "redis.call('HSET', KEYS[1], unpack(fields))",
		"if refresh then redis.call('HSET', KEYS[1], 'last', last, 'done', ARGV[3], 'touched', math.floor(now / 1000)) else redis.call('HSET', KEYS[1], 'last', last, 'done', ARGV[3]) end")
	vs := []Variant{
		{Name: "as is", What: "the backend's append script", src: src},
		{Name: "no LRU touch", What: "without touch_lru at a refresh and the final's ZADD", src: noLRU},
		{Name: "no token string", What: "without the search and rewrite of the tokens (toks written empty)", src: noTok},
		{Name: "HSET of 2 fields", What: "the meta's HSET writes last and done (and touched at a refresh), not owner, request and toks", src: fewer},
		{Name: "lean", What: "no token string and the HSET of 2 fields together", src: lean},
		{Name: "RPUSH only", What: "`return redis.call('RPUSH', KEYS[2], ARGV[14])`, same keys and arguments", src: "return redis.call('RPUSH', KEYS[2], ARGV[14])"},
		{Name: "trivial script", What: "`return 1`, same keys and arguments", src: "return 1"},
	}
	return vs, errors.Join(errs...)
}

// Measure starts a redis-server on a free loopback port, measures every
// variant in every mode and stops the server.
func Measure(ctx context.Context, opt Options) *Result {
	res := &Result{Started: time.Now().UTC(), Options: opt, Modes: []string{ModeOne, ModeConc, ModePipeline, ModePaced, ModePaced16}}
	if err := measure(ctx, opt, res); err != nil {
		res.Err = err.Error()
	}
	return res
}

func measure(ctx context.Context, opt Options, res *Result) error {
	vs, err := variants()
	if err != nil {
		return err
	}
	srv, err := startServer()
	if err != nil {
		return err
	}
	defer srv.stop()
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		res.Redis = strings.TrimSpace(string(out))
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.addr, PoolSize: opt.Streams + 2, MinIdleConns: opt.Streams + 1})
	defer c.Close()
	for i := range vs {
		if vs[i].sha, err = c.ScriptLoad(ctx, vs[i].src).Result(); err != nil {
			return fmt.Errorf("%s: %w", vs[i].Name, err)
		}
	}
	res.Variants = vs
	// Open every connection before the idle window.
	var wg sync.WaitGroup
	for range opt.Streams + 1 {
		wg.Go(func() { c.Ping(ctx) })
	}
	wg.Wait()
	probe, err := bench.DialRedis(ctx, "redis://"+srv.addr)
	if err != nil {
		return err
	}
	defer probe.Close()
	m := &meter{pid: srv.pid, probe: probe}
	if res.IdleUsPerSec, err = m.idle(ctx, 2*time.Second); err != nil {
		return err
	}
	rounds := make([][][]Cell, len(res.Modes))
	for mi := range res.Modes {
		rounds[mi] = make([][]Cell, len(vs))
	}
	gen := 0
	for range opt.Rounds {
		for mi, mode := range res.Modes {
			for vi, v := range vs {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if (mode == ModePaced || mode == ModePaced16) && v.Name != "as is" && v.Name != "trivial script" && v.Name != "lean" && v.Name != "RPUSH only" {
					continue
				}
				gen++
				w := &workload{c: c, sha: v.sha, gen: gen}
				var run func(context.Context) (int64, error)
				switch mode {
				case ModeOne:
					run = func(ctx context.Context) (int64, error) { return w.serial(ctx, 0, opt.Window, 0) }
				case ModeConc:
					run = func(ctx context.Context) (int64, error) { return w.concurrent(ctx, opt.Streams, opt.Window) }
				case ModePipeline:
					run = func(ctx context.Context) (int64, error) { return w.pipelined(ctx, opt.Streams, opt.Window) }
				case ModePaced:
					run = func(ctx context.Context) (int64, error) { return w.serial(ctx, 0, opt.Paced, pace) }
				case ModePaced16:
					run = func(ctx context.Context) (int64, error) { return w.concurrentPaced(ctx, opt.Streams, opt.Paced) }
				}
				cell, err := m.measure(ctx, run)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", mode, v.Name, err)
				}
				rounds[mi][vi] = append(rounds[mi][vi], cell)
			}
		}
	}
	res.Cells = make([][]Cell, len(res.Modes))
	for mi := range res.Modes {
		res.Cells[mi] = make([]Cell, len(vs))
		for vi := range vs {
			res.Cells[mi][vi] = median(rounds[mi][vi])
		}
	}
	return nil
}

// median is the round with the median Redis CPU per call (its figures
// kept together).
func median(cs []Cell) Cell {
	if len(cs) == 0 {
		return Cell{}
	}
	s := slices.Clone(cs)
	slices.SortFunc(s, func(a, b Cell) int {
		switch {
		case a.ProcUs < b.ProcUs:
			return -1
		case a.ProcUs > b.ProcUs:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

// workload appends progress-call-sized streams: each stream is opened by
// its first append and ended by its 12th (10 notifications, a log
// message and the result), as a paced progress call's POST stream is.
type workload struct {
	c   *goredis.Client
	sha string
	gen int
}

// event is a progress notification as the node stores it.
const event = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"bench-7-3","progress":4,"total":10,"message":"step 4"}}`

// eventsPerStream is a progress call of the demo tool: 10 notifications,
// its closing log message and the result.
const eventsPerStream = 12

// stream is one stream's producer state.
type stream struct {
	session, id string
	n, seq      int
}

func (w *workload) newStream(worker, k int) *stream {
	return &stream{session: fmt.Sprintf("s%d-%d", w.gen, worker), id: fmt.Sprintf("x%d-%d-%d", w.gen, worker, k)}
}

// args are the keys and arguments the backend's AppendBatch sends for
// one event of s (a single server: with the owner key), and s advances.
func (s *stream) args() ([]string, []any) {
	pfx := "mcpc:{" + s.session + "}:"
	keys := []string{pfx + "m:" + s.id, pfx + "e:" + s.id, pfx + "lru", "mcpc:x:" + s.id}
	s.n++
	final, open := "0", "0"
	if s.n == eventsPerStream {
		final = "1"
	}
	owner, request := "", ""
	if s.n == 1 {
		open, owner, request = "1", "node-1", "7"
	}
	args := []any{s.session, s.id, final, 1000, 100, 3600000, pfx, "mcpc:f:node-1:", "tok" + strconv.Itoa(s.n) + s.id,
		open, owner, request, strconv.Itoa(s.seq + 1), event}
	s.seq++
	return keys, args
}

// serial appends from one connection, one call at a time, each pace
// apart, until d passed.
func (w *workload) serial(ctx context.Context, worker int, d, pace time.Duration) (int64, error) {
	end := time.Now().Add(d)
	var calls int64
	k := 0
	s := w.newStream(worker, k)
	for time.Now().Before(end) {
		if s.n == eventsPerStream {
			k++
			s = w.newStream(worker, k)
		}
		keys, args := s.args()
		if err := w.c.EvalSha(ctx, w.sha, keys, args...).Err(); err != nil {
			return calls, err
		}
		calls++
		if pace > 0 {
			time.Sleep(pace)
		}
	}
	return calls, nil
}

func (w *workload) concurrent(ctx context.Context, n int, d time.Duration) (int64, error) {
	return w.parallel(ctx, n, d, 0)
}

// concurrentPaced runs n paced streams, their starts spread over one
// pace.
func (w *workload) concurrentPaced(ctx context.Context, n int, d time.Duration) (int64, error) {
	return w.parallel(ctx, n, d, pace)
}

func (w *workload) parallel(ctx context.Context, n int, d, pace time.Duration) (int64, error) {
	calls := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if pace > 0 {
				time.Sleep(pace * time.Duration(i) / time.Duration(n))
			}
			calls[i], errs[i] = w.serial(ctx, i, d, pace)
		})
	}
	wg.Wait()
	var sum int64
	for _, c := range calls {
		sum += c
	}
	return sum, errors.Join(errs...)
}

// pipelined appends one event to each of n streams in one pipeline, as
// the batcher sends the appends of n streams that waited together.
func (w *workload) pipelined(ctx context.Context, n int, d time.Duration) (int64, error) {
	end := time.Now().Add(d)
	ss := make([]*stream, n)
	ks := make([]int, n)
	for i := range ss {
		ss[i] = w.newStream(i, 0)
	}
	var calls int64
	for time.Now().Before(end) {
		p := w.c.Pipeline()
		for i, s := range ss {
			if s.n == eventsPerStream {
				ks[i]++
				ss[i] = w.newStream(i, ks[i])
				s = ss[i]
			}
			keys, args := s.args()
			p.EvalSha(ctx, w.sha, keys, args...)
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			return calls, err
		}
		calls += int64(len(cmds))
	}
	return calls, nil
}

// meter reads Redis's CPU and counters around a measurement.
type meter struct {
	pid   int
	probe *bench.RedisProbe
}

type reading struct {
	proc  time.Duration
	main  time.Duration
	reads int64
	stats map[string]CommandCost // cumulative calls and usec
}

func (m *meter) read(ctx context.Context) (reading, error) {
	var r reading
	info, err := m.probe.Info(ctx, "commandstats")
	if err != nil {
		return r, err
	}
	r.stats = commandStats(info)
	if r.reads, err = m.probe.ReadsProcessed(ctx); err != nil {
		return r, err
	}
	cpu, err := bench.ProcCPU(m.pid)
	if err != nil {
		return r, err
	}
	r.proc = cpu.Total()
	r.main, err = schedCPU(m.pid)
	return r, err
}

// commandStats reads calls and usec of each command from INFO
// commandstats, by the command's name in upper case.
func commandStats(info map[string]string) map[string]CommandCost {
	out := map[string]CommandCost{}
	for name, c := range bench.ParseCommandCosts(info) {
		out[strings.ToUpper(name)] = CommandCost{Calls: float64(c.Calls), UsecPC: float64(c.Usec)} // usec: the total until delta divides it
	}
	return out
}

// probeCommands are the meter's own commands, left out of the deltas.
var probeCommands = map[string]bool{"INFO": true, "SCRIPT|LOAD": true}

func (m *meter) measure(ctx context.Context, run func(context.Context) (int64, error)) (Cell, error) {
	before, err := m.read(ctx)
	if err != nil {
		return Cell{}, err
	}
	calls, err := run(ctx)
	if err != nil {
		return Cell{}, err
	}
	after, err := m.read(ctx)
	if err != nil {
		return Cell{}, err
	}
	if calls == 0 {
		return Cell{}, errors.New("no calls")
	}
	n := float64(calls)
	c := Cell{
		Calls:    calls,
		ProcUs:   float64((after.proc - before.proc).Microseconds()) / n,
		MainUs:   float64((after.main - before.main).Nanoseconds()) / 1000 / n,
		Reads:    float64(after.reads-before.reads-2) / n, // the probe's INFO stats and INFO commandstats
		Commands: map[string]CommandCost{},
	}
	for name, a := range after.stats {
		if probeCommands[name] {
			continue
		}
		b := before.stats[name]
		dc, du := a.Calls-b.Calls, a.UsecPC-b.UsecPC
		if dc <= 0 {
			continue
		}
		c.Commands[name] = CommandCost{Calls: dc / n, UsecPC: du / dc}
		if name == "EVALSHA" {
			c.ScriptUs = du / n
		}
	}
	return c, nil
}

// idle is Redis's CPU per second, in µs, while nothing is sent.
func (m *meter) idle(ctx context.Context, d time.Duration) (float64, error) {
	before, err := schedCPU(m.pid)
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	after, err := schedCPU(m.pid)
	if err != nil {
		return 0, err
	}
	return float64((after - before).Nanoseconds()) / 1000 / d.Seconds(), nil
}

// schedCPU is the CPU time of pid's main thread, from
// /proc/PID/schedstat (ns resolution).
func schedCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", pid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err
}

// server is the throwaway redis-server.
type server struct {
	cmd  *exec.Cmd
	addr string
	pid  int
	dir  string
}

func startServer() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (Debian: apt-get install redis-server): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "appendcost-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{cmd: cmd, addr: addr, pid: cmd.Process.Pid, dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bench.WaitRedis(ctx, "redis://"+addr); err != nil {
		s.stop()
		return nil, fmt.Errorf("redis-server does not answer PING: %w", err)
	}
	return s, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}
