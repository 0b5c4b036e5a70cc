package redis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// TestCommandsPerBatch pins what the appends of a POST stream cost
// inside Redis (INFO commandstats: the commands its scripts run, the
// EVALSHA itself included), in steady state: the session holds more
// streams than MaxStreams, so every open evicts the oldest ended one. A
// batch of a stream nobody read publishes nothing; once a follower read
// it, each event is one PUBLISH more.
func TestCommandsPerBatch(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv, "")
	b := backend(t, c, redis.Options{JanitorInterval: -1})
	ctx := t.Context()
	lim := cluster.Limits{MaxStreams: 4, TTL: time.Minute}
	stats := func() map[string]int64 {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return bench.ParseCommandStats(bench.ParseInfo(info))
	}
	cost := func(op func()) (total int64, by map[string]int64) {
		before := stats()
		op()
		by = bench.CommandDelta(before, stats())
		delete(by, "ping") // the pub/sub connection's health probe
		for _, n := range by {
			total += n
		}
		return total, by
	}
	batch := func(x string, final, open bool, data ...string) {
		var meta *cluster.StreamMeta
		if open {
			meta = &cluster.StreamMeta{Session: "s", Owner: "node", Request: "n:" + x}
		}
		raw := make([][]byte, len(data))
		for i, d := range data {
			raw[i] = []byte(d)
		}
		if _, err := b.Events.AppendBatch(ctx, "s", x, raw, final, cluster.Batch{Open: meta}, lim); err != nil {
			t.Fatalf("AppendBatch %s: %v", x, err)
		}
	}
	// Fill the session's LRU with ended streams (and load the scripts).
	for i := range lim.MaxStreams + 2 {
		x := fmt.Sprint("fill", i)
		batch(x, false, true, "a")
		batch(x, true, false, "end")
	}
	for _, tc := range []struct {
		name string
		want int64
		op   func(x string)
	}{
		// HMGET, SET NX owner, TIME, HSET, RPUSH, 2 PEXPIRE; the LRU:
		// ZADD, ZCARD, ZREMRANGEBYSCORE, ZRANGE, HMGET, DEL, ZREM, PTTL.
		{"open, evicting", 16, func(x string) { batch(x, false, true, "", "one", "two") }},
		// HMGET, TIME, HSET, RPUSH.
		{"middle", 5, func(x string) { batch(x, false, false, "three", "four") }},
		// The same and a ZADD: the ended stream is the most recently
		// used.
		{"final", 6, func(x string) { batch(x, true, false, "end") }},
	} {
		for i := range 3 {
			x := fmt.Sprint("x", i)
			got, by := cost(func() { tc.op(x) })
			if got > tc.want || by["publish"] != 0 {
				t.Errorf("%s batch of a stream nobody read: %d commands %v, want at most %d and no PUBLISH", tc.name, got, by, tc.want)
			}
		}
	}
	// A follower's Read marks the stream: its appends publish from then
	// on, one PUBLISH per event.
	x := "followed"
	batch(x, false, true, "a")
	got := make(chan cluster.Event, 8)
	stop, err := b.Events.Follow(ctx, "s", x, func(ev cluster.Event) { got <- ev })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, _, err := b.Events.Read(ctx, "s", x, 0); err != nil {
		t.Fatal(err)
	}
	n, by := cost(func() { batch(x, false, false, "b", "c") })
	if by["publish"] != 2 || n > 7 {
		t.Errorf("batch of 2 events of a followed stream: %d commands %v, want 7 with 2 PUBLISH", n, by)
	}
	for want := uint64(2); want <= 3; want++ {
		select {
		case ev := <-got:
			if ev.Seq != want {
				t.Fatalf("followed seq %d, want %d", ev.Seq, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("seq %d not delivered", want)
		}
	}
	// Every key the stream wrote expires.
	for _, k := range c.Keys(ctx, "*").Val() {
		if c.Type(ctx, k).Val() != "none" && c.PTTL(ctx, k).Val() <= 0 {
			t.Errorf("key %q has no TTL", k)
		}
	}
}
