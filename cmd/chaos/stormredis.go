package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// stormRedis watches the storm's redis-server: its CPU time from /proc
// every 100 ms, and INFO commandstats at the moments the run marks.
type stormRedis struct {
	pid     int
	pmu     sync.Mutex // the probe's connection
	probe   *bench.RedisProbe
	mu      sync.Mutex
	samples []cpuSample
	marks   map[string]redisMark
	quit    chan struct{}
	done    chan struct{}
}

type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// redisMark is Redis's commands by type (calls) at a moment.
type redisMark struct {
	at   time.Time
	cmds map[string]int64
}

func watchRedis(s *redistest.Server) (*stormRedis, error) {
	r := &stormRedis{pid: s.PID(), marks: map[string]redisMark{}, quit: make(chan struct{}), done: make(chan struct{})}
	if r.pid == 0 {
		return nil, fmt.Errorf("redis-server is not running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if r.probe, err = bench.DialRedis(ctx, s.URL()); err != nil {
		return nil, err
	}
	go r.sample()
	return r, nil
}

func (r *stormRedis) sample() {
	defer close(r.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if c, err := bench.ProcCPU(r.pid); err == nil {
			r.mu.Lock()
			r.samples = append(r.samples, cpuSample{at: time.Now(), cpu: c.Total()})
			r.mu.Unlock()
		}
		select {
		case <-r.quit:
			return
		case <-t.C:
		}
	}
}

// mark takes Redis's commands now, as name.
func (r *stormRedis) mark(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.pmu.Lock()
	cmds, err := r.probe.CommandStats(ctx)
	r.pmu.Unlock()
	if err != nil {
		return
	}
	r.mu.Lock()
	r.marks[name] = redisMark{at: time.Now(), cmds: cmds}
	r.mu.Unlock()
}

func (r *stormRedis) stop() {
	select {
	case <-r.quit:
	default:
		close(r.quit)
		<-r.done
		r.probe.Close()
	}
}

// cpuAt is Redis's CPU time at t, interpolated between the samples
// around it.
func (r *stormRedis) cpuAt(t time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples
	if len(s) == 0 {
		return 0
	}
	if !t.After(s[0].at) {
		return s[0].cpu
	}
	for i := 1; i < len(s); i++ {
		if !t.After(s[i].at) {
			a, b := s[i-1], s[i]
			f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
			return a.cpu + time.Duration(f*float64(b.cpu-a.cpu))
		}
	}
	return s[len(s)-1].cpu
}

// coreSeconds is the CPU time Redis used from a to b, in seconds.
func (r *stormRedis) coreSeconds(a, b time.Time) float64 {
	return (r.cpuAt(b) - r.cpuAt(a)).Seconds()
}

// commands is Redis's commands by type between two marks (nil when
// either is missing).
func (r *stormRedis) commands(from, to string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok1 := r.marks[from]
	b, ok2 := r.marks[to]
	if !ok1 || !ok2 {
		return nil
	}
	return bench.CommandDelta(a.cmds, b.cmds)
}

// markAt is when a mark was taken (zero when it was not).
func (r *stormRedis) markAt(name string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.marks[name].at
}
