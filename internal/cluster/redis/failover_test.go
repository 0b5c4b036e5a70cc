package redis_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

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
// its slots and nothing noticed.
func TestClusterFailoverRecovers(t *testing.T) {
	t.Parallel()
	all := redistest.StartClusterWith(t, 3, redistest.Options{Replicas: 1})
	addrs := all[:3] // the nodes' URL names the primaries
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	// Two nodes, each on a client of its own.
	reader := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn, PingInterval: time.Second, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	sender := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn})
	classic := backend(t, clusterClient(t, addrs), redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOff})
	ctx := t.Context()

	// Topics spread over every shard, several slots on each.
	var mu sync.Mutex
	got := map[string]int{}
	const topics = 24
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
	round := 0
	// whole reports whether every seam of the nodes works: the reader's
	// heartbeat, its readiness, and a message on every topic reaching
	// both readers.
	whole := func() error {
		if err := reader.Members.Heartbeat(ctx, "reader", 5*time.Second); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		if !reader.Ready() || !classic.Ready() {
			return fmt.Errorf("not ready")
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

	victim := redistest.MostKeys(all)
	_, ok, err := redistest.KillPrimary(all, victim, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wholeAgain("kill -9 of "+victim.Addr(), ok)

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
