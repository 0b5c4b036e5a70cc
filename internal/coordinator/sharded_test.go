package coordinator_test

import (
	"errors"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// On Redis Cluster with sharded pub/sub, a reply routed to a process
// that no longer listens is reported undelivered, as on one server:
// SPUBLISH counts the subscribers of the shard where all of them are.
func TestUndeliveredReplyOnCluster(t *testing.T) {
	srvs := redistest.StartCluster(t, 3)
	opts, err := redis.ParseURL("redis-cluster://" + srvs[0].Addr()) // the client finds the others
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewUniversalClient(opts)
	ctx := t.Context()
	be := redisBackend(t, client, redis.Options{Prefix: "undelivered"})

	start := func(node string) (*coordinator.Coordinator, func()) {
		c := coordinator.New(node, "1", be.Bus, 0)
		stop, err := c.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, stop
	}
	gone, stopGone := start("gone")
	goneID := gone.NewID()
	if _, err := gone.Register("s", "", goneID, ""); err != nil {
		t.Fatal(err)
	}
	stopGone()
	live, stopLive := start("live")
	defer stopLive()
	liveID := live.NewID()
	w, err := live.Register("s", "", liveID, "")
	if err != nil {
		t.Fatal(err)
	}

	relay := coordinator.New("relay", "1", be.Bus, 0)
	if _, err := relay.Resolve(ctx, "s", "", &jsonrpc.Message{ID: goneID, Result: []byte(`1`)}); !errors.Is(err, coordinator.ErrUndelivered) {
		t.Fatalf("reply to the stopped process: got %v, want ErrUndelivered", err)
	}
	if ok, err := relay.Resolve(ctx, "s", "", &jsonrpc.Message{ID: liveID, Result: []byte(`2`)}); err != nil || !ok {
		t.Fatalf("reply to the running process: %v, %v", ok, err)
	}
	if res, err := w.Wait(ctx); err != nil || string(res) != "2" {
		t.Fatalf("the running process's waiter: %s, %v", res, err)
	}
}
