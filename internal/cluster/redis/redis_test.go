package redis_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/backendtest"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

var prefixes atomic.Int64

// quiet drops go-redis's own log lines (dial failures during the outage
// tests); test failures say what went wrong.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	goredis.SetLogger(quiet{})
	os.Exit(m.Run())
}

// client connects to srv through ParseURL, as a node would.
func client(t testing.TB, srv *redistest.Server, query string) goredis.UniversalClient {
	t.Helper()
	url := srv.URL()
	if srv.Cluster() {
		url = "redis-cluster://" + srv.Addr()
	}
	opts, err := redis.ParseURL(url + query)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", url, err)
	}
	c := goredis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// backend returns a backend on c with a key prefix of its own.
func backend(t testing.TB, c goredis.UniversalClient, opts redis.Options) *cluster.Backend {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("t%d", prefixes.Add(1))
	}
	if opts.JanitorInterval == 0 {
		opts.JanitorInterval = 50 * time.Millisecond
	}
	b, err := redis.New(t.Context(), c, opts)
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestContract(t *testing.T) {
	for _, mode := range []struct {
		name   string
		opts   redistest.Options
		pubsub redis.ShardedPubSub
	}{
		{"tcp", redistest.Options{}, ""},
		{"unix", redistest.Options{Unix: true}, ""},
		{"cluster", redistest.Options{Cluster: true}, ""}, // sharded pub/sub
		{"cluster-classic", redistest.Options{Cluster: true}, redis.ShardedOff},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.StartWith(t, mode.opts)
			c := client(t, srv, "")
			if _, isCluster := c.(*goredis.ClusterClient); isCluster != mode.opts.Cluster {
				t.Fatalf("client type %T for mode %s", c, mode.name)
			}
			backendtest.Run(t, func(t *testing.T) *cluster.Backend {
				return backend(t, c, redis.Options{ShardedPubSub: mode.pubsub})
			})
		})
	}
	// A Cluster of three processes: a session's keys and a stream's
	// owner key land on different ones, and each sharded channel is on
	// its slot's shard.
	t.Run("cluster3", func(t *testing.T) {
		c := clusterClient(t, redistest.StartCluster(t, 3))
		backendtest.Run(t, func(t *testing.T) *cluster.Backend {
			b := backend(t, c, redis.Options{})
			if reads, publishes := redis.PubSubMode(b); !reads || !publishes {
				t.Fatalf("a backend on Cluster 7: reads sharded %v, publishes sharded %v; want both", reads, publishes)
			}
			return b
		})
	})
}

