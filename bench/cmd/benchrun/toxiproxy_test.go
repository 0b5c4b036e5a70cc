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
	if added < want || added > want+1.5 {
		t.Errorf("the proxy added %.3f ms to a round trip, want %.1f ms (+ at most 1.5 ms of overhead)", added, want)
	}
}
