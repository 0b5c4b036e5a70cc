package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// On a real Redis: a GET stream open and idle for 3× the history TTL
// after an event of its own is resumed on another node after that event
// and gets the next one; once no connection reads it, its keys are gone
// within the TTL.
func TestIdleGetStreamHistoryLivesWhileOpenRedis(t *testing.T) {
	const ttl = 2 * time.Second
	srv := redistest.Start(t)
	var nodes []*coordinator.Node
	var stores []*session.Store
	var bes []*cluster.Backend
	for i := range 2 {
		be := redisBackend(t, goredis.NewClient(&goredis.Options{Addr: srv.Addr()}), redis.Options{Prefix: "hist"})
		id := string(rune('a' + i))
		store := session.NewStore(be.Sessions, session.Options{TTL: time.Minute})
		n := coordinator.NewNode(coordinator.Config{
			Backend: be, Waiters: coordinator.New(id, "inc", be.Bus, 0), Sessions: store,
			LeaseTTL: 600 * time.Millisecond, SessionTTL: time.Minute, HistoryTTL: ttl, MaxFanOuts: 2,
			Log: zerolog.Nop(), Metrics: telemetry.NewMetrics(id),
		})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(errors.New("closed")); n.Leave() })
		nodes, stores, bes = append(nodes, n), append(stores, store), append(bes, be)
	}
	ctx := t.Context()
	sid := newSession(t, stores[0])
	stream := coordinator.GetStreamID(sid)
	if _, _, err := nodes[0].OpenGet(ctx, sid, coordinator.GetCursor{}, false, false); err != nil {
		t.Fatal(err)
	}
	open, closeStream := context.WithCancelCause(ctx)
	defer closeStream(nil)
	go nodes[0].RunUpkeep(open, coordinator.Upkeep{
		Conn:    &coordinator.Conn{ID: nodes[0].NewConnID(), Cancel: closeStream},
		Session: sid, History: cluster.StreamRef{Session: sid, Stream: stream},
	})
	if err := nodes[0].AppendGet(ctx, sid, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)

	if _, _, err := nodes[1].OpenGet(ctx, sid, coordinator.GetCursor{Own: 1}, true, false); err != nil {
		t.Fatalf("resume after 3 TTLs idle: %v", err)
	}
	if err := nodes[1].AppendGet(ctx, sid, []byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	evs, _, err := bes[1].Events.Read(ctx, sid, stream, 1)
	if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"n":2}` {
		t.Fatalf("events after the cursor: %v, %v", evs, err)
	}

	closeStream(nil)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	start := time.Now()
	var left []string
	for time.Since(start) < ttl+time.Second {
		keys, err := c.Keys(ctx, "hist*").Result()
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, k := range keys {
			if strings.Contains(k, stream) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("keys of the closed stream left after its TTL: %v", left)
}
