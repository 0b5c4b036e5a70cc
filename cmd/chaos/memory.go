package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
)

// The memory scenarios fill Redis as another service sharing it would:
// keys without a time to live written past maxmemory, set a little
// above what the cluster uses. Under volatile-lru (the default of the
// managed services) Redis evicts the cluster's keys, which all have a
// TTL, to make room; under noeviction it refuses the writes that need
// memory. Either way every call must end, with its result or a clear
// error, and none may lose events without saying so.

// memoryFill is how long the fill runs, and the room above the
// cluster's use that maxmemory leaves.
const (
	memoryFill     = 25 * time.Second
	memoryHeadroom = 3 << 20
	fillValue      = 4 << 10 // bytes of one fill key
	fillEvery      = 5 * time.Millisecond
)

// evictionTolerated names the scenarios in which an event may be lost
// from a stream, provided the call it belonged to ended with an error:
// what Redis evicted is gone, and the client must be told.
var evictionTolerated = map[string]bool{"redis-evict": true}

// lostUntold is the events lost that fail the scenario: all of them,
// or in a scenario of evictionTolerated those of streams whose client
// was not told with an error.
func (r result) lostUntold() int {
	if evictionTolerated[r.sc.name] {
		return r.st.lost - r.st.lostAnswered
	}
	return r.st.lost
}

// memoryScenario returns the run of a memory scenario under policy.
func memoryScenario(policy string) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		if !sleep(ctx, 10*time.Second) {
			return
		}
		rc := goredis.NewClient(&goredis.Options{Addr: e.c.Redis.Addr(), MaxRetries: -1})
		defer rc.Close()
		before := redisInfo(rc, "stats")["evicted_keys"]
		used, _ := strconv.ParseInt(redisInfo(rc, "memory")["used_memory"], 10, 64)
		limit := used + memoryHeadroom
		e.fault()
		bg := context.Background()
		if err := rc.ConfigSet(bg, "maxmemory-policy", policy).Err(); err != nil {
			e.h.Fatalf("CONFIG SET maxmemory-policy: %v", err)
		}
		if err := rc.ConfigSet(bg, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
			e.h.Fatalf("CONFIG SET maxmemory: %v", err)
		}
		e.h.Logf("%s: maxmemory %d (used %d), %s; filling for %s", e.h.name, limit, used, policy, memoryFill)
		stop := time.Now().Add(memoryFill)
		value := strings.Repeat("x", fillValue)
		written, refused := 0, 0
		var unready []string
		var once sync.Once
		for i := 0; time.Now().Before(stop); i++ {
			if err := rc.Set(bg, fmt.Sprintf("fill:%d", i), value, 0).Err(); err != nil {
				refused++
			} else {
				written++
			}
			if time.Until(stop) < memoryFill/4 { // past the nodes' policy check (--redis-eviction-check, 15 s)
				once.Do(func() {
					unready = readyReasons(e)
					m := readMetrics(e.c.Nodes[0])
					unready = append(unready, fmt.Sprintf("%s's mcp_redis_evicting %v, mcp_redis_evicted_keys %v", e.c.Nodes[0].ID, m["mcp_redis_evicting"], m["mcp_redis_evicted_keys"]))
				})
			}
			time.Sleep(fillEvery)
		}
		// The other service frees its keys and the limit is lifted.
		var cursor uint64
		for {
			keys, next, err := rc.Scan(bg, cursor, "fill:*", 1000).Result()
			if err != nil {
				break
			}
			if len(keys) > 0 {
				rc.Unlink(bg, keys...)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		_ = rc.ConfigSet(bg, "maxmemory", "0").Err()
		_ = rc.ConfigSet(bg, "maxmemory-policy", "noeviction").Err()
		after := redisInfo(rc, "stats")["evicted_keys"]
		b, _ := strconv.Atoi(before)
		a, _ := strconv.Atoi(after)
		e.mu.Lock()
		e.notes = append(e.notes, fmt.Sprintf("fill: %d keys of %d bytes written, %d refused; Redis evicted %d keys; 19 s into the fill: %s",
			written, fillValue, refused, a-b, strings.Join(unready, "; ")))
		e.mu.Unlock()
		sleep(ctx, time.Hour)
	}
}

// redisInfo reads one section of INFO as its fields.
func redisInfo(rc *goredis.Client, section string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out := map[string]string{}
	s, err := rc.Info(ctx, section).Result()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// readyReasons returns each node's /readyz answer when it is not ready.
func readyReasons(e *env) []string {
	var out []string
	for _, n := range e.c.Nodes {
		if body, ok := readyz(n); !ok {
			out = append(out, n.ID+": "+strings.TrimSpace(body))
		}
	}
	return out
}

// readyz returns a node's /readyz body and whether it answered 200.
func readyz(n *clustertest.Node) (string, bool) {
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + n.Addr + "/readyz")
	if err != nil {
		return err.Error(), false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return string(b), resp.StatusCode == http.StatusOK
}
