package redis_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// recovered is how soon after a Cluster reports cluster_state:ok again a
// backend must be whole: its command pool, its membership heartbeat and
// every pub/sub subscription, classic and sharded.
const recovered = 5 * time.Second

// A primary of a Cluster with replicas fails over, killed (kill -9) or
// by CLUSTER FAILOVER on its replica: within recovered of
// cluster_state:ok the backend's heartbeat renews its lease, it is
// Ready, and a message published to any of its topics (on every shard,
// the failed one's included) reaches it once, classic and sharded.
// Before the backend followed the failover, the heartbeat was refused
// by the dead primary's address until go-redis's periodic reload of the
// slot map (a minute), and a shard's pub/sub connection never came back
// (its channels re-subscribed in one SSUBSCRIBE: CROSSSLOT); after
// CLUSTER FAILOVER the old primary ended the sharded subscriptions of
// its slots and nothing noticed. The same with the reader routing
// reads by latency (to replicas too).
func TestClusterFailoverRecovers(t *testing.T) {
	t.Parallel()
	for name, query := range map[string]string{"primaries": "", "route_by_latency": "?route_by_latency=true"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clusterFailoverRecovers(t, query)
		})
	}
}

func clusterFailoverRecovers(t *testing.T, query string) {
	all := redistest.StartClusterWith(t, 3, redistest.Options{Replicas: 1})
	addrs := all[:3] // the nodes' URL names the primaries
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	// Three nodes, each on a client of its own.
	readerClient := clusterClient(t, addrs, query).(*goredis.ClusterClient)
	dials := &dialCounter{}
	readerClient.OnNewNode(func(n *goredis.Client) { n.AddHook(dials) })
	_ = readerClient.ForEachShard(t.Context(), func(_ context.Context, n *goredis.Client) error {
		n.AddHook(dials)
		return nil
	})
	reader := backend(t, readerClient, redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn, PingInterval: time.Second, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	sender := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn})
	classic := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOff})
	ctx := t.Context()

	// Topics spread over every shard, several slots on each.
	var mu sync.Mutex
	got := map[string]int{}
	const topics = 60
	for _, be := range []*cluster.Backend{reader, classic} {
		for i := range topics {
			stop, err := be.Bus.Subscribe(ctx, "t"+strconv.Itoa(i), func(m []byte) {
				mu.Lock()
				got[string(m)]++
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(stop)
		}
	}
	for i := range 200 { // keys on every shard
		if _, err := sender.Claims.Claim(ctx, "k"+strconv.Itoa(i), "x", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	victim := redistest.MostKeys(all)
	// A node that read sharded channels of the victim's shard only for a
	// while: its pub/sub connection to that shard holds none when the
	// primary dies, and nothing comes on it after it is dialed again.
	idle := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn, Logger: zerolog.New(zerolog.NewTestWriter(t)).With().Str("backend", "idle").Logger()})
	var stops []func()
	for i := range topics {
		if n, err := readerClient.MasterForKey(ctx, prefix+":bus:t"+strconv.Itoa(i)); err == nil && n.Options().Addr == victim.Addr() {
			stop, err := idle.Bus.Subscribe(ctx, "t"+strconv.Itoa(i), func([]byte) {})
			if err != nil {
				t.Fatal(err)
			}
			stops = append(stops, stop)
		}
	}
	if len(stops) == 0 {
		t.Fatalf("no topic on %s", victim.Addr())
	}
	for _, stop := range stops {
		stop()
	}
	round := 0
	// whole reports whether every seam of the nodes works: the reader's
	// heartbeat, its readiness (and the others'), and a message on every
	// topic reaching both readers.
	whole := func() error {
		if err := reader.Members.Heartbeat(ctx, "reader", 5*time.Second); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		if !reader.Ready() || !classic.Ready() {
			return fmt.Errorf("not ready")
		}
		if !idle.Ready() {
			return fmt.Errorf("the node without sharded subscriptions not ready")
		}
		round++
		// A sharded message reaches the reader, a classic one both.
		want := map[string]int{}
		for i := range topics {
			for be, readers := range map[*cluster.Backend]int{sender: 1, classic: 2} {
				m := fmt.Sprintf("r%d-t%d-%p", round, i, be)
				want[m] = readers
				if _, err := be.Bus.Publish(ctx, "t"+strconv.Itoa(i), []byte(m)); err != nil {
					return fmt.Errorf("publish: %w", err)
				}
			}
		}
		deadline := time.Now().Add(200 * time.Millisecond)
		for {
			mu.Lock()
			missing := 0
			for m, n := range want {
				if got[m] != n {
					missing++
				}
			}
			mu.Unlock()
			if missing == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d messages did not reach their readers once", missing, len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := whole(); err != nil {
		t.Fatalf("before the failover: %v", err)
	}
	// wholeAgain waits for whole from ok on, at most recovered.
	wholeAgain := func(what string, ok time.Time) {
		t.Helper()
		var last error
		for time.Since(ok) < recovered {
			prev := last
			if last = whole(); last == nil {
				t.Logf("%s: whole %v after cluster_state:ok", what, time.Since(ok).Round(time.Millisecond))
				return
			}
			if prev == nil || prev.Error() != last.Error() {
				t.Logf("%s: %v after cluster_state:ok: %v", what, time.Since(ok).Round(time.Millisecond), last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not whole %v after cluster_state:ok: %v", what, recovered, last)
	}

	_, ok, err := redistest.KillPrimary(all, victim, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wholeAgain("kill -9 of "+victim.Addr(), ok)
	// Once whole, the reader's commands and subscriptions go to the new
	// primary: the dead address is dialed only by go-redis's pool of its
	// connections, which tries it again in the background about once a
	// second (each try up to five dials, its dial retries) until the
	// client forgets the node, a minute after the reload (and, routing
	// by latency, by its latency probes).
	before, since := dials.to(victim.Addr()), time.Now()
	for range 10 {
		if err := whole(); err != nil {
			t.Fatalf("after the kill, once whole: %v", err)
		}
	}
	if n, most := dials.to(victim.Addr())-before, 5*(int(time.Since(since)/time.Second)+1); n > most && query == "" {
		t.Errorf("the reader dialed the killed primary %d times in %v once whole, want at most %d", n, time.Since(since).Round(time.Millisecond), most)
	}
	t.Logf("the dead address was dialed %d times in the %v after", dials.to(victim.Addr())-before, time.Since(since).Round(time.Millisecond))

	// Graceful: the replica of another primary takes its slots over.
	var other *redistest.Server
	for _, s := range all[:3] {
		if s != victim {
			other = s
			break
		}
	}
	rs := other.Replicas(all)
	if len(rs) == 0 {
		t.Fatalf("%s has no replica", other.Addr())
	}
	ok, err = rs[0].Failover(all, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wholeAgain("CLUSTER FAILOVER of "+other.Addr(), ok)
}

// dialCounter counts the dials of a client's connections by address.
type dialCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *dialCounter) to(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

func (d *dialCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		if d.n == nil {
			d.n = map[string]int{}
		}
		d.n[addr]++
		d.mu.Unlock()
		return next(ctx, network, addr)
	}
}

func (d *dialCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (d *dialCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// The failures that ask for a reload of the slot map: a connection's,
// and a Cluster's answers while it changes hands; not a missing key, a
// context that ended, nor a command's own error.
func TestStaleMap(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err   error
		stale bool
	}{
		{nil, false},
		{goredis.Nil, false},
		{context.Canceled, false},
		{fmt.Errorf("redis ping: %w", context.DeadlineExceeded), false},
		{refused, true},
		{fmt.Errorf("redis heartbeat: %w: %w", cluster.ErrUnavailable, refused), true},
		{io.EOF, true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("MOVED 3999 127.0.0.1:6381"), true},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{replyError("ERR Error running script"), false},
	} {
		if got := redis.StaleMap(c.err); got != c.stale {
			t.Errorf("StaleMap(%v) = %v, want %v", c.err, got, c.stale)
		}
	}
}

// replyError is an error reply of a Redis server.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
