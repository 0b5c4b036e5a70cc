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
// every 100 ms, and once counting (count) its commands (INFO
// commandstats) with each sample too.
type stormRedis struct {
	pid     int
	pmu     sync.Mutex // the probe's connection
	probe   *bench.RedisProbe
	mu      sync.Mutex
	samples []cpuSample
	counted bool // the samples carry commands
	quit    chan struct{}
	done    chan struct{}
}

type cpuSample struct {
	at   time.Time
	cpu  time.Duration
	cmds map[string]int64 // Redis's commands by type (calls), once counted
}

func watchRedis(s *redistest.Server) (*stormRedis, error) {
	r := &stormRedis{pid: s.PID(), quit: make(chan struct{}), done: make(chan struct{})}
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
		r.mu.Lock()
		counted := r.counted
		r.mu.Unlock()
		r.take(counted)
		select {
		case <-r.quit:
			return
		case <-t.C:
		}
	}
}

// take samples Redis's CPU time and, when counted, its commands.
func (r *stormRedis) take(counted bool) {
	var cmds map[string]int64
	if counted {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.pmu.Lock()
		cmds, _ = r.probe.CommandStats(ctx)
		r.pmu.Unlock()
		cancel()
	}
	c, err := bench.ProcCPU(r.pid)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.samples = append(r.samples, cpuSample{at: time.Now(), cpu: c.Total(), cmds: cmds})
	r.mu.Unlock()
}

// count has every sample from now on carry Redis's commands, the first
// taken at once.
func (r *stormRedis) count() {
	r.mu.Lock()
	r.counted = true
	r.mu.Unlock()
	r.take(true)
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

// commands is Redis's commands by type from the last sample that
// counted them at or before a to the first at or after b (nil without
// them).
func (r *stormRedis) commands(a, b time.Time) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var from, to map[string]int64
	for _, s := range r.samples {
		if s.cmds == nil {
			continue
		}
		if !s.at.After(a) || from == nil {
			from = s.cmds
		}
		if !s.at.Before(b) {
			to = s.cmds
			break
		}
	}
	if from == nil || to == nil {
		return nil
	}
	return bench.CommandDelta(from, to)
}
