package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// With WaitReplicas, a session's creation, a stream's appends and a
// task's record count as done only once a replica has them: while the
// replica answers they succeed, once it is gone they fail with
// ErrUnavailable within WaitTimeout; without the setting they succeed
// either way.
func TestWaitReplicas(t *testing.T) {
	primary := redistest.Start(t)
	replica := redistest.Start(t)
	if _, err := primary.Do("CONFIG SET repl-diskless-sync-delay 0"); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(primary.Addr(), ":")
	if _, err := replica.Do(fmt.Sprintf("REPLICAOF %s %s", host, port)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := client.Info(ctx, "replication").Result()
		if strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not come online:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open := func(prefix string, wait int) *cluster.Backend {
		// One round trip in flight: concurrent writes share pipelines,
		// each ended by one WAIT.
		be, err := clusterredis.New(ctx, client, clusterredis.Options{Prefix: prefix, WaitReplicas: wait, WaitTimeout: time.Second, JanitorInterval: -1, Pipelines: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	durable, plain := open("durable", 1), open("plain", 0)
	writes := func(be *cluster.Backend, id string) error {
		if err := be.Sessions.Create(ctx, id, map[string]string{"v": "1"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		b := cluster.Batch{Next: 1, Open: &cluster.StreamMeta{Session: id, Owner: "n.1", Request: "r"}}
		if _, err := be.Events.AppendBatch(ctx, id, "s-"+id, [][]byte{[]byte("e1")}, false, b, cluster.Limits{}); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		return nil
	}
	// concurrently runs writes for 16 sessions at once and returns their
	// errors.
	concurrently := func(be *cluster.Backend, prefix string) []error {
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = writes(be, fmt.Sprintf("%s%d", prefix, i))
			}()
		}
		wg.Wait()
		return errs
	}
	if err := writes(durable, "a"); err != nil {
		t.Fatalf("with a replica online: %v", err)
	}
	trips0, calls0 := clusterredis.ScriptTrips(durable)
	for _, err := range concurrently(durable, "m") {
		if err != nil {
			t.Fatalf("16 at once with a replica online: %v", err)
		}
	}
	if trips, calls := clusterredis.ScriptTrips(durable); trips-trips0 >= calls-calls0 {
		t.Errorf("16 sessions' writes at once took %d round trips for %d calls: none shared", trips-trips0, calls-calls0)
	}
	replica.Kill()
	for i, err := range concurrently(durable, "n") {
		if !errors.Is(err, cluster.ErrUnavailable) {
			t.Fatalf("session %d of 16 at once with the replica gone: %v, want ErrUnavailable", i, err)
		}
	}
	start := time.Now()
	err := writes(durable, "b")
	if !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("with the replica gone: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("the refused write took %v, want about WaitTimeout", took)
	}
	if err := writes(plain, "c"); err != nil {
		t.Fatalf("without WaitReplicas, with the replica gone: %v", err)
	}
}
