package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
)

// The soak (make soak): the chaos load for a long time (an hour by
// default), a fault every -soak-fault-every drawn in turn from the other
// scenarios' (a kill -9, a rolling restart of one node, Redis latency, a
// cut of one node's link to Redis, a Redis restart), and every 10 s each
// node's RSS, heap, goroutines and open files and Redis's key count and
// memory, written to -soak-out (samples.csv, and soak.md with the slope
// of each over the run's last three quarters, when things are warm).
// What leaks grows; what is bounded stays flat beyond noise.

var (
	soakFaultEvery = flag.Duration("soak-fault-every", 4*time.Minute, "the soak scenario's time between faults")
	soakOut        = flag.String("soak-out", "docs/soak", "directory of the soak scenario's samples.csv, and soak.md")
)

// soakTaskTTL is the nodes' --task-ttl in the soak.
const soakTaskTTL = 10 * time.Minute

func init() {
	scenarios = append(scenarios, scenario{"soak", "the load for -duration with a fault every -soak-fault-every (kill -9, a node's rolling restart, Redis latency, a node's Redis link cut, a Redis restart), sampling each node and Redis every 10 s",
		func(e *env, o *clustertest.Options) {
			withToxics(e, o)
			// A task's record lives --task-ttl (an hour by default) when
			// the client names no TTL, as the 2026-07-28 extension's
			// clients here do: ten minutes lets the hour show the bound.
			o.Args = append(o.Args, "--task-ttl", soakTaskTTL.String())
		},
		soak})
}

// soakFaults are drawn in turn; each returns once the fault is over.
var soakFaults = []struct {
	name string
	run  func(e *env, i int)
}{
	{"kill -9", func(e *env, i int) {
		n := e.c.Nodes[i%len(e.c.Nodes)]
		n.Kill()
		time.Sleep(3 * time.Second)
		n.Restart()
	}},
	{"rolling restart of one node", func(e *env, i int) { cycle(e, i%len(e.c.Nodes), true, (*clustertest.Node).Restart) }},
	{"Redis latency 300±100 ms for 10 s", func(e *env, _ int) {
		e.tox.add(e.h, `{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":300,"jitter":100}}`)
		time.Sleep(10 * time.Second)
		e.tox.remove(e.h, "lat")
	}},
	{"one node's Redis link cut for 10 s", func(e *env, i int) { cut(e, 10*time.Second, i%len(e.c.Nodes)) }},
	{"Redis restart (empty)", func(e *env, _ int) {
		e.c.Redis.Kill()
		time.Sleep(5 * time.Second)
		e.c.Redis.Restart()
	}},
}

// soakSample is one sampling round.
type soakSample struct {
	at    time.Duration
	nodes []soakNode
	keys  float64 // Redis DBSIZE
	mem   float64 // Redis used_memory, MiB
}

type soakNode struct{ rss, heap, goroutines, fds float64 }

func soak(ctx context.Context, e *env) {
	start := time.Now()
	var mu sync.Mutex
	var samples []soakSample
	var faults []string
	rc := goredis.NewClient(&goredis.Options{Addr: e.c.Redis.Addr(), MaxRetries: -1})
	defer rc.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			s := soakSample{at: time.Since(start)}
			for _, n := range e.c.Nodes {
				s.nodes = append(s.nodes, readSoakNode(n))
			}
			s.keys, s.mem = redisFigures(rc)
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	for i := 0; sleep(ctx, *soakFaultEvery); i++ {
		f := soakFaults[i%len(soakFaults)]
		e.fault()
		e.h.Logf("soak: %s at %s", f.name, time.Since(start).Round(time.Second))
		f.run(e, i)
		mu.Lock()
		faults = append(faults, fmt.Sprintf("%s at %s", f.name, time.Since(start).Round(time.Second)))
		mu.Unlock()
	}
	wg.Wait()
	if err := writeSoak(*soakOut, samples, faults, len(e.c.Nodes)); err != nil {
		e.h.Logf("soak: %v", err)
	}
}

// readSoakNode reads a node's figures from its metrics.
func readSoakNode(n *clustertest.Node) soakNode {
	m := readMetrics(n)
	return soakNode{rss: m["process_resident_memory_bytes"] / (1 << 20), heap: m["go_memstats_heap_inuse_bytes"] / (1 << 20),
		goroutines: m["go_goroutines"], fds: m["process_open_fds"]}
}

