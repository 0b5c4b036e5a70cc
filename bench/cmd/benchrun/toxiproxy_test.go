package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The far configurations' proxy must add about twice its latency to a
// Redis round trip, and pass commands through unchanged.
func TestRedisProxyAddsLatency(t *testing.T) {
	r, url, err := startRedis("redis-proxytest", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	px, err := startRedisProxy("proxytest", strings.TrimPrefix(url, "redis://"), farLatency)
	if err != nil {
		t.Fatal(err)
	}
	defer px.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	direct, err := pingRTT(ctx, url, 200)
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := pingRTT(ctx, "redis://"+px.addr, 200)
	if err != nil {
		t.Fatal(err)
	}
	added := proxied - direct
	t.Logf("PING p50: direct %.3f ms, through toxiproxy %.3f ms (+%.3f ms)", direct, proxied, added)
	want := 2 * float64(farLatency.Microseconds()) / 1000
	if added < want || added > want+1 {
		t.Errorf("the proxy added %.3f ms to a round trip, want %.1f ms (+ at most 1 ms of overhead)", added, want)
	}
}

// The capacity model reads redis-benchmark's CSV: requests per second
// and p50 of the one test run.
func TestParseBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA 1 k:__rand_int__ v","29824.02","1.601","0.184","0.935","3.239","5.007","13.231"
`
	rate, p50, err := parseBenchmarkCSV(out)
	if err != nil || rate != 29824.02 || p50 != 0.935 {
		t.Errorf("got %v, %v, %v; want 29824.02, 0.935, nil", rate, p50, err)
	}
	if _, _, err := parseBenchmarkCSV("ERROR: connection refused\n"); err == nil {
		t.Error("no error for output without a result")
	}
}
