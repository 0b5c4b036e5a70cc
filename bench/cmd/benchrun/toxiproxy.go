package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// Redis at a production distance: the "far" configurations reach their
// Redis through toxiproxy (github.com/Shopify/toxiproxy/v2, run in this
// process), which delays every chunk of bytes by a fixed latency in each
// direction. toxiproxy's own latency toxic counts whole milliseconds, so
// the suite registers one that counts microseconds; everything else
// (links, chunking, pacing by timestamp) is toxiproxy's.

// farLatency is the latency added in each direction between a node and
// its Redis in the far configurations.
const farLatency = 500 * time.Microsecond

// microLatency is toxiproxy's latency toxic at microsecond resolution: a
// chunk leaves Micros after it arrived, so a stream of chunks keeps its
// throughput and every round trip gains twice Micros.
type microLatency struct {
	Micros int64 `json:"micros"`
}

func (t *microLatency) GetBufferSize() int { return 1024 }

func (t *microLatency) Pipe(stub *toxics.ToxicStub) {
	delay := time.Duration(t.Micros) * time.Microsecond
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			// The runtime's timers wake an idle process at millisecond
			// resolution (epoll_wait); a thread sleeping in nanosleep
			// wakes within the kernel's timer slack (50 µs).
			if sleep := delay - time.Since(c.Timestamp); sleep > 0 {
				ts := syscall.NsecToTimespec(sleep.Nanoseconds())
				for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
				}
			}
			stub.Output <- c
		}
	}
}

func init() { toxics.Register("latency_us", new(microLatency)) }

// redisProxy is one toxiproxy proxy in front of a redis-server.
type redisProxy struct {
	proxy *toxiproxy.Proxy
	addr  string
	// RTT is the measured PING round trip: direct and through the proxy
	// (medians, ms).
	Direct, Proxied float64
}

var proxyServer *toxiproxy.ApiServer

// startRedisProxy puts a toxiproxy proxy with latency in both directions
// in front of the Redis at upstream (host:port) on a free loopback port.
func startRedisProxy(name, upstream string, latency time.Duration) (*redisProxy, error) {
	if proxyServer == nil {
		proxyServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	}
	p := toxiproxy.NewProxy(proxyServer, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy %s: %w", name, err)
	}
	for _, dir := range []string{"upstream", "downstream"} {
		spec := fmt.Sprintf(`{"name":"latency_%s","type":"latency_us","stream":%q,"attributes":{"micros":%d}}`, dir, dir, latency.Microseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			p.Stop()
			return nil, fmt.Errorf("toxiproxy %s: %w", name, err)
		}
	}
	return &redisProxy{proxy: p, addr: p.Listen}, nil
}

func (r *redisProxy) stop() { r.proxy.Stop() }

// pingRTT measures the median PING round trip to a Redis URL over one
// connection, in milliseconds.
func pingRTT(ctx context.Context, url string, n int) (float64, error) {
	p, err := bench.DialRedis(ctx, url)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	d := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		if _, err := p.Do(ctx, "PING"); err != nil {
			return 0, err
		}
		d = append(d, float64(time.Since(t).Microseconds())/1000)
	}
	sort.Float64s(d)
	return d[len(d)/2], nil
}
