package main

import (
	"strings"
	"testing"
	"time"
)

func TestStormCheck(t *testing.T) {
	clean := func() *stormFigures {
		f := &stormFigures{}
		f.Streams.Opened, f.Streams.OnVictim, f.Streams.Cut, f.Streams.Resumed = 30, 10, 10, 10
		f.Streams.Resume.Max = 4000
		f.Calls.Started, f.Calls.Completed, f.Calls.Errors = 6, 4, map[string]int{"200 -31003": 2}
		f.Calls.Cut, f.Calls.OutcomeAt.Max = 2, 700
		f.Redis.CoreSecondsRecovery = 0.8
		return f
	}
	o := stormOptions{streams: 30, calls: 6}
	f := clean()
	f.check(o)
	if len(f.Failures) != 0 {
		t.Fatalf("a clean run failed: %v", f.Failures)
	}
	for _, g := range f.Goals {
		if !g.Met {
			t.Errorf("goal %q not met in a clean run: %s", g.Goal, g.Got)
		}
	}
	for what, spoil := range map[string]func(f *stormFigures){
		"events lost":        func(f *stormFigures) { f.Streams.Lost = 1 },
		"duplicated":         func(f *stormFigures) { f.Calls.Duplicated = 1 },
		"never resumed":      func(f *stormFigures) { f.Streams.NeverResumed, f.Streams.Resumed = 1, 9 },
		"seen cut":           func(f *stormFigures) { f.Streams.Cut = 9 },
		"without the last":   func(f *stormFigures) { f.Streams.Behind = 2 },
		"after the recovery": func(f *stormFigures) { f.Streams.Silent = 1 },
		"hung":               func(f *stormFigures) { f.Calls.Hung, f.Calls.Completed = 1, 3 },
		"without an outcome": func(f *stormFigures) {
			f.Calls.Completed = 3
		},
	} {
		f := clean()
		spoil(f)
		f.check(o)
		if !strings.Contains(strings.Join(f.Failures, "; "), what) {
			t.Errorf("%s: failures %q", what, f.Failures)
		}
	}
	f = clean()
	f.Redis.CoreSecondsRecovery, f.Streams.Resume.Max = 2.5, 12000
	f.check(o)
	if len(f.Failures) != 0 {
		t.Fatalf("a slow recovery is a goal missed, not a failure: %v", f.Failures)
	}
	missed := 0
	for _, g := range f.Goals {
		if !g.Met {
			missed++
		}
	}
	if missed != 2 {
		t.Errorf("%d goals missed, want 2 (10 s, 2 core-seconds): %+v", missed, f.Goals)
	}
}

// A stream that breaks goes to another node, the streams of a node
// spread over the others.
func TestStormNext(t *testing.T) {
	m := &storm{nodes: make([]*client, 3)}
	to := map[int]int{}
	for i := range 300 {
		ss := &stormStream{i: i, node: i % 3}
		n := m.next(ss)
		if n == ss.node {
			t.Fatalf("stream %d on node %d tries it again", i, ss.node)
		}
		if ss.node == 0 {
			to[n]++
		}
	}
	if to[1] != 50 || to[2] != 50 {
		t.Errorf("node 0's 100 streams go %v, want 50 to each survivor", to)
	}
}

func TestStormRedisSamples(t *testing.T) {
	t0 := time.Now()
	r := &stormRedis{samples: []cpuSample{
		{at: t0, cpu: map[string]time.Duration{redisProc: 0}},
		{at: t0.Add(time.Second), cpu: map[string]time.Duration{redisProc: time.Second, "node2": 0}, cmds: map[string]int64{"evalsha": 10}},
		{at: t0.Add(2 * time.Second), cpu: map[string]time.Duration{redisProc: 1500 * time.Millisecond, "node2": time.Second}, cmds: map[string]int64{"evalsha": 25, "get": 3}},
	}}
	if got := r.coreSeconds(redisProc, t0.Add(500*time.Millisecond), t0.Add(1500*time.Millisecond)); got < 0.749 || got > 0.751 {
		t.Errorf("Redis from 0.5 to 1.5 s: %.3f core-s, want 0.75", got)
	}
	if got := r.coreSeconds("node2", t0, t0.Add(3*time.Second)); got != 1 {
		t.Errorf("node2 over its samples and past them: %.3f core-s, want 1", got)
	}
	c := r.commands(t0.Add(time.Second), t0.Add(1500*time.Millisecond))
	if c["evalsha"] != 15 || c["get"] != 3 {
		t.Errorf("commands from 1 s to the first sample after 1.5 s: %v", c)
	}
	if countUpTo([]time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}, 2*time.Second) != 3 {
		t.Error("countUpTo does not count the durations up to and at t")
	}
}
