package main

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

func TestParseClusterPrimaries(t *testing.T) {
	nodes := strings.Join([]string{
		"e7d1 10.77.0.201:6379@16379 myself,master - 0 0 1 connected 0-5460",
		"67ed 10.77.0.202:6379@16379,shard2 master - 0 1426238316232 2 connected 5461-10922",
		"292f 10.77.0.203:6379@16379 master,fail - 1426238316232 0 3 disconnected 10923-16383",
		"07c3 10.77.0.204:6379@16379 slave e7d1 0 1426238317239 1 connected",
		"6ec2 10.77.0.205:6379@16379 master - 0 1426238316232 5 connected",
		"",
	}, "\n")
	got := parseClusterPrimaries(nodes)
	want := []string{"10.77.0.201:6379", "10.77.0.202:6379"}
	if !slices.Equal(got, want) {
		t.Fatalf("primaries = %v, want %v (slot-serving primaries not marked failed)", got, want)
	}
}

// TestRedisWatchCluster watches a three-primary cluster through one seed
// address: the commands of the window are summed over the primaries,
// each primary's part is reported, and a PUBLISH shows on the other two
// primaries as cluster-bus messages.
func TestRedisWatchCluster(t *testing.T) {
	shards := redistest.StartCluster(t, 3)
	ctx := t.Context()
	rw, err := startRedisWatch(ctx, "redis-cluster://"+shards[1].Addr(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.servers) != 3 {
		t.Fatalf("watching %d servers, want the 3 primaries", len(rw.servers))
	}
	// Two commands on the first primary (keys without slots), one
	// PUBLISH on the second.
	for _, cmd := range []string{"PING", "ECHO x"} {
		if _, err := shards[0].Do(cmd); err != nil {
			t.Fatal(err)
		}
	}
	if line, err := shards[1].Do("PUBLISH ch hello"); err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("PUBLISH: %q, %v", line, err)
	}
	// The relayed PUBLISH reaches the other primaries asynchronously:
	// wait for it (the CLUSTER INFO calls show in their commands).
	for _, sh := range []*redistest.Server{shards[0], shards[2]} {
		p, err := bench.DialRedis(ctx, sh.URL())
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for n := int64(0); n == 0 && time.Now().Before(deadline); {
			if n, err = busPublishReceived(ctx, p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.Close()
	}
	stats, err := rw.finish(ctx, 2, "op")
	if err != nil {
		t.Fatal(err)
	}
	if c := stats.Commands; c["ping"] != 0.5 || c["echo"] != 0.5 || c["publish"] != 0.5 {
		t.Fatalf("commands per op = %v, want ping, echo and publish 0.5 each", c)
	}
	if len(stats.Shards) != 3 {
		t.Fatalf("shards = %+v, want 3", stats.Shards)
	}
	var sum, pub, bus float64
	for _, sh := range stats.Shards {
		sum += sh.CommandsPerOp
		pub += sh.PublishPerOp
		bus += sh.BusPublishPerOp
	}
	if sum != stats.CommandsPerOp || pub != 0.5 {
		t.Fatalf("shards' commands %v and publish %v per op, want %v and 0.5", sum, pub, stats.CommandsPerOp)
	}
	// Relayed to the two other primaries (one message each, 2 ops).
	if bus != 1 {
		t.Fatalf("bus publish messages per op over the primaries = %v, want 1", bus)
	}
}

// The requests Redis read in the window are counted whatever the
// commands in them: a pipeline of three PINGs written at once is one
// request, a PING alone another; the probe's own reads are left out.
func TestRedisWatchReads(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	rw, err := startRedisWatch(ctx, srv.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // after the window: its close is a read too
	r := bufio.NewReader(c)
	for _, req := range []string{"PING\r\nPING\r\nPING\r\n", "PING\r\n"} {
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		for range strings.Count(req, "PING") {
			if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				t.Fatalf("reply %q, %v", line, err)
			}
		}
	}
	stats, err := rw.finish(ctx, 1, "op")
	if err != nil {
		t.Fatal(err)
	}
	if stats.Commands["ping"] != 4 || stats.ReadsPerOp != 2 {
		t.Fatalf("ping %v, requests read %v per op; want 4 and 2", stats.Commands["ping"], stats.ReadsPerOp)
	}
}
