package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// startNode serves the demo pack on a loopback test server.
func startNode(t *testing.T) string {
	t.Helper()
	return startNodeWith(t, nil)
}

// startNodeWith serves the demo pack through wrap (when not nil) on a
// loopback test server.
func startNodeWith(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s := mcp.NewServer(mcp.Implementation{Name: "mcpbench-test", Version: "1"}, &mcp.ServerOptions{
		StateKeys: [][]byte{bytes.Repeat([]byte{9}, 32)},
	})
	demo.Register(s)
	// Every scenario comes from one caller in a few seconds: the
	// per-caller rate bound is not what this test is about.
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{RetryHint: 50 * time.Millisecond, CallerRate: 1e6, CallerBurst: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	var served http.Handler = h
	if wrap != nil {
		served = wrap(h)
	}
	ts := httptest.NewServer(served)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		h.Close()
		ts.Close()
	})
	return ts.URL + "/mcp"
}

// Every scenario runs against a real node, on every revision it
// supports, without a single failed operation.
func TestScenariosAgainstANode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario for a moment")
	}
	url := startNode(t)
	for _, sc := range scenarios {
		for _, rev := range []string{rev20250618, rev20251125, rev20260728} {
			if rev == rev20260728 && (sc == "churn" || sc == "resume") || sc == "tasks" && rev == rev20250618 {
				continue
			}
			t.Run(sc+"/"+rev, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "report.json")
				args := []string{"--url", url, "--scenario", sc, "--revision", rev, "-c", "4",
					"--warmup", "50ms", "--streams", "20", "--settle", "10ms",
					"--steps", "5", "--cut-after", "2", "--delay-ms", "5", "--gap", "20ms", "-q", "--json", out}
				// A count, not a duration, so that a slow machine gets the
				// same work done; the duration only bounds the run.
				if sc == "idle" {
					args = append(args, "-d", "200ms")
				} else {
					args = append(args, "--count", "8", "-d", "30s")
				}
				rep, stdout, stderr := runReport(t, args, out)
				if rep.Errors != 0 || len(rep.SetupErrors) != 0 {
					t.Fatalf("errors %v, setup errors %v\n%s", rep.ErrorKinds, rep.SetupErrors, stdout.String())
				}
				if sc == "idle" {
					if got := rep.Counters["streams_opened"]; got != 20 {
						t.Fatalf("idle: %d streams opened, want 20", got)
					}
					if !strings.Contains(stderr.String(), "mcpbench: phase=streams-open n=20") {
						t.Fatalf("no streams-open phase line in:\n%s", stderr.String())
					}
					return
				}
				if rep.Ops != 8 || rep.Throughput <= 0 || rep.Latency.P50 <= 0 || rep.Latency.P50 > rep.Latency.P99 {
					t.Fatalf("implausible report: %d ops, %.1f ops/s, latency %+v\n%s", rep.Ops, rep.Throughput, rep.Latency, stdout.String())
				}
				if !strings.Contains(stdout.String(), "throughput") {
					t.Fatalf("no text report:\n%s", stdout.String())
				}
			})
		}
	}
}

// --count bounds the measured operations.
func TestCount(t *testing.T) {
	url := startNode(t)
	var stdout bytes.Buffer
	args := []string{"--url", url, "--count", "50", "-c", "4", "--warmup", "0", "-q", "--json", "-"}
	if code := run(t.Context(), args, &stdout, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json -: %v\n%s", err, stdout.String())
	}
	if rep.Ops != 50 || rep.Errors != 0 {
		t.Fatalf("got %d ops and %d errors, want 50 and 0", rep.Ops, rep.Errors)
	}
}

