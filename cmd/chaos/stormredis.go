package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// stormRedis watches the storm's redis-server and the other processes
// named: their CPU time every 100 ms (from /proc; the harness's own,
// "clients", from getrusage; the whole machine's, "machine", from
// /proc/stat), and once counting (count) Redis's commands.
type stormRedis struct {
	procs   map[string]int // name → pid
	pmu     sync.Mutex     // the probe's connection
	probe   *bench.RedisProbe
	mu      sync.Mutex
	samples []cpuSample
	counted bool // the samples carry commands
	quit    chan struct{}
	done    chan struct{}
}

// redisProc names redis-server among the processes watched,
// clientsProc the harness, and machineProc every process of the
// machine (from /proc/stat).
const (
	redisProc   = "redis-server"
	clientsProc = "clients"
	machineProc = "machine"
)

type cpuSample struct {
	at   time.Time
	cpu  map[string]time.Duration // by process
	cmds map[string]int64         // Redis's commands by type (calls), once counted
}

// watchRedis starts watching s and procs (name → pid).
func watchRedis(s *redistest.Server, procs map[string]int) (*stormRedis, error) {
	r := &stormRedis{procs: map[string]int{redisProc: s.PID()}, quit: make(chan struct{}), done: make(chan struct{})}
	maps.Copy(r.procs, procs)
	if s.PID() == 0 {
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

// take samples the processes' CPU time and, when counted, Redis's
// commands.
func (r *stormRedis) take(counted bool) {
	var cmds map[string]int64
	if counted {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.pmu.Lock()
		cmds, _ = r.probe.CommandStats(ctx)
		r.pmu.Unlock()
		cancel()
	}
	cpu := map[string]time.Duration{clientsProc: bench.SelfCPU().Total()}
	if c, err := bench.MachineCPU(); err == nil {
		cpu[machineProc] = c.Total()
	}
	for name, pid := range r.procs {
		if c, err := bench.ProcCPU(pid); err == nil {
			cpu[name] = c.Total()
		}
	}
	r.mu.Lock()
	r.samples = append(r.samples, cpuSample{at: time.Now(), cpu: cpu, cmds: cmds})
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

// cpuAt is a process's CPU time at t, interpolated between the
// samples around it.
func (r *stormRedis) cpuAt(name string, t time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var prev *cpuSample
	for i := range r.samples {
		s := &r.samples[i]
		c, ok := s.cpu[name]
		if !ok {
			continue
		}
		if !t.After(s.at) {
			if prev == nil {
				return c
			}
			f := float64(t.Sub(prev.at)) / float64(s.at.Sub(prev.at))
			return prev.cpu[name] + time.Duration(f*float64(c-prev.cpu[name]))
		}
		prev = s
	}
	if prev == nil {
		return 0
	}
	return prev.cpu[name]
}

// coreSeconds is the CPU time a process used from a to b, in seconds.
func (r *stormRedis) coreSeconds(name string, a, b time.Time) float64 {
	return (r.cpuAt(name, b) - r.cpuAt(name, a)).Seconds()
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
