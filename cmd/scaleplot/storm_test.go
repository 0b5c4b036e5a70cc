package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPlotStorm(t *testing.T) {
	dir := t.TempDir()
	data := `{"settings":{"streams":30,"calls":6,"victim":"node1"},"streams":{"cut":10},"calls":{"cut":2},
"redis":{"recovery_s":1.2,"core_seconds_recovery":0.07,"core_seconds_10s":0.13},
"curve":[{"t_s":-0.1,"streams_resumed":0,"calls_ended":0,"redis_cores":0.01},
{"t_s":0,"streams_resumed":0,"calls_ended":0,"redis_cores":0.02},
{"t_s":0.1,"streams_resumed":4,"calls_ended":0,"redis_cores":0.2},
{"t_s":0.2,"streams_resumed":10,"calls_ended":2,"redis_cores":0.05}]}`
	path := filepath.Join(dir, "storm.json")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := plotStorm(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "storm-resumed.svg"), filepath.Join(dir, "storm-redis-cpu.svg")}
	if !slices.Equal(written, want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	resumed, err := os.ReadFile(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resumed), ">seconds after the kill<") || !strings.Contains(string(resumed), "10 GET streams and 2 calls cut") {
		t.Error("the resumed chart does not label its axis or say what was cut")
	}
	ss := parseSVG(t, resumed)
	if got := names(ss); !slices.Equal(got, []string{"streams resumed", "cut calls ended"}) {
		t.Fatalf("series %v", got)
	}
	if n := len(ss[0].line); n != 4 {
		t.Fatalf("%d points, want 4", n)
	}
	// 10 streams resumed at the end is drawn above 0 at the start.
	if !(ss[0].line[3][1] < ss[0].line[0][1]) {
		t.Errorf("the resumed streams do not rise: %v", ss[0].line)
	}
	cpu, err := os.ReadFile(want[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cpu), "0.07 core-s") {
		t.Error("the CPU chart does not give the core-seconds of the recovery")
	}
	if got := names(parseSVG(t, cpu)); !slices.Equal(got, []string{"redis-server", "surviving nodes", "clients", "whole machine"}) {
		t.Errorf("CPU series %v", got)
	}
}
