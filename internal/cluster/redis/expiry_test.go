package redis_test

import (
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// Every key the backend writes expires, the global indexes included
// (live sessions, subscriber sets, the uri registry, node leases), and
// the subscriber sets outlive no subscribed session by more than an
// eighth of its TTL while sliding keeps them alive with the session.
func TestEveryKeyExpires(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts redistest.Options
	}{{"single", redistest.Options{}}, {"cluster", redistest.Options{Cluster: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.StartWith(t, mode.opts)
			c := client(t, srv, "")
			b := backend(t, c, redis.Options{Prefix: "exp", JanitorInterval: -1})
			ctx := t.Context()
			const ttl = 800 * time.Millisecond
			if err := b.Members.Heartbeat(ctx, "n1", time.Second); err != nil {
				t.Fatal(err)
			}
			if err := b.Sessions.Create(ctx, "s1", map[string]string{"v": "1"}, ttl, 0, cluster.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := b.Sessions.Subscribe(ctx, "s1", "file:///a"); err != nil {
				t.Fatal(err)
			}
			if err := b.Events.Open(ctx, "x1", cluster.StreamMeta{Session: "s1"}, cluster.Limits{}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Claims.Once(ctx, "tok", time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Limiter.Take(ctx, []cluster.Debit{{Key: "rate:a", N: 3, Rate: 1, Burst: 5}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.Limiter.Acquire(ctx, "sessions:a", "s1", ttl, 5); err != nil {
				t.Fatal(err)
			}
			// A one-node deployment: KEYS sees every key.
			keys, err := c.Keys(ctx, "exp:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) < 8 {
				t.Fatalf("got keys %v, want at least eight", keys)
			}
			for _, k := range keys {
				if pttl := c.PTTL(ctx, k).Val(); pttl <= 0 {
					t.Errorf("key %q has no TTL (PTTL %v)", k, pttl)
				}
			}
			// Sliding the session past its first TTL keeps its
			// subscription delivered: the subscriber set slides along.
			for range 8 {
				time.Sleep(ttl / 4)
				if err := b.Sessions.Touch(ctx, "s1", ttl); err != nil {
					t.Fatal(err)
				}
			}
			ids, err := b.Sessions.Subscribers(ctx, "file:///a")
			if err != nil || len(ids) != 1 {
				t.Fatalf("after sliding: subscribers %v, %v; want [s1]", ids, err)
			}
		})
	}
}

// A task's keys (its record and its owner's index) all expire with the
// task: after its TTL nothing of it is left in Redis.
func TestTaskLeavesNothingBehind(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts redistest.Options
	}{{"single", redistest.Options{}}, {"cluster", redistest.Options{Cluster: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.StartWith(t, mode.opts)
			c := client(t, srv, "")
			b := backend(t, c, redis.Options{Prefix: "texp", JanitorInterval: -1})
			ctx := t.Context()
			task := cluster.Task{ID: "t1", Owner: "alice", OwnerKey: "alice", Status: cluster.TaskWorking,
				TTL: 300 * time.Millisecond, Method: "tools/call", Params: []byte(`{}`)}
			if _, err := b.Tasks.Create(ctx, task, 10, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Tasks.Update(ctx, "t1", cluster.TaskUpdate{AddInputs: map[string][]byte{"k": []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Tasks.Update(ctx, "t1", cluster.TaskUpdate{Status: cluster.TaskCompleted, Result: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			keys, err := c.Keys(ctx, "texp:*").Result()
			if err != nil || len(keys) != 4 {
				t.Fatalf("keys %v, %v; want the record, the owner index and the run index (2 keys)", keys, err)
			}
			for _, k := range keys {
				if pttl := c.PTTL(ctx, k).Val(); pttl <= 0 {
					t.Errorf("key %q has no TTL (PTTL %v)", k, pttl)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				keys, err := c.Keys(ctx, "texp:*").Result()
				if err == nil && len(keys) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the task's TTL: keys %v, %v; want none", keys, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
