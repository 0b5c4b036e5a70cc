package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

const toolsChanged = "notifications/tools/list_changed"

// startRedisNodes starts n nodes on one real Redis, each with a client
// (and pub/sub connection) of its own, as separate processes would.
// redisBackend is a backend on c with opts, closed (and c) at the end
// of the test.
func redisBackend(t *testing.T, c goredis.UniversalClient, opts redis.Options) *cluster.Backend {
	t.Helper()
	t.Cleanup(func() { _ = c.Close() })
	be, err := redis.New(t.Context(), c, opts)
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func startRedisNodes(t *testing.T, srv *redistest.Server, n int) []testNode {
	t.Helper()
	var out []testNode
	for i := range n {
		be := redisBackend(t, goredis.NewClient(&goredis.Options{Addr: srv.Addr()}), redis.Options{Prefix: "fan"})
		id := string(rune('a' + i))
		store := session.NewStore(be.Sessions, session.Options{TTL: time.Minute})
		metrics := telemetry.NewMetrics(id)
		node := coordinator.NewNode(coordinator.Config{
			Backend: be, Waiters: coordinator.New(id, "inc", be.Bus, 0), Sessions: store,
			LeaseTTL: 3 * time.Second, HistoryTTL: time.Minute, MaxFanOuts: 2,
			Log: zerolog.Nop(), Metrics: metrics,
		})
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close(errors.New("closed")); node.Leave() })
		out = append(out, testNode{node, store, nil, metrics})
	}
	return out
}

// getTail is a session's GET stream followed on a node: the data it got
// in order, and the cursor after the last.
type getTail struct {
	mu   sync.Mutex
	got  []string
	cur  coordinator.GetCursor
	stop context.CancelFunc
	done chan error
}

// followGet opens (or resumes, when resume) sid's GET stream on n.
func followGet(t *testing.T, n testNode, sid string, after coordinator.GetCursor, resume bool) *getTail {
	t.Helper()
	from, _, err := n.OpenGet(t.Context(), sid, after, resume, resume)
	if err != nil {
		t.Fatalf("OpenGet %s: %v", sid, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	g := &getTail{cur: from, stop: cancel, done: make(chan error, 1)}
	go func() {
		g.done <- n.TailGet(ctx, sid, from, func(ev cluster.Event, cur coordinator.GetCursor, _ bool) error {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.got, g.cur = append(g.got, string(ev.Data)), cur
			return nil
		}, nil)
	}()
	t.Cleanup(func() { g.close() })
	return g
}

func (g *getTail) close() {
	g.stop()
	<-g.done
	g.done <- nil // a second close returns at once
}

func (g *getTail) snapshot() ([]string, coordinator.GetCursor) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.got...), g.cur
}

func (g *getTail) count() int { got, _ := g.snapshot(); return len(got) }

func change(i int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q,"params":{"n":%d}}`, toolsChanged, i)
}

// Flow 7 at scale: the Redis commands one list_changed costs do not grow
// with the number of sessions (the notification is written once and
// each node writes it to its own streams), and every session still gets
// it exactly once.
func TestFanOutRedisRoundTripsIndependentOfSessions(t *testing.T) {
	srv := redistest.Start(t)
	nodes := startRedisNodes(t, srv, 2)
	mon, err := bench.StartMonitor(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	perFanOut := map[int]int64{}
	var serial atomic.Int64
	for _, sessions := range []int{10, 100} {
		var tails []*getTail
		for i := range sessions {
			sid := newSession(t, nodes[0].sessions)
			tails = append(tails, followGet(t, nodes[i%len(nodes)], sid, coordinator.GetCursor{}, false))
		}
		// A first change makes sure every stream follows live.
		nodes[0].FanOut(toolsChanged, "", change(int(serial.Add(1))))
		waitFor(t, "the first change everywhere", func() bool {
			for _, g := range tails {
				if g.count() < 1 {
					return false
				}
			}
			return true
		})
		mon.Begin()
		nodes[1].FanOut(toolsChanged, "", change(int(serial.Add(1))))
		waitFor(t, "the second change everywhere", func() bool {
			for _, g := range tails {
				if g.count() < 2 {
					return false
				}
			}
			return true
		})
		client, _, err := mon.End(100 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, c := range client {
			total += c
		}
		perFanOut[sessions] = total
		t.Logf("%d sessions: %d commands sent for one fan-out: %v", sessions, total, client)
		for i, g := range tails {
			if got, _ := g.snapshot(); len(got) != 2 {
				t.Fatalf("session %d of %d: %d notifications, want exactly 2: %q", i, sessions, len(got), got)
			}
			g.close()
		}
	}
	// A few commands of background work (heartbeats, claims) may fall in
	// either window; one per session would be 90 more.
	if perFanOut[100] > perFanOut[10]+8 {
		t.Fatalf("commands per fan-out grew with the sessions: %d with 10, %d with 100", perFanOut[10], perFanOut[100])
	}
}

// Flow 7 with flow 4: a GET stream cut after a list_changed and resumed
// on another node with its cursor gets every later notification and
// every own event exactly once, and none it had already seen.
func TestGetResumedAcrossNodesAfterBroadcastExactlyOnce(t *testing.T) {
	srv := redistest.Start(t)
	nodes := startRedisNodes(t, srv, 2)
	a, b := nodes[0], nodes[1]
	ctx := t.Context()
	watch := followGet(t, b, newSession(t, b.sessions), coordinator.GetCursor{}, false)
	sid := newSession(t, a.sessions)
	g := followGet(t, a, sid, coordinator.GetCursor{}, false)
	b.FanOut(toolsChanged, "", change(1))
	waitFor(t, "change 1", func() bool { return g.count() == 1 && watch.count() == 1 })
	if err := a.AppendGet(ctx, sid, []byte(`{"own":1}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "own 1", func() bool { return g.count() == 2 })
	g.close()
	seen, cur := g.snapshot()
	if cur.Own != 1 || cur.Broadcast == 0 {
		t.Fatalf("cursor after %q: %+v", seen, cur)
	}

	// While the client is away: two changes and an own event.
	b.FanOut(toolsChanged, "", change(2))
	waitFor(t, "change 2", func() bool { return watch.count() == 2 })
	if err := b.AppendGet(ctx, sid, []byte(`{"own":2}`)); err != nil {
		t.Fatal(err)
	}
	a.FanOut(toolsChanged, "", change(3))
	waitFor(t, "change 3", func() bool { return watch.count() == 3 })

	r := followGet(t, b, sid, cur, true)
	waitFor(t, "the missed events", func() bool { return r.count() >= 3 })
	a.FanOut(toolsChanged, "", change(4))
	waitFor(t, "change 4", func() bool { return watch.count() == 4 && r.count() >= 4 })
	time.Sleep(100 * time.Millisecond)
	got, _ := r.snapshot()
	want := map[string]int{string(change(2)): 1, string(change(3)): 1, string(change(4)): 1, `{"own":2}`: 1}
	if len(got) != len(want) {
		t.Fatalf("resumed stream got %q, want each of %v once", got, want)
	}
	for _, d := range got {
		if want[d] != 1 {
			t.Fatalf("resumed stream got %q, want each of %v once", got, want)
		}
		want[d]--
	}
	var order []string
	for _, d := range got {
		if d != `{"own":2}` {
			order = append(order, d)
		}
	}
	if order[0] != string(change(2)) || order[1] != string(change(3)) || order[2] != string(change(4)) {
		t.Fatalf("changes out of order: %q", order)
	}
}
