package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// The capacity model: what one Redis primary on this machine executes
// per second (redis-benchmark against a redis-server of the suite's
// own), divided by what an operation or an idle stream costs it.

// capacityResult holds the redis-benchmark figures.
type capacityResult struct {
	Command string          `json:"command"`
	Rates   []benchmarkRate `json:"rates"`
	Err     string          `json:"error,omitempty"`
}

// benchmarkRate is one redis-benchmark measurement.
type benchmarkRate struct {
	Name    string  `json:"name"`
	Args    string  `json:"args"`
	PerSec  float64 `json:"per_s"`
	Latency float64 `json:"p50_ms"`
}

// The small script measured: one hash write and one expiry, the shape
// of the backend's session scripts.
const capacityScript = "redis.call('HSET', KEYS[1], 'f', ARGV[1]) return redis.call('PEXPIRE', KEYS[1], 60000)"

// Requests and connections of each redis-benchmark run.
const (
	capacityRequests = 200000
	capacityClients  = 50
)

func (c *capacityResult) rate(name string) float64 {
	for _, r := range c.Rates {
		if r.Name == name {
			return r.PerSec
		}
	}
	return 0
}

// measureCapacity runs redis-benchmark against a throwaway redis-server.
func measureCapacity(ctx context.Context, dir string, logf func(string, ...any)) *capacityResult {
	cr := &capacityResult{}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		cr.Err = "redis-benchmark not found (Debian: apt-get install redis-tools)"
		return cr
	}
	rp, url, err := startRedis("redis-capacity", dir)
	if err != nil {
		cr.Err = err.Error()
		return cr
	}
	defer rp.stop()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "redis://"))
	pr, err := bench.DialRedis(ctx, url)
	if err != nil {
		cr.Err = err.Error()
		return cr
	}
	defer pr.Close()
	sha, err := pr.Do(ctx, "SCRIPT", "LOAD", capacityScript)
	if err != nil {
		cr.Err = err.Error()
		return cr
	}
	// PUBLISH reaches one subscriber, as a node's bus does.
	sub, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		cr.Err = err.Error()
		return cr
	}
	defer sub.Close()
	_, _ = sub.Write([]byte("SUBSCRIBE capacity\r\n"))
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := sub.Read(buf); err != nil {
				return
			}
		}
	}()
	common := []string{"-h", host, "-p", port, "-c", strconv.Itoa(capacityClients), "-n", strconv.Itoa(capacityRequests), "-r", "100000", "--csv"}
	cr.Command = fmt.Sprintf("redis-benchmark -h 127.0.0.1 -p PORT -c %d -n %d -r 100000 --csv [-P 16] COMMAND...", capacityClients, capacityRequests)
	runs := []struct {
		name string
		args []string
	}{
		{"EVALSHA", []string{"EVALSHA", sha.(string), "1", "k:__rand_int__", "v"}},
		{"EVALSHA, 16 pipelined", append([]string{"-P", "16"}, "EVALSHA", sha.(string), "1", "k:__rand_int__", "v")},
		{"PUBLISH", []string{"PUBLISH", "capacity", "a-bus-message-of-about-100-bytes-a-bus-message-of-about-100-bytes-a-bus-message-of-about-100"}},
		{"PEXPIRE", []string{"PEXPIRE", "k:__rand_int__", "60000"}},
	}
	for _, r := range runs {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := exec.CommandContext(rctx, bin, append(append([]string{}, common...), r.args...)...).Output()
		cancel()
		if err != nil {
			cr.Err = fmt.Sprintf("redis-benchmark %s: %v", r.name, err)
			return cr
		}
		rate, p50, err := parseBenchmarkCSV(string(out))
		if err != nil {
			cr.Err = fmt.Sprintf("redis-benchmark %s: %v", r.name, err)
			return cr
		}
		shown := strings.Join(r.args, " ")
		if r.name != "PUBLISH" && len(sha.(string)) > 0 {
			shown = strings.ReplaceAll(shown, sha.(string), "<sha of a 2-command script>")
		}
		cr.Rates = append(cr.Rates, benchmarkRate{Name: r.name, Args: shown, PerSec: rate, Latency: p50})
		logf("redis-benchmark %s: %.0f/s", r.name, rate)
	}
	return cr
}

// parseBenchmarkCSV reads redis-benchmark --csv: a header line and one
// line per test, "test","rps","avg_latency_ms","min_latency_ms",
// "p50_latency_ms",...
func parseBenchmarkCSV(out string) (float64, float64, error) {
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		return 0, 0, err
	}
	for _, rec := range recs {
		if len(rec) < 5 || rec[0] == "test" {
			continue
		}
		rate, err := strconv.ParseFloat(rec[1], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bad rate %q", rec[1])
		}
		p50, _ := strconv.ParseFloat(rec[4], 64)
		return rate, p50, nil
	}
	return 0, 0, fmt.Errorf("no result in %q", out)
}
