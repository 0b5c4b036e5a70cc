package redis_test

import (
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// currentBackend is a backend on srv whose bus is subscribed and
// proven current.
func currentBackend(t *testing.T, c goredis.UniversalClient) *cluster.Backend {
	t.Helper()
	b := backend(t, c, redis.Options{})
	stop, err := b.Bus.Subscribe(t.Context(), "news", func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	waitFor(t, 5*time.Second, "the bus current", b.Current)
	return b
}

// Killing redis-server turns Current false at once: the next answer from
// a copy is refused before the hub's reader is scheduled to see the EOF
// (Ready alone still says yes for a while under load).
func TestCurrentSeesKillAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	for i := range 8 {
		srv := redistest.Start(t)
		b := currentBackend(t, client(t, srv, ""))
		srv.Kill()
		if b.Current() {
			t.Errorf("round %d: Current right after redis-server was killed", i)
		}
	}
}

// A connection that stops delivering without closing (a partition: no
// FIN, no RST) turns Current false within cluster.BusFresh, although the
// hub's health probe (twice PingInterval, 30s by default) has not
// noticed it: Ready stays true.
func TestCurrentStopsOnSilentStall(t *testing.T) {
	srv := redistest.Start(t)
	p := proxy(t, srv, "stall")
	opts, err := redis.ParseURL("redis://" + p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	b := currentBackend(t, c)
	bothWays(t, p, "timeout", `{"timeout":0}`)
	stalled := time.Now()
	for b.Current() {
		if time.Since(stalled) > 2*cluster.BusFresh {
			t.Fatalf("Current still true %v after the connection stalled", time.Since(stalled))
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(stalled)
	t.Logf("Current false %v after the stall", took.Round(time.Millisecond))
	if took > cluster.BusFresh+50*time.Millisecond {
		t.Errorf("Current turned false %v after the stall, want within BusFresh (%v)", took, cluster.BusFresh)
	}
	if !b.Ready() {
		t.Error("Ready false already: the stall was not silent")
	}
	p.Toxics.ResetToxics(t.Context())
	waitFor(t, 5*time.Second, "the bus current again", b.Current)
}

// BenchmarkCurrent is the cost of the check every answer from a session
// copy makes: a lock, and a peek at the pub/sub socket (one syscall).
func BenchmarkCurrent(b *testing.B) {
	srv := redistest.Start(b)
	be := backend(b, client(b, srv, ""), redis.Options{})
	for !be.Current() {
		time.Sleep(time.Millisecond)
	}
	b.ResetTimer()
	for b.Loop() {
		if !be.Current() {
			time.Sleep(time.Millisecond) // a tick late: let it come
		}
	}
}

// The ticks cost a node nothing while nothing asks Current, and about
// one PING per cluster.BusTick while something does, however many
// times; the first call after an idle spell waits for the PING it sends
// instead of reporting false.
func TestCurrentTickCost(t *testing.T) {
	srv := redistest.Start(t)
	b := currentBackend(t, client(t, srv, ""))
	mon, err := bench.StartMonitor(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	time.Sleep(2 * cluster.BusTick) // the ticks asked for above
	mon.Begin()
	time.Sleep(time.Second)
	idle, _, err := mon.End(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if idle["ping"] != 0 {
		t.Errorf("an idle backend sent %d PINGs in a second, want 0", idle["ping"])
	}
	if !b.Current() {
		t.Error("Current false on the first call after an idle second")
	}
	mon.Begin()
	start := time.Now()
	calls, no := 0, 0
	for time.Since(start) < time.Second {
		if !b.Current() {
			no++
		}
		calls++
		time.Sleep(100 * time.Microsecond)
	}
	if no > calls/10 {
		t.Errorf("Current false %d times in %d calls", no, calls)
	}
	busy, _, err := mon.End(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls of Current in a second (%d false): %d PINGs", calls, no, busy["ping"])
	if want := int64(time.Second/cluster.BusTick) + 3; busy["ping"] > want {
		t.Errorf("%d PINGs in a second of calls, want at most %d", busy["ping"], want)
	}
}

// Current sees the hub's socket whatever the client: through Sentinel
// (the failover client dials the master it was told of), on Cluster
// (each node client's dials), and over a unix socket; and a killed
// server turns it false at once there too.
func TestCurrentOnEveryClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	open := func(t *testing.T, url string) *cluster.Backend {
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewUniversalClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return currentBackend(t, c)
	}
	t.Run("Sentinel", func(t *testing.T) {
		m := redistest.StartWith(t, redistest.Options{})
		s := redistest.StartSentinel(t, redistest.Sentinel{Master: m, Name: "mymaster"})
		b := open(t, "redis-sentinel://"+s.Addr()+"/mymaster?dial_timeout=2s")
		m.Kill()
		if b.Current() {
			t.Error("Current right after the master was killed")
		}
	})
	t.Run("Cluster", func(t *testing.T) {
		shards := redistest.StartCluster(t, 2)
		b := open(t, "redis-cluster://"+shards[0].Addr()+"?addr="+shards[1].Addr())
		for _, s := range shards {
			s.Kill()
		}
		if b.Current() {
			t.Error("Current right after every shard was killed")
		}
	})
	t.Run("Unix", func(t *testing.T) {
		srv := redistest.StartUnix(t)
		b := open(t, srv.URL())
		srv.Kill()
		if b.Current() {
			t.Error("Current right after redis-server was killed")
		}
	})
}

// proxy starts a toxiproxy proxy in front of srv on a free loopback port.
func proxy(t testing.TB, srv *redistest.Server, name string) *toxiproxy.Proxy {
	t.Helper()
	ps := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(ps, name, "127.0.0.1:0", strings.TrimPrefix(srv.URL(), "redis://"))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// bothWays adds a toxic of kind with attributes (JSON) to p in each
// direction.
func bothWays(t testing.TB, p *toxiproxy.Proxy, kind, attributes string) {
	t.Helper()
	for _, dir := range []string{"upstream", "downstream"} {
		spec := `{"name":"` + kind + `_` + dir + `","type":"` + kind + `","stream":"` + dir + `","attributes":` + attributes + `}`
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			t.Fatal(err)
		}
	}
}