// redisFigures returns Redis's key count and memory (MiB); zeros while
// it does not answer.
func redisFigures(rc *goredis.Client) (keys, memMiB float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if n, err := rc.DBSize(ctx).Result(); err == nil {
		keys = float64(n)
	}
	if v, ok := redisInfo(rc, "memory")["used_memory"]; ok {
		b, _ := strconv.ParseFloat(v, 64)
		memMiB = b / (1 << 20)
	}
	return keys, memMiB
}

// series are the soak's columns: a name, a unit, and the value of a
// sample (node i, or Redis when i is -1).
var series = []struct {
	name, unit string
	node       bool
	get        func(s soakSample, i int) float64
}{
	{"RSS", "MiB", true, func(s soakSample, i int) float64 { return s.nodes[i].rss }},
	{"heap in use", "MiB", true, func(s soakSample, i int) float64 { return s.nodes[i].heap }},
	{"goroutines", "", true, func(s soakSample, i int) float64 { return s.nodes[i].goroutines }},
	{"open files", "", true, func(s soakSample, i int) float64 { return s.nodes[i].fds }},
	{"Redis keys", "", false, func(s soakSample, _ int) float64 { return s.keys }},
	{"Redis memory", "MiB", false, func(s soakSample, _ int) float64 { return s.mem }},
}

// writeSoak writes the samples, and the slopes over the last three
// quarters of the run (least squares, per hour) beside the mean there.
func writeSoak(dir string, samples []soakSample, faults []string, nodes int) error {
	if len(samples) < 4 {
		return fmt.Errorf("%d samples: too few for a slope", len(samples))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("seconds")
	for _, c := range series {
		for i := 0; i < nodes && c.node; i++ {
			fmt.Fprintf(&csv, ",node%d %s", i+1, c.name)
		}
		if !c.node {
			fmt.Fprintf(&csv, ",%s", c.name)
		}
	}
	csv.WriteString("\n")
	for _, s := range samples {
		fmt.Fprintf(&csv, "%.0f", s.at.Seconds())
		for _, c := range series {
			for i := 0; i < nodes && c.node; i++ {
				fmt.Fprintf(&csv, ",%.2f", c.get(s, i))
			}
			if !c.node {
				fmt.Fprintf(&csv, ",%.2f", c.get(s, -1))
			}
		}
		csv.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "samples.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	warm := samples[len(samples)/4:]
	span := warm[len(warm)-1].at - warm[0].at
	var md strings.Builder
	fmt.Fprintf(&md, "Soak of %s, %d samples, nodes with --task-ttl %s; slopes over the last %s (least squares), beside the mean there, and the highest value in each of the last three quarters (a leak raises each quarter's peak; a bounded figure peaks alike after every fault). Faults: %s.\n\n",
		samples[len(samples)-1].at.Round(time.Minute), len(samples), soakTaskTTL, span.Round(time.Minute), strings.Join(faults, ", "))
	md.WriteString("| series | mean | slope per hour | slope per hour, % of the mean | peak, 2nd quarter | 3rd | 4th |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range series {
		cols := []int{-1}
		if c.node {
			cols = nil
			for i := range nodes {
				cols = append(cols, i)
			}
		}
		for _, i := range cols {
			name := c.name
			if i >= 0 {
				name = fmt.Sprintf("node%d %s", i+1, c.name)
			}
			get := func(s soakSample) float64 { return c.get(s, i) }
			mean, slope := fit(warm, get)
			pct := 0.0
			if mean != 0 {
				pct = 100 * slope / mean
			}
			q := len(samples) / 4
			fmt.Fprintf(&md, "| %s | %.1f %s | %+.2f %s | %+.1f%% | %.1f | %.1f | %.1f |\n", name, mean, c.unit, slope, c.unit, pct,
				peak(samples[q:2*q], get), peak(samples[2*q:3*q], get), peak(samples[3*q:], get))
		}
	}
	return os.WriteFile(filepath.Join(dir, "soak.md"), []byte(md.String()), 0o644)
}

// fit returns the mean of v over samples and its least-squares slope per
// hour.
func fit(samples []soakSample, v func(soakSample) float64) (mean, perHour float64) {
	var sx, sy, sxx, sxy float64
	n := float64(len(samples))
	for _, s := range samples {
		x, y := s.at.Hours(), v(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	mean = sy / n
	if d := n*sxx - sx*sx; d != 0 {
		perHour = (n*sxy - sx*sy) / d
	}
	return mean, perHour
}

// peak is the highest value of v over samples.
func peak(samples []soakSample, v func(soakSample) float64) float64 {
	m := 0.0
	for _, s := range samples {
		m = max(m, v(s))
	}
	return m
}
