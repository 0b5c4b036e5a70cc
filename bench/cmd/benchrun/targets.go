package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var metricsLine = regexp.MustCompile(`(?m)^metrics on http://([0-9.:]+)/metrics`)

// pprofLine is a peer's /debug/pprof listener (bench/peers/serve,
// --pprof-addr).
var pprofLine = regexp.MustCompile(`(?m)^pprof on http://([0-9.:]+)/debug/pprof/`)

// target is one configuration under test: mcpcluster in one of its
// deployments, a peer SDK, or the net/http ceiling.
type target struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	// Ours is true for mcpcluster configurations.
	Ours bool `json:"ours"`
	// Peer is true for the SDK peers (the best of them is the reference).
	Peer bool `json:"peer"`
	// Modern is true when the target serves 2026-07-28.
	Modern bool `json:"modern"`
	// Scenarios lists what the target can run (nil: every scenario).
	Scenarios []string `json:"scenarios,omitempty"`
	Nodes     int      `json:"nodes"`
	Redis     bool     `json:"redis"`
	// Far is true when the nodes reach Redis through toxiproxy with
	// farLatency added each way; PingDirect and PingFar are the PING
	// round trips measured at start (ms, medians).
	Far        bool    `json:"far,omitempty"`
	PingDirect float64 `json:"ping_direct_ms,omitempty"`
	PingFar    float64 `json:"ping_far_ms,omitempty"`
	// ScaleOnly marks a target that only the scale runs use.
	ScaleOnly bool `json:"scale_only,omitempty"`
	// Replica is true when Redis has a replica (the nodes wait for it
	// with --redis-wait-replicas 1).
	Replica bool `json:"replica,omitempty"`

	urls     []string
	nodes    []*proc
	redis    *proc
	replica  *proc
	redisURL string // Redis itself, for the probes
	proxy    *redisProxy
	// metrics are the nodes' metrics listeners (host:port), which
	// serve /debug/pprof (--pprof); for the SDK peers, their
	// --pprof-addr listeners.
	metrics []string
	// extraArgs are added to every node's command line.
	extraArgs []string
}

// supports reports whether the target can run scenario.
func (t *target) supports(scenario string) bool {
	if t.Scenarios == nil {
		return true
	}
	for _, s := range t.Scenarios {
		if s == scenario {
			return true
		}
	}
	return false
}

// pids lists the processes mcpbench watches, as NAME=PID.
func (t *target) pidArgs() []string {
	var out []string
	for i, n := range t.nodes {
		out = append(out, "--pid", fmt.Sprintf("node%d=%d", i+1, n.pid()))
	}
	if t.redis != nil {
		out = append(out, "--pid", "redis="+strconv.Itoa(t.redis.pid()))
	}
	return out
}

func (t *target) stop() {
	for _, n := range t.nodes {
		n.stop()
	}
	if t.proxy != nil {
		t.proxy.stop()
	}
	if t.replica != nil {
		t.replica.stop()
	}
	if t.redis != nil {
		t.redis.stop()
	}
}

// binaries are the programs a run needs, built once.
type binaries struct {
	server, mcpbench, gosdk, mcpgo, ceiling string
}

// build compiles the reference node, mcpbench and the peers into dir.
func build(root, dir string, logf func(string, ...any)) (*binaries, error) {
	b := &binaries{
		server:   filepath.Join(dir, "server"),
		mcpbench: filepath.Join(dir, "mcpbench"),
		gosdk:    filepath.Join(dir, "peer-gosdk"),
		mcpgo:    filepath.Join(dir, "peer-mcpgo"),
		ceiling:  filepath.Join(dir, "peer-ceiling"),
	}
	steps := []struct{ dir, out, pkg string }{
		{root, b.server, "./cmd/server"},
		{root, b.mcpbench, "./cmd/mcpbench"},
		{filepath.Join(root, "bench"), b.gosdk, "./peers/gosdk"},
		{filepath.Join(root, "bench"), b.mcpgo, "./peers/mcpgo"},
		{filepath.Join(root, "bench"), b.ceiling, "./peers/ceiling"},
	}
	for _, s := range steps {
		logf("go build -o %s %s", filepath.Base(s.out), s.pkg)
		cmd := exec.Command("go", "build", "-o", s.out, s.pkg)
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", s.pkg, err, out)
		}
	}
	return b, nil
}

