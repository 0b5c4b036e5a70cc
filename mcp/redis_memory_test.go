package mcp_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// What the deployment's items cost Redis, for sizing its maxmemory
// (docs/CONFIGURATION.md, "What Redis needs"): a node on a Redis of the
// test's own creates sessions, opens their GET streams, records the
// events of a call and runs tasks, and the growth of INFO's used_memory
// over each batch is divided by the batch's size; the keys' own MEMORY
// USAGE, by kind, is printed beside it. It measures only when asked:
//
//	MCP_MEASURE_REDIS=1 go test -run TestRedisMemoryPerItem -v ./mcp/
func TestRedisMemoryPerItem(t *testing.T) {
	if os.Getenv("MCP_MEASURE_REDIS") == "" {
		t.Skip("set MCP_MEASURE_REDIS=1 to measure")
	}
	srv := redistest.Start(t)
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: redisBackend(t, srv.URL())},
		Setup: legacyTaskTools(make(chan struct{}), make(chan struct{}, 1))})
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	used := func() int64 {
		time.Sleep(300 * time.Millisecond) // writes in flight land
		s, err := rdb.Info(t.Context(), "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				b, _ := strconv.ParseInt(v, 10, 64)
				return b
			}
		}
		t.Fatal("no used_memory in INFO memory")
		return 0
	}
	per := func(what string, count int, before int64) int64 {
		after := used()
		t.Logf("%-44s %6d bytes each (used_memory +%d over %d)", what, (after-before)/int64(count), after-before, count)
		return after
	}

	const sessions, streams, events, calls, tasks = 200, 100, 500, 100, 100
	at := used()
	var cs []*mcptest.Client
	for range sessions {
		cs = append(cs, session(t, n.url, mcp.Version20251125, nil))
	}
	at = per("legacy session (initialize)", sessions, at)
	for _, c := range cs[:streams] {
		getStream(t, c, n.url, "")
	}
	at = per("open GET stream of a session", streams, at)
	resp := cs[0].Call("tools/call", toolCall("progress", map[string]any{"steps": events, "delayMs": 0}, true), nil)
	if resp.Final() == nil || resp.Final().Error != nil {
		t.Fatalf("progress call: %.200s", resp.Body)
	}
	at = per(fmt.Sprintf("recorded event (progress, %d in one stream)", events), events+1, at)
	for i := range calls {
		resp := cs[1+i%(sessions-1)].Call("tools/call", toolCall("progress", map[string]any{"steps": 1, "delayMs": 0}, true), nil)
		if resp.Final() == nil || resp.Final().Error != nil {
			t.Fatalf("progress call: %.200s", resp.Body)
		}
	}
	at = per("streamed call's history (1 event + result)", calls, at)
	for i := range tasks {
		startLegacyTask(t, cs[1+i%(sessions-1)], "task_only", false)
	}
	per("task (2025-11-25, ended, its result kept)", tasks, at)

	// The keys by kind: session ids and stream ids made one placeholder.
	ids := regexp.MustCompile(`\{[^}]*\}|[A-Za-z0-9_-]{16,}`)
	type kind struct {
		n     int
		bytes int64
	}
	kinds := map[string]*kind{}
	iter := rdb.Scan(t.Context(), 0, "*", 1000).Iterator()
	for iter.Next(t.Context()) {
		k := iter.Val()
		b, err := rdb.MemoryUsage(t.Context(), k).Result()
		if err != nil {
			continue // gone since the scan
		}
		name := ids.ReplaceAllString(k, "…")
		if kinds[name] == nil {
			kinds[name] = &kind{}
		}
		kinds[name].n++
		kinds[name].bytes += b
	}
	names := make([]string, 0, len(kinds))
	for name := range kinds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := kinds[name]
		t.Logf("MEMORY USAGE %-32s %5d keys, %7d bytes each", name, k.n, k.bytes/int64(k.n))
	}
}