// clusterClient connects to the Cluster of srvs through ParseURL, with
// the URL's options in query ("?route_by_latency=true") when given.
func clusterClient(t testing.TB, srvs []*redistest.Server, query ...string) goredis.UniversalClient {
	t.Helper()
	var addrs []string
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
	}
	opts, err := redis.ParseURL("redis-cluster://" + strings.Join(addrs, ",") + strings.Join(query, ""))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if _, ok := c.(*goredis.ClusterClient); !ok {
		t.Fatalf("client type %T for a Cluster", c)
	}
	return c
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		addrs   []string
		db      int
		master  string
		cluster bool
		user    string
		pass    string
		tls     bool
		unix    bool
	}{
		{url: "redis://127.0.0.1:6380/2", addrs: []string{"127.0.0.1:6380"}, db: 2},
		{url: "redis://u:p@h?db=3&dial_timeout=2s", addrs: []string{"h:6379"}, db: 3, user: "u", pass: "p"},
		{url: "rediss://h:6380", addrs: []string{"h:6380"}, tls: true},
		{url: "unix:///run/redis.sock?db=1", addrs: []string{"/run/redis.sock"}, db: 1, unix: true},
		{url: "redis-sentinel://h1:26379,h2:26379/mymaster?db=0", addrs: []string{"h1:26379", "h2:26379"}, master: "mymaster"},
		{url: "redis-sentinel://:secret@h1,h2:26380/m/4?sentinel_password=s", addrs: []string{"h1:26379", "h2:26380"}, master: "m", db: 4, pass: "secret"},
		{url: "rediss-sentinel://h1/m", addrs: []string{"h1:26379"}, master: "m", tls: true},
		{url: "redis-cluster://h1:6379,h2:6379", addrs: []string{"h1:6379", "h2:6379"}, cluster: true},
		{url: "redis-cluster://h1", addrs: []string{"h1:6379"}, cluster: true},
		{url: "redis-cluster://[::1]:7000,[::1]:7001?read_timeout=1s", addrs: []string{"[::1]:7000", "[::1]:7001"}, cluster: true},
		{url: "rediss-cluster://u:p@h1:7000", addrs: []string{"h1:7000"}, cluster: true, tls: true, user: "u", pass: "p"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			o, err := redis.ParseURL(tc.url)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if !slices.Equal(o.Addrs, tc.addrs) || o.DB != tc.db || o.MasterName != tc.master ||
				o.IsClusterMode != tc.cluster || o.Username != tc.user || o.Password != tc.pass ||
				(o.TLSConfig != nil) != tc.tls || (o.Dialer != nil) != tc.unix {
				t.Fatalf("got addrs %v db %d master %q cluster %v user %q pass %q tls %v dialer %v",
					o.Addrs, o.DB, o.MasterName, o.IsClusterMode, o.Username, o.Password, o.TLSConfig != nil, o.Dialer != nil)
			}
		})
	}
	o, _ := redis.ParseURL("redis://h?dial_timeout=2s&pool_size=7")
	if o.DialTimeout != 2*time.Second || o.PoolSize != 7 {
		t.Fatalf("options: got dial_timeout %v pool_size %d", o.DialTimeout, o.PoolSize)
	}
	// Options that only go-redis's cluster and Sentinel parsers know.
	o, err := redis.ParseURL("redis-cluster://h1,h2?read_only=true&route_randomly=true&max_redirects=5")
	if err != nil || !o.ReadOnly || !o.RouteRandomly || o.MaxRedirects != 5 {
		t.Fatalf("cluster options: got %+v, %v", o, err)
	}
	o, err = redis.ParseURL("redis-sentinel://h1,h2/m?route_by_latency=true&pool_size=3")
	if err != nil || !o.RouteByLatency || o.PoolSize != 3 {
		t.Fatalf("sentinel options: got %+v, %v", o, err)
	}
	o, _ = redis.ParseURL("redis-sentinel://h/m?sentinel_username=su&sentinel_password=sp")
	if o.SentinelUsername != "su" || o.SentinelPassword != "sp" {
		t.Fatalf("sentinel credentials: got %q %q", o.SentinelUsername, o.SentinelPassword)
	}

	for _, bad := range []string{
		"", "localhost:6379", "http://h", "redis://h?bogus=1", "redis://h/x",
		"redis-sentinel://h1,h2", "redis-cluster://h/1", "redis-cluster://h?db=2",
		"redis-cluster://,", "redis-cluster://h?sentinel_password=x",
		"redis-sentinel://u:hunter2@h?bogus=1",
		"redis-sentinel://u:hunter2@h:x/m", "redis-cluster://u:hunter2@h:x,h2",
		"redis-sentinel://h/m?sentinel_password=hunter2&bogus=1",
		"redis-sentinel://h/m?replica_only=true",
	} {
		_, err := redis.ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q): got nil error", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q): error leaks the password: %v", bad, err)
		}
	}
}

// counter is a go-redis hook counting round trips: each command or
// pipeline sent is one.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRoundTrips pins the cost model: Redis round trips per operation in
// steady state (scripts cached), on one server and on Cluster.
func TestRoundTrips(t *testing.T) {
	for _, mode := range []redistest.Options{{}, {Cluster: true}} {
		srv := redistest.StartWith(t, mode)
		c := client(t, srv, "")
		var rt counter
		c.AddHook(&rt)
		b := backend(t, c, redis.Options{JanitorInterval: -1})
		ctx := t.Context()
		lim := cluster.Limits{}
		ops := []struct {
			name         string
			single, clus int64
			op           func(i int) error
		}{
			{"Create", 1, 2, func(i int) error {
				return b.Sessions.Create(ctx, fmt.Sprint("s", i), map[string]string{"a": "b"}, time.Minute, 1000, cluster.CreateOptions{})
			}},
			{"Load", 1, 2, func(i int) error { _, err := b.Sessions.Load(ctx, fmt.Sprint("s", i), time.Minute, ""); return err }},
			{"Touch", 1, 2, func(i int) error { return b.Sessions.Touch(ctx, fmt.Sprint("s", i), time.Minute) }},
			{"Set", 1, 1, func(i int) error {
				_, err := b.Sessions.Set(ctx, fmt.Sprint("s", i), map[string]string{"c": "d"})
				return err
			}},
			{"Open", 1, 2, func(i int) error {
				return b.Events.Open(ctx, fmt.Sprint("x", i), cluster.StreamMeta{Session: fmt.Sprint("s", i)}, lim)
			}},
			{"Append", 1, 1, func(i int) error {
				_, err := b.Events.Append(ctx, fmt.Sprint("s", i), fmt.Sprint("x", i), []byte("{}"), false, lim)
				return err
			}},
			{"Read", 1, 1, func(i int) error {
				_, _, err := b.Events.Read(ctx, fmt.Sprint("s", i), fmt.Sprint("x", i), 0)
				return err
			}},
			{"Subscribe", 1, 2, func(i int) error { return b.Sessions.Subscribe(ctx, fmt.Sprint("s", i), "file:///r") }},
			{"Subscribers", 1, 2, func(i int) error { _, err := b.Sessions.Subscribers(ctx, "file:///r"); return err }},
			{"Count", 1, 1, func(i int) error { _, err := b.Sessions.Count(ctx); return err }},
			{"Publish", 1, 1, func(i int) error { _, err := b.Bus.Publish(ctx, "t", []byte("m")); return err }},
			{"Claim", 1, 1, func(i int) error {
				_, err := b.Claims.Claim(ctx, fmt.Sprintf("session:s%d:get", i), "c", time.Minute)
				return err
			}},
			{"Once", 1, 1, func(i int) error { _, err := b.Claims.Once(ctx, fmt.Sprint("tok", i), time.Minute); return err }},
			{"Heartbeat", 1, 1, func(i int) error { return b.Members.Heartbeat(ctx, "n", time.Minute) }},
			{"End", 1, 2, func(i int) error { _, err := b.Sessions.End(ctx, fmt.Sprint("s", i), cluster.EndOptions{}); return err }},
		}
		for _, o := range ops {
			if err := o.op(0); err != nil { // loads the scripts
				t.Fatalf("%s: %v", o.name, err)
			}
		}
		for _, o := range ops {
			before := rt.n.Load()
			if err := o.op(1); err != nil {
				t.Fatalf("%s: %v", o.name, err)
			}
			got, want := rt.n.Load()-before, o.single
			if mode.Cluster {
				want = o.clus
			}
			if got != want {
				t.Errorf("cluster=%v %s: %d round trips, want %d", mode.Cluster, o.name, got, want)
			}
		}
	}
}

