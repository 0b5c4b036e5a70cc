package redis_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

func TestParseShardedPubSub(t *testing.T) {
	for in, want := range map[string]redis.ShardedPubSub{
		"": redis.ShardedAuto, "auto": redis.ShardedAuto, "ON": redis.ShardedOn, " off ": redis.ShardedOff,
	} {
		if got, err := redis.ParseShardedPubSub(in); err != nil || got != want {
			t.Errorf("ParseShardedPubSub(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := redis.ParseShardedPubSub("yes"); err == nil {
		t.Errorf("ParseShardedPubSub(yes): no error")
	}
}

// The mode each setting gets: sharded only on Cluster, and "on"
// refused where sharded pub/sub is not available.
func TestShardedPubSubModes(t *testing.T) {
	single := client(t, redistest.Start(t), "")
	cl := clusterClient(t, redistest.StartCluster(t, 2))
	for _, tc := range []struct {
		name           string
		c              goredis.UniversalClient
		mode           redis.ShardedPubSub
		reads, publish bool
	}{
		{"standalone auto", single, redis.ShardedAuto, false, false},
		{"standalone off", single, redis.ShardedOff, false, false},
		{"cluster auto", cl, redis.ShardedAuto, true, true}, // no classic-only node is live
		{"cluster on", cl, redis.ShardedOn, true, true},
		{"cluster off", cl, redis.ShardedOff, false, false},
	} {
		b := backend(t, tc.c, redis.Options{ShardedPubSub: tc.mode})
		if reads, publish := redis.PubSubMode(b); reads != tc.reads || publish != tc.publish {
			t.Errorf("%s: reads sharded %v, publishes sharded %v; want %v, %v", tc.name, reads, publish, tc.reads, tc.publish)
		}
	}
	if b, err := redis.New(t.Context(), single, redis.Options{ShardedPubSub: redis.ShardedOn}); err == nil {
		_ = b.Close()
		t.Errorf("sharded pub/sub on a standalone server: no error")
	}
}

// On Cluster in sharded mode, SPUBLISH counts the subscribers of the
// channel exactly: a message to a topic nobody reads is reported
// undelivered (0), one to a topic read by two backends, 2.
func TestShardedReceivers(t *testing.T) {
	c := clusterClient(t, redistest.StartCluster(t, 3))
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	a := backend(t, c, redis.Options{Prefix: prefix, ShardedPubSub: redis.ShardedOn})
	b := backend(t, c, redis.Options{Prefix: prefix})
	ctx := t.Context()
	for i := range 8 { // topics spread over the shards
		topic := "reply:node" + strconv.Itoa(i)
		if n, err := a.Bus.Publish(ctx, topic, []byte("x")); err != nil || n != 0 {
			t.Fatalf("Publish to %s, read by nobody: %d, %v; want 0", topic, n, err)
		}
		got := make(chan string, 4)
		for _, be := range []*cluster.Backend{a, b} {
			stop, err := be.Bus.Subscribe(ctx, topic, func(m []byte) { got <- string(m) })
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
		}
		if n, err := b.Bus.Publish(ctx, topic, []byte("y")); err != nil || n != 2 {
			t.Fatalf("Publish to %s, read by two: %d, %v; want 2", topic, n, err)
		}
		for range 2 {
			select {
			case m := <-got:
				if m != "y" {
					t.Fatalf("got %q", m)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: a subscriber missed the message", topic)
			}
		}
	}
	// Each shard's connection answers its currency ticks: the backends
	// are current (and Ready) with sharded subscriptions on every shard.
	for _, be := range []*cluster.Backend{a, b} {
		deadline := time.Now().Add(5 * time.Second)
		for !be.Current() || !be.Ready() {
			if time.Now().After(deadline) {
				t.Fatalf("a backend with sharded subscriptions never current")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// recorder collects what one node receives on a topic or a stream.
type recorder struct {
	mu  sync.Mutex
	got map[string]int
}

func (r *recorder) add(m string) {
	r.mu.Lock()
	r.got[m]++
	r.mu.Unlock()
}

// wait waits until every message of want arrived, then a little more,
// and fails unless each arrived exactly once and nothing else did.
func (r *recorder) wait(t *testing.T, who string, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		n := 0
		for _, m := range want {
			if r.got[m] > 0 {
				n++
			}
		}
		r.mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("%s: got %v, want each of %v", who, r.got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a duplicate would arrive by now
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range want {
		if r.got[m] != 1 {
			t.Fatalf("%s: %q arrived %d times", who, m, r.got[m])
		}
	}
	if len(r.got) != len(want) {
		t.Fatalf("%s: got %v, want only %v", who, r.got, want)
	}
	clear(r.got)
}

// node is one process of the mixed deployment: a backend, its lease and
// what it received on the broadcast topic, its reply topic and a stream
// it follows.
type node struct {
	name   string
	be     *cluster.Backend
	bus    *recorder
	stream *recorder
}

func startNode(t *testing.T, c goredis.UniversalClient, prefix, name string, mode redis.ShardedPubSub) *node {
	t.Helper()
	return startNodeEvery(t, c, prefix, name, mode, 20*time.Millisecond)
}

// startNodeEvery is startNode with the publish mode checked every
// interval.
func startNodeEvery(t *testing.T, c goredis.UniversalClient, prefix, name string, mode redis.ShardedPubSub, every time.Duration) *node {
	t.Helper()
	ctx := t.Context()
	n := &node{name: name, bus: &recorder{got: map[string]int{}}, stream: &recorder{got: map[string]int{}}}
	n.be = backend(t, c, redis.Options{Prefix: prefix, ShardedPubSub: mode, ModeInterval: every})
	if err := n.be.Members.Heartbeat(ctx, name, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"all", "reply:" + name} {
		if _, err := n.be.Bus.Subscribe(ctx, topic, func(m []byte) { n.bus.add(string(m)) }); err != nil {
			t.Fatal(err)
		}
	}
	lim := cluster.Limits{}
	x := "x-" + name
	if err := n.be.Events.Open(ctx, x, cluster.StreamMeta{Session: "s-" + name}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := n.be.Events.Follow(ctx, "s-"+name, x, func(ev cluster.Event) {
		if ev.Seq != 0 {
			n.stream.add(string(ev.Data))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.be.Events.Read(ctx, "s-"+name, x, 0); err != nil { // marks it followed
		t.Fatal(err)
	}
	return n
}

// exchange has each node send a broadcast, a routed reply to every
// other node and an event on every other node's followed stream, then
// checks that each node received exactly what was meant for it, once.
func exchange(t *testing.T, round string, nodes ...*node) {
	t.Helper()
	ctx := t.Context()
	for _, from := range nodes {
		msg := round + " all from " + from.name
		if _, err := from.be.Bus.Publish(ctx, "all", []byte(msg)); err != nil {
			t.Fatal(err)
		}
		for _, to := range nodes {
			if to == from {
				continue
			}
			msg := round + " reply " + from.name + ">" + to.name
			n, err := from.be.Bus.Publish(ctx, "reply:"+to.name, []byte(msg))
			if err != nil || n == 0 {
				t.Fatalf("%s: reply to %s: %d receivers, %v", round, to.name, n, err)
			}
			ev := round + " event " + from.name + ">" + to.name
			if _, err := from.be.Events.Append(ctx, "s-"+to.name, "x-"+to.name, []byte(ev), false, cluster.Limits{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, to := range nodes {
		var bus, stream []string
		for _, from := range nodes {
			bus = append(bus, round+" all from "+from.name)
			if from != to {
				bus = append(bus, round+" reply "+from.name+">"+to.name)
				stream = append(stream, round+" event "+from.name+">"+to.name)
			}
		}
		to.bus.wait(t, round+": "+to.name+"'s bus", bus)
		to.stream.wait(t, round+": "+to.name+"'s stream", stream)
	}
}

// waitMode waits until n publishes sharded (or classic).
func waitMode(t *testing.T, n *node, sharded bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, pub := redis.PubSubMode(n.be); pub == sharded {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not publishing sharded=%v", n.name, sharded)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A rolling upgrade on Cluster: a node that reads classic channels only
// (as versions before sharded pub/sub) and nodes in auto mode exchange
// broadcasts, routed replies and stream events both ways, nothing lost
// or repeated; once the classic-only node leaves, the others publish
// sharded, and a routed reply nobody reads is then reported undelivered.
func TestShardedRollingUpgrade(t *testing.T) {
	c := clusterClient(t, redistest.StartCluster(t, 3))
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	old := startNode(t, c, prefix, "old", redis.ShardedOff)
	a := startNode(t, c, prefix, "a", redis.ShardedAuto)
	waitMode(t, a, false)
	exchange(t, "mixed", old, a)
	b := startNode(t, c, prefix, "b", redis.ShardedAuto)
	waitMode(t, b, false)
	exchange(t, "mixed3", old, a, b)
	if n, err := a.be.Bus.Publish(t.Context(), "reply:gone", []byte("x")); err != nil || n != cluster.ReceiversUnknown {
		t.Fatalf("classic publish on Cluster: %d receivers, %v; want unknown", n, err)
	}

	// The old node stops: the others switch to sharded.
	if err := old.be.Members.Leave(t.Context(), "old"); err != nil {
		t.Fatal(err)
	}
	_ = old.be.Close()
	waitMode(t, a, true)
	waitMode(t, b, true)
	exchange(t, "sharded", a, b)
	if n, err := a.be.Bus.Publish(t.Context(), "reply:old", []byte("x")); err != nil || n != 0 {
		t.Fatalf("sharded publish to a topic nobody reads: %d receivers, %v; want 0", n, err)
	}

	// A classic-only node joining again (a downgrade) turns them back.
	back := startNode(t, c, prefix, "back", redis.ShardedOff)
	waitMode(t, a, false)
	waitMode(t, b, false)
	exchange(t, "downgrade", back, a, b)
}

// A node that publishes classic joining a deployment that publishes
// sharded (a downgrade, or a node in mode off) is noticed on its first
// classic message, not at the next periodic check: with the check an hour
// apart, the sharded node switches back to classic as the newcomer
// announces itself on the broadcast channel, and what it publishes then
// reaches the newcomer.
func TestShardedSwitchesBackOnTheFirstClassicMessage(t *testing.T) {
	c := clusterClient(t, redistest.StartCluster(t, 3))
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	a := startNodeEvery(t, c, prefix, "a", redis.ShardedAuto, time.Hour)
	waitMode(t, a, true)
	back := startNode(t, c, prefix, "back", redis.ShardedOff)
	if _, err := back.be.Bus.Publish(t.Context(), "all", []byte("joined")); err != nil {
		t.Fatal(err)
	}
	waitMode(t, a, false)
	for _, r := range []*recorder{a.bus, back.bus} { // "joined" is not the exchange's
		r.mu.Lock()
		delete(r.got, "joined")
		r.mu.Unlock()
	}
	exchange(t, "after", back, a)
}

// shardStats are one shard's pub/sub counters: the PUBLISH and SPUBLISH
// commands it ran and the messages other shards relayed to it.
type shardStats struct{ publish, spublish, relayed int64 }

func readStats(t *testing.T, srvs []*redistest.Server) []shardStats {
	t.Helper()
	out := make([]shardStats, len(srvs))
	for i, s := range srvs {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
		info, err := c.Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.ClusterInfo(t.Context()).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = shardStats{
			publish:  statField(info, "cmdstat_publish:", "calls="),
			spublish: statField(info, "cmdstat_spublish:", "calls="),
			relayed:  statField(ci, "cluster_stats_messages_publish_received:", "") + statField(ci, "cluster_stats_messages_publishshard_received:", ""),
		}
	}
	return out
}

// statField reads the integer after field in the line starting with
// line (0 when absent).
func statField(text, line, field string) int64 {
	for l := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), line)
		if !ok {
			continue
		}
		if field != "" {
			_, rest, _ = strings.Cut(rest, field)
			rest, _, _ = strings.Cut(rest, ",")
		}
		n, _ := strconv.ParseInt(rest, 10, 64)
		return n
	}
	return 0
}

// The pub/sub work of each shard per message published on the bus, on
// Clusters of 3 and 6 shards: with classic pub/sub every shard handles
// every message (the owner runs the PUBLISH, the others receive it over
// the cluster bus), so the deployment's work per message grows with the
// shards; with sharded pub/sub one shard handles it, whatever their
// number. Run with -v for the figures (docs/SCALING.md).
func TestShardedPubSubPerShard(t *testing.T) {
	const msgs, topics = 600, 24
	for _, shards := range []int{3, 6} {
		srvs := redistest.StartCluster(t, shards)
		c := clusterClient(t, srvs)
		for _, mode := range []redis.ShardedPubSub{redis.ShardedOff, redis.ShardedOn} {
			b := backend(t, c, redis.Options{ShardedPubSub: mode})
			ctx := t.Context()
			got := make(chan struct{}, msgs)
			for i := range topics {
				stop, err := b.Bus.Subscribe(ctx, "reply:n"+strconv.Itoa(i), func([]byte) { got <- struct{}{} })
				if err != nil {
					t.Fatal(err)
				}
				defer stop()
			}
			// A Cluster just formed may relay classic PUBLISH between
			// primaries only once its bus links are all up: warm up until
			// a message on every topic arrives, then start counting.
			warm := time.Now().Add(15 * time.Second)
			for {
				for i := range topics {
					if _, err := b.Bus.Publish(ctx, "reply:n"+strconv.Itoa(i), []byte("w")); err != nil {
						t.Fatal(err)
					}
				}
				n := 0
			drain:
				for n < topics {
					select {
					case <-got:
						n++
					case <-time.After(500 * time.Millisecond):
						break drain
					}
				}
				if n == topics {
					break
				}
				if time.Now().After(warm) {
					t.Fatalf("%d shards, %s: messages lost while warming up", shards, mode)
				}
			}
			time.Sleep(100 * time.Millisecond) // late copies of the warm-up
			for len(got) > 0 {
				<-got
			}
			before := readStats(t, srvs)
			for i := range msgs {
				if _, err := b.Bus.Publish(ctx, "reply:n"+strconv.Itoa(i%topics), []byte("m")); err != nil {
					t.Fatal(err)
				}
			}
			for range msgs {
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d shards, %s: messages lost", shards, mode)
				}
			}
			time.Sleep(200 * time.Millisecond) // the cluster bus relays behind the deliveries
			after := readStats(t, srvs)
			var total float64
			var per []string
			for i := range srvs {
				h := after[i].publish - before[i].publish + after[i].spublish - before[i].spublish + after[i].relayed - before[i].relayed
				f := float64(h) / msgs
				total += f
				per = append(per, strconv.FormatFloat(f, 'f', 2, 64))
			}
			t.Logf("%d shards, %-5s pub/sub: messages handled per published message: per shard [%s], all shards %.2f",
				shards, mode, strings.Join(per, " "), total)
			want := 1.0
			if mode == redis.ShardedOff {
				want = float64(shards)
			}
			if total < want-0.05 || total > want+0.05 {
				t.Errorf("%d shards, %s: %.2f messages handled per published message, want %.0f", shards, mode, total, want)
			}
		}
	}
}
