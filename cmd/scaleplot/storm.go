package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The storm's figures (cmd/chaos -storm, make storm): the recovery from
// a node's death against seconds from the kill, every 100 ms. Two
// charts: the share of the cut GET streams resumed on the survivors and
// of the cut calls ended, and the CPU of Redis, the surviving nodes, the
// clients and the whole machine.

// stormFile is the part of the storm's JSON the charts draw.
type stormFile struct {
	Settings struct {
		Streams int    `json:"streams"`
		Calls   int    `json:"calls"`
		Victim  string `json:"victim"`
	} `json:"settings"`
	Streams struct {
		Cut int `json:"cut"`
	} `json:"streams"`
	Calls struct {
		Cut int `json:"cut"`
	} `json:"calls"`
	Redis struct {
		RecoveryS           float64 `json:"recovery_s"`
		CoreSecondsRecovery float64 `json:"core_seconds_recovery"`
		CoreSeconds10s      float64 `json:"core_seconds_10s"`
	} `json:"redis"`
	Curve []struct {
		T              float64 `json:"t_s"`
		StreamsResumed float64 `json:"streams_resumed"`
		CallsEnded     float64 `json:"calls_ended"`
		RedisCores     float64 `json:"redis_cores"`
		SurvivorsCores float64 `json:"survivors_cores"`
		ClientsCores   float64 `json:"clients_cores"`
		MachineCores   float64 `json:"machine_cores"`
	} `json:"curve"`
}

// stormCharts reads a storm's JSON and returns its two charts.
func stormCharts(r io.Reader) (resumed, cpu *chart, err error) {
	var f stormFile
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, nil, err
	}
	if len(f.Curve) == 0 {
		return nil, nil, errors.New("no curve")
	}
	const x = "seconds after the kill"
	resumed = &chart{Title: fmt.Sprintf("%s killed: %d GET streams and %d calls cut", f.Settings.Victim, f.Streams.Cut, f.Calls.Cut),
		XLabel: x, YLabel: "% of those cut", Lines: true,
		Note: fmt.Sprintf("%d sessions with a GET stream and %d progress calls on 3 nodes", f.Settings.Streams, f.Settings.Calls)}
	cpu = &chart{Title: "CPU during the storm", XLabel: x, YLabel: "cores (over 100 ms)", Lines: true,
		Note: fmt.Sprintf("%.2f core-s in the recovery (%.2f s: the last stream resumed, the last cut call ended), %.2f in the 10 s after the kill",
			f.Redis.CoreSecondsRecovery, f.Redis.RecoveryS, f.Redis.CoreSeconds10s)}
	streams, calls := series{Name: "streams resumed"}, series{Name: "cut calls ended", Style: 1}
	redis, nodes, clients := series{Name: "redis-server"}, series{Name: "surviving nodes", Style: 1}, series{Name: "clients", Style: 2}
	machine := series{Name: "whole machine", Style: 3}
	for _, p := range f.Curve {
		streams.Points = append(streams.Points, xy{X: p.T, Y: percent(p.StreamsResumed, f.Streams.Cut)})
		calls.Points = append(calls.Points, xy{X: p.T, Y: percent(p.CallsEnded, f.Calls.Cut)})
		redis.Points = append(redis.Points, xy{X: p.T, Y: p.RedisCores})
		nodes.Points = append(nodes.Points, xy{X: p.T, Y: p.SurvivorsCores})
		clients.Points = append(clients.Points, xy{X: p.T, Y: p.ClientsCores})
		machine.Points = append(machine.Points, xy{X: p.T, Y: p.MachineCores})
	}
	resumed.Series = []series{streams, calls}
	cpu.Series = []series{redis, nodes, clients, machine}
	return resumed, cpu, nil
}

func percent(n float64, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * n / float64(of)
}

// plotStorm writes FILE-resumed.svg and FILE-redis-cpu.svg beside
// FILE.json and returns the paths written.
func plotStorm(path string) ([]string, error) {
	base := strings.TrimSuffix(path, ".json")
	return drawFile(path, func(r io.Reader) ([]string, []*chart, error) {
		resumed, cpu, err := stormCharts(r)
		return []string{base + "-resumed.svg", base + "-redis-cpu.svg"}, []*chart{resumed, cpu}, err
	})
}