// startTargets starts every configuration on loopback.
func startTargets(bins *binaries, dir string, want map[string]bool, logf func(string, ...any)) ([]*target, error) {
	key := randomKey()
	var out []*target
	fail := func(err error) ([]*target, error) {
		for _, t := range out {
			t.stop()
		}
		return nil, err
	}
	node := func(t *target, i int, redisURL string) error {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		// The per-caller limits are checked on every request (their cost
		// is measured) at bounds the load never reaches: every bench
		// client is the same address, and the fan-out holds 1000 streams
		// plus its control session.
		args := []string{"--addr", addr, "--node-id", fmt.Sprintf("%s-%d", t.Key, i+1), "--state-key", key, "--log-level", "warn", "--metrics-addr", "127.0.0.1:0", "--pprof",
			"--caller-rate", "100000000", "--caller-burst", "100000000",
			"--caller-max-sessions", "5000", "--caller-max-streams", "5000",
			// The tasks scenario keeps every task it ran for --task-ttl.
			"--max-tasks-per-owner", "10000000", "--task-ttl", "10s"}
		if redisURL != "" {
			args = append(args, "--redis-url", redisURL)
		}
		args = append(args, t.extraArgs...)
		p, err := startProc(fmt.Sprintf("%s node %d", t.Key, i+1), bins.server, args, "listening on", "")
		if err != nil {
			return err
		}
		if m := metricsLine.FindStringSubmatch(p.logs.String()); m != nil {
			t.metrics = append(t.metrics, m[1])
		}
		t.nodes = append(t.nodes, p)
		t.urls = append(t.urls, "http://"+addr+"/mcp")
		return nil
	}
	peer := func(t *target, bin string) error {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		args := []string{"--addr", addr}
		// The SDK peers serve /debug/pprof on a loopback listener of
		// their own, for the goal profiles and the goroutine counts.
		if t.Peer {
			args = append(args, "--pprof-addr", "127.0.0.1:0")
		}
		p, err := startProc(t.Key, bin, args, "listening on", "")
		if err != nil {
			return err
		}
		if m := pprofLine.FindStringSubmatch(p.logs.String()); m != nil {
			t.metrics = append(t.metrics, m[1])
		}
		t.nodes = append(t.nodes, p)
		t.urls = append(t.urls, "http://"+addr+"/mcp")
		return nil
	}
	defs := []*target{
		{Key: "mem", Label: "mcpcluster, 1 node, memory", Ours: true, Modern: true, Nodes: 1},
		{Key: "redis", Label: "mcpcluster, 1 node, Redis", Ours: true, Modern: true, Nodes: 1, Redis: true},
		{Key: "redis3", Label: "mcpcluster, 3 nodes, Redis", Ours: true, Modern: true, Nodes: 3, Redis: true},
		{Key: "redis-far", Label: "mcpcluster, 1 node, Redis +0.5 ms", Ours: true, Modern: true, Nodes: 1, Redis: true, Far: true},
		{Key: "redis3-far", Label: "mcpcluster, 3 nodes, Redis +0.5 ms", Ours: true, Modern: true, Nodes: 3, Redis: true, Far: true},
		// The cost of --redis-wait-replicas: each write a client is told
		// of waits for the replica (WAIT 1).
		{Key: "redis-wait", Label: "mcpcluster, 1 node, Redis + replica, --redis-wait-replicas 1", Ours: true, Modern: true, Nodes: 1, Redis: true, Replica: true,
			extraArgs: []string{"--redis-wait-replicas", "1"}},
		// What --redis-append-linger buys and costs: the streamed calls
		// with a 1 ms window for company.
		{Key: "redis-linger", Label: "mcpcluster, 1 node, Redis, --redis-append-linger 1ms", Ours: true, Nodes: 1, Redis: true,
			Scenarios: []string{"progress", "sampling", pacedScenario}, extraArgs: []string{"--redis-append-linger", "1ms"}},
		// 10,000 sessions exceed a deployment's default cap on sessions
		// (10,000) with the control session; a node's default cap on open
		// streams (5,000) holds a third of them. They all come from one
		// address, one caller, which may hold at most half of the cap.
		{Key: "redis3-scale", Label: "mcpcluster, 3 nodes, Redis (scale runs)", Ours: true, Modern: true, Nodes: 3, Redis: true, ScaleOnly: true,
			extraArgs: []string{"--max-sessions", "30000", "--caller-max-sessions", "15000", "--caller-max-streams", "15000"}},
		{Key: "gosdk", Label: "go-sdk " + gosdkVersion, Peer: true, Nodes: 1},
		{Key: "mcpgo", Label: "mcp-go " + mcpgoVersion, Peer: true, Modern: true, Nodes: 1},
		{Key: "ceiling", Label: "ceiling (net/http)", Nodes: 1, Scenarios: []string{"echo", "churn"}},
	}
	for _, t := range defs {
		if want != nil && !want[t.Key] {
			continue
		}
		out = append(out, t)
		logf("starting %s", t.Label)
		if t.Redis {
			p, url, err := startRedis("redis-"+t.Key, dir)
			if err != nil {
				return fail(err)
			}
			t.redis, t.redisURL = p, url
			if t.Replica {
				r, err := startReplica("redis-"+t.Key+"-replica", dir, url)
				if err != nil {
					return fail(err)
				}
				t.replica = r
			}
		}
		nodeRedis := t.redisURL
		if t.Far {
			px, err := startRedisProxy(t.Key, strings.TrimPrefix(t.redisURL, "redis://"), farLatency)
			if err != nil {
				return fail(err)
			}
			t.proxy, nodeRedis = px, "redis://"+px.addr
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			t.PingDirect, err = pingRTT(ctx, t.redisURL, 500)
			if err == nil {
				t.PingFar, err = pingRTT(ctx, nodeRedis, 500)
			}
			cancel()
			if err != nil {
				return fail(fmt.Errorf("%s: PING through toxiproxy: %w", t.Key, err))
			}
			logf("%s: Redis PING p50 %.3f ms direct, %.3f ms through toxiproxy", t.Key, t.PingDirect, t.PingFar)
		}
		var err error
		switch t.Key {
		case "gosdk":
			err = peer(t, bins.gosdk)
		case "mcpgo":
			err = peer(t, bins.mcpgo)
		case "ceiling":
			err = peer(t, bins.ceiling)
		default:
			for i := 0; i < t.Nodes && err == nil; i++ {
				err = node(t, i, nodeRedis)
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// Versions of the peers, as pinned in bench/go.mod.
var gosdkVersion, mcpgoVersion = "?", "?"

// readPeerVersions takes the peers' versions from bench/go.mod.
func readPeerVersions(root string) {
	b, err := os.ReadFile(filepath.Join(root, "bench", "go.mod"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "github.com/modelcontextprotocol/go-sdk":
			gosdkVersion = f[1]
		case "github.com/mark3labs/mcp-go":
			mcpgoVersion = f[1]
		}
	}
}