// A dead endpoint is reported by kind, and the run still ends on time.
func TestErrorsByKind(t *testing.T) {
	ts := httptest.NewServer(nil)
	url := ts.URL + "/mcp"
	ts.Close()
	var stdout bytes.Buffer
	args := []string{"--url", url, "--revision", rev20260728, "-d", "200ms", "--warmup", "0", "-c", "2", "-q", "--json", "-"}
	start := time.Now()
	run(context.Background(), args, &stdout, io.Discard)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the run took %v", time.Since(start))
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if rep.Ops != 0 || rep.ErrorKinds["conn_refused"].Count == 0 {
		t.Fatalf("got %d ops, errors %v; want conn_refused errors", rep.Ops, rep.ErrorKinds)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string // substring of the error; "" for none
	}{
		{[]string{"--url", "http://a/mcp,http://b/mcp", "--url", "http://c/mcp"}, ""},
		{[]string{"--scenario", "nope"}, "--scenario"},
		{[]string{"--revision", "2024-01-01"}, "--revision"},
		{[]string{"--scenario", "churn", "--revision", "2026-07-28"}, "sessions"},
		{[]string{"--scenario", "tasks", "--revision", "2025-06-18"}, "tasks exist"},
		{[]string{"--url", "ftp://x"}, "--url"},
		{[]string{"--reply-to", "elsewhere"}, "--reply-to"},
		{[]string{"--scenario", "resume", "--reply-to", "alternate"}, "--reply-to"},
		{[]string{"--redis-monitor"}, "needs --redis"},
		{[]string{"--pid", "node=abc"}, "NAME=PID"},
		{[]string{"--scenario", "resume", "--steps", "3", "--cut-after", "3"}, "--cut-after"},
	}
	for _, tt := range tests {
		cfg, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: got error %v, want one mentioning %q", tt.args, err, tt.want)
		}
		if tt.want == "" && err == nil && len(cfg.urls) != 3 {
			t.Errorf("%v: urls %v, want 3", tt.args, cfg.urls)
		}
	}
	cfg, err := parseFlags([]string{"--scenario", "fanout", "-c", "32"}, io.Discard)
	if err != nil || cfg.concurrency != 1 {
		t.Errorf("fanout: concurrency %d (%v), want 1", cfg.concurrency, err)
	}
	cfg, err = parseFlags([]string{"--scenario", "resume"}, io.Discard)
	if err != nil || cfg.delayMs != 20 {
		t.Errorf("resume: delay %d (%v), want the default 20", cfg.delayMs, err)
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"Usage: mcpbench", "Scenarios", "echo", "fanout", "resume", "-revision", "Examples"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// A fan-out round lasts until its latest arrival, whatever the order in
// which the stream readers record theirs.
func TestStoreMax(t *testing.T) {
	var a atomic.Int64
	for _, v := range []int64{5, 9, 3, 9, 7} {
		storeMax(&a, v)
	}
	if got := a.Load(); got != 9 {
		t.Errorf("got %d, want 9", got)
	}
}

// The fan-out sends every toggle to the first endpoint (a node that did
// not make the last change may not have seen it yet, toggle to the state
// already set and notify nobody), and its report counts the streams the
// server closed (counted while closing, before the report is made).
func TestFanoutTogglesOnTheFirstEndpoint(t *testing.T) {
	s := mcp.NewServer(mcp.Implementation{Name: "mcpbench-test", Version: "1"}, &mcp.ServerOptions{
		StateKeys: [][]byte{bytes.Repeat([]byte{9}, 32)},
	})
	demo.Register(s)
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{RetryHint: 50 * time.Millisecond, CallerRate: 1e6, CallerBurst: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	var toggles [2]atomic.Int64
	var urls []string
	for i := range toggles {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"toggle_extra_tool"`)) {
					toggles[i].Add(1)
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		urls = append(urls, ts.URL+"/mcp")
	}
	t.Cleanup(h.Close)
	for _, rev := range []string{rev20251125, rev20260728} {
		toggles[0].Store(0)
		toggles[1].Store(0)
		out := filepath.Join(t.TempDir(), "report.json")
		args := []string{"--url", strings.Join(urls, ","), "--scenario", "fanout", "--revision", rev, "-c", "1",
			"--warmup", "0", "--streams", "10", "--settle", "10ms", "--count", "6", "-d", "30s", "-q", "--json", out}
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d\n%s", rev, code, stderr.String())
		}
		rep, err := bench.ReadReport(out)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Ops != 6 || rep.Errors != 0 {
			t.Fatalf("%s: %d ops, errors %v", rev, rep.Ops, rep.ErrorKinds)
		}
		if toggles[0].Load() < 6 || toggles[1].Load() != 0 {
			t.Errorf("%s: tools/call on the endpoints: %d and %d, want every toggle on the first", rev, toggles[0].Load(), toggles[1].Load())
		}
		if _, ok := rep.Counters["streams_closed_by_server"]; !ok {
			t.Errorf("%s: no streams_closed_by_server in the report's counters %v", rev, rep.Counters)
		}
	}
}

// With --reply-to alternate a worker's sampling replies alternate
// between the call's endpoint and the next, and each two consecutive
// operations make one pair: cross-node minus same-node, whichever came
// first; an operation that failed between them breaks the pair.
func TestAlternateRepliesArePaired(t *testing.T) {
	cfg, err := parseFlags([]string{"--scenario", "sampling", "--url", "http://a/mcp,http://b/mcp", "--reply-to", "alternate"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(cfg, newClient(cfg.urls, cfg.revision, 1, nil), nil, io.Discard)
	r.measuring.Store(true)
	w := &worker{n: 0, r: r}
	var where []bool
	op := func(d time.Duration) {
		url, same := w.replyTarget(0)
		if same != (url == "http://a/mcp") {
			t.Fatalf("reply to %s reported as same=%v", url, same)
		}
		where = append(where, same)
		if d > 0 {
			w.recordReply(d, same)
		}
	}
	op(3 * time.Millisecond) // cross
	op(2 * time.Millisecond) // same: pair +1 ms
	op(5 * time.Millisecond) // cross
	op(0)                    // same, failed: no pair
	op(4 * time.Millisecond) // cross
	op(6 * time.Millisecond) // same: pair -2 ms
	if want := []bool{false, true, false, true, false, true}; !slices.Equal(where, want) {
		t.Fatalf("same-node replies %v, want %v", where, want)
	}
	got := r.pairs["reply_cross_minus_same"]
	if want := []time.Duration{time.Millisecond, -2 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	if d := bench.Differences(got); d.Pairs != 2 || d.P10 != -2 || d.P90 != 1 {
		t.Fatalf("summary %+v", d)
	}
}

// runReport runs mcpbench with args, failing the test unless it exits
// 0, and returns the JSON report it wrote to out and its standard
// output and error.
func runReport(t *testing.T, args []string, out string) (rep *bench.Report, stdout, stderr *bytes.Buffer) {
	t.Helper()
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if code := run(t.Context(), args, stdout, stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	rep, err := bench.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	return rep, stdout, stderr
}