// TestCloseStopsGoroutines checks that Close ends the receive loop and
// the janitor, and that subscriptions cost no goroutines.
func TestCloseStopsGoroutines(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv, "")
	if err := c.Ping(t.Context()).Err(); err != nil { // let the pool settle
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	b, err := redis.New(t.Context(), c, redis.Options{Prefix: "leak", JanitorInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := b.Events.Follow(t.Context(), "s", fmt.Sprint("x", i), func(cluster.Event) {}); err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Fatalf("%d goroutines for 50 follows, want a few per backend", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Close", runtime.NumGoroutine()-before)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSentinelURL connects through a real Sentinel: the user info of a
// redis-sentinel URL authenticates to the master, sentinel_password to
// Sentinel, and the path names the master and the database.
func TestSentinelURL(t *testing.T) {
	m := redistest.StartWith(t, redistest.Options{Args: []string{"--requirepass", "pw"}})
	s := redistest.StartSentinel(t, redistest.Sentinel{Master: m, Name: "mymaster",
		Config: []string{"sentinel auth-pass mymaster pw", "requirepass spw"}})
	connect := func(url string) error {
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", url, err)
		}
		c := goredis.NewUniversalClient(o)
		defer c.Close()
		return c.Set(t.Context(), "k", "v", 0).Err()
	}
	base := "redis-sentinel://:pw@" + s.Addr() + "/mymaster/2?sentinel_password=spw&dial_timeout=2s"
	if err := connect(base); err != nil {
		t.Fatalf("through Sentinel: %v", err)
	}
	direct := goredis.NewClient(&goredis.Options{Addr: m.Addr(), Password: "pw", DB: 2})
	defer direct.Close()
	if got, err := direct.Get(t.Context(), "k").Result(); err != nil || got != "v" {
		t.Fatalf("the key in database 2 of the master: got %q, %v", got, err)
	}
	if err := connect(strings.Replace(base, ":pw@", ":wrong@", 1)); err == nil {
		t.Fatal("a wrong master password was accepted")
	}
	if err := connect(strings.Replace(base, "=spw", "=wrong", 1)); err == nil {
		t.Fatal("a wrong Sentinel password was accepted")
	}
}

// Pipelines share the connection pool unless the URL asks for go-redis's
// pipeline pool: the node's connections stay bounded by pool_size.
func TestParseURLPipelinesSharePool(t *testing.T) {
	for url, want := range map[string]int{
		"redis://h:6379":                           -1,
		"redis://h:6379?pipeline_pool_size=3":      3,
		"redis-cluster://h1:1,h2:2":                -1,
		"redis-sentinel://h1:1,h2:2/mymaster?db=1": -1,
	} {
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if o.PipelinePoolSize != want {
			t.Errorf("%s: PipelinePoolSize %d, want %d", url, o.PipelinePoolSize, want)
		}
	}
}
