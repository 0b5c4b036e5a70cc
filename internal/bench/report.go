package bench

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"time"
)

// Report is the result of one mcpbench run, as written with --json and
// read by the report generator.
type Report struct {
	// Command is the command line of the run.
	Command []string `json:"command"`
	// Scenario and Revision name what ran.
	Scenario string `json:"scenario"`
	Revision string `json:"revision"`
	// URLs are the endpoints driven round robin.
	URLs []string `json:"urls"`
	// Concurrency is the number of concurrent sessions (workers).
	Concurrency int `json:"concurrency"`
	// Settings are the scenario's parameters (steps, streams, ...).
	Settings map[string]any `json:"settings,omitempty"`
	// Started is when the measured window began (RFC 3339).
	Started string `json:"started"`
	// Elapsed is the measured window in seconds (warm-up excluded).
	Elapsed float64 `json:"elapsed_s"`
	// Ops is the number of operations that completed without error in
	// the measured window; Errors the number that failed.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// Throughput is Ops per second of Elapsed.
	Throughput float64 `json:"ops_per_s"`
	// Latency is the distribution of successful operations.
	Latency Summary `json:"latency"`
	// Extra holds the scenario's other timings (first_progress,
	// reply_to_result, per_stream, ...).
	Extra map[string]Summary `json:"extra,omitempty"`
	// ErrorKinds counts failures by kind (see Kind).
	ErrorKinds map[string]ErrorCount `json:"error_kinds,omitempty"`
	// SetupErrors counts failures while preparing (sessions, streams).
	SetupErrors map[string]ErrorCount `json:"setup_errors,omitempty"`
	// ErrorClasses and SetupErrorClasses count the same failures by
	// likely cause (see Class): session_not_found, reply_not_delivered,
	// node_lost, timeout, ...
	ErrorClasses      map[string]int64 `json:"error_classes,omitempty"`
	SetupErrorClasses map[string]int64 `json:"setup_error_classes,omitempty"`
	// Counters are scenario events worth knowing (sse_responses, ...).
	Counters map[string]int64 `json:"counters,omitempty"`
	// CPU is the load generator's own CPU use over the window.
	CPU CPUShare `json:"cpu"`
	// Processes is the CPU use of the server processes watched with
	// --pid, by name.
	Processes map[string]ProcessCPU `json:"processes,omitempty"`
	// Redis is the run's cost in Redis, when a Redis URL was given.
	Redis *RedisStats `json:"redis,omitempty"`
	// Paired holds signed differences between paired timings of the
	// run (reply_cross_minus_same: a session's reply to another node
	// against its next or previous reply to the same node), by name.
	Paired map[string]Difference `json:"paired,omitempty"`
	// Notes explain anything unusual about the run.
	Notes []string `json:"notes,omitempty"`
}

// Difference summarizes signed differences between paired timings
// measured side by side in one run, in milliseconds: what two ways of
// doing one thing differ by, with the drift of a shared machine over the
// run cancelled out of each pair.
type Difference struct {
	Pairs int     `json:"pairs"`
	P10   float64 `json:"p10_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
}

// Differences summarizes ds (any order; it is sorted in place).
func Differences(ds []time.Duration) Difference {
	if len(ds) == 0 {
		return Difference{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return Millis(ds[int(q*float64(len(ds)-1)+0.5)]) }
	return Difference{Pairs: len(ds), P10: at(0.1), P50: at(0.5), P90: at(0.9)}
}

// ErrorRate is Errors / (Ops + Errors).
func (r *Report) ErrorRate() float64 {
	if r.Ops+r.Errors == 0 {
		return 0
	}
	return float64(r.Errors) / float64(r.Ops+r.Errors)
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(Report)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, err
	}
	return r, nil
}
