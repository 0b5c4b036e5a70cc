package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// The backend reads every primary's maxmemory-policy with INFO memory:
// a policy that may evict keys with a TTL (all of ours) is logged at
// start, reported by Memory (the node's readiness and metrics), refused
// under EvictionRefuse, and accepted under EvictionAccept; a maxmemory of
// 0 never evicts. A policy changed later is seen at the next check, and
// keys Redis evicts are counted and logged.
func TestMemoryPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		evicting bool
		cluster  bool // a one-node Redis Cluster: the policy of each primary is read
	}{
		{"default", nil, false, false},
		{"volatile-lru without maxmemory", []string{"--maxmemory-policy", "volatile-lru"}, false, false},
		{"noeviction with maxmemory", []string{"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"}, false, false},
		{"volatile-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}, true, false},
		{"allkeys-lfu", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lfu"}, true, false},
		{"volatile-ttl on Cluster", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartWith(t, redistest.Options{Args: tc.args, Cluster: tc.cluster})
			var log mcptest.LogBuffer
			b := backend(t, client(t, srv, ""), redis.Options{Logger: zerolog.New(&log)})
			m := b.Memory()
			if m.Evicting != tc.evicting || m.Accepted || m.Checked.IsZero() {
				t.Errorf("Memory() = %+v, want evicting %v", m, tc.evicting)
			}
			if warned := strings.Contains(log.String(), "may evict"); warned != tc.evicting {
				t.Errorf("warned %v, want %v: %s", warned, tc.evicting, log.String())
			}
			refusing, err := redis.New(t.Context(), client(t, srv, ""), redis.Options{Prefix: "refused", Eviction: redis.EvictionRefuse})
			if err == nil {
				_ = refusing.Close()
			}
			if refused := errors.Is(err, redis.ErrEvictionPolicy); refused != tc.evicting {
				t.Errorf("under refuse: %v, want refused %v", err, tc.evicting)
			}
			if !tc.evicting {
				return
			}
			if !strings.Contains(err.Error(), tc.args[3]) {
				t.Errorf("refusal %q does not name the policy", err)
			}
			accepted := backend(t, client(t, srv, ""), redis.Options{Eviction: redis.EvictionAccept})
			if m := accepted.Memory(); !m.Evicting || !m.Accepted {
				t.Errorf("under accept: %+v, want evicting and accepted", m)
			}
		})
	}
}

func TestMemoryPolicyChecked(t *testing.T) {
	srv := redistest.Start(t)
	var log mcptest.LogBuffer
	b := backend(t, client(t, srv, ""), redis.Options{Logger: zerolog.New(&log), EvictionCheck: 50 * time.Millisecond})
	if b.Memory().Evicting {
		t.Fatal("evicting on a default Redis")
	}
	// The operator (or a managed service's parameter group) changes the
	// policy, and Redis runs out of memory: it evicts our keys.
	if _, err := srv.DoAll("SET k v PX 60000", "SET j v PX 60000", "CONFIG SET maxmemory-policy volatile-lru", "CONFIG SET maxmemory 1", "SET x y"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the evicting policy and the evicted keys", func() bool {
		m := b.Memory()
		return m.Evicting && m.Policy == "volatile-lru" && m.EvictedKeys > 0
	})
	waitFor(t, 5*time.Second, "the evictions logged", func() bool { return strings.Contains(log.String(), "Redis evicted keys") })
	if _, err := srv.DoAll("CONFIG SET maxmemory 0", "CONFIG SET maxmemory-policy noeviction"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the policy back to noeviction", func() bool { return !b.Memory().Evicting })
}

// On a Redis Cluster every primary's policy is read: one shard of two
// that may evict is enough.
func TestMemoryPolicyEveryPrimary(t *testing.T) {
	shards := redistest.StartCluster(t, 2)
	if _, err := shards[1].DoAll("CONFIG SET maxmemory 64mb", "CONFIG SET maxmemory-policy allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	b := backend(t, client(t, shards[0], ""), redis.Options{})
	if m := b.Memory(); !m.Evicting || m.Policy != "allkeys-lru" {
		t.Errorf("Memory() = %+v, want the second shard's allkeys-lru", m)
	}
}

// An ACL user the deployment runs as may lack INFO: the node starts,
// says once that it cannot read the policy, and reports nothing.
func TestMemoryPolicyUnreadable(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}})
	if line, err := srv.Do("ACL SETUSER node on >pw ~* &* +@all -info"); err != nil || line != "+OK" {
		t.Fatalf("ACL SETUSER: %q %v", line, err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Username: "node", Password: "pw"})
	t.Cleanup(func() { _ = c.Close() })
	var log mcptest.LogBuffer
	b := backend(t, c, redis.Options{Logger: zerolog.New(&log), EvictionCheck: 20 * time.Millisecond})
	time.Sleep(100 * time.Millisecond) // a few checks
	if m := b.Memory(); m.Evicting || !m.Checked.IsZero() {
		t.Errorf("Memory() = %+v, want nothing read", m)
	}
	if n := strings.Count(log.String(), "cannot be read"); n != 1 {
		t.Errorf("told %d times that the policy cannot be read, want once: %s", n, log.String())
	}
}
