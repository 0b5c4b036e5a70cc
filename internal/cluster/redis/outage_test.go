package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOutage kills Redis under a running backend: every seam fails with
// ErrUnavailable while it is down, works again once it is back (without
// a new backend), and the bus re-subscribes by itself.
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv, "?max_retries=1&dial_timeout=200ms&read_timeout=500ms")
	prefix := fmt.Sprintf("outage%d", prefixes.Add(1))
	b := backend(t, c, redis.Options{Prefix: prefix, PingInterval: 200 * time.Millisecond})
	ctx := t.Context()

	got := make(chan string, 100)
	stop, err := b.Bus.Subscribe(ctx, "news", func(m []byte) { got <- string(m) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var reconnects atomic.Int32
	b.Bus.OnReconnect(func() { reconnects.Add(1) })
	hints := make(chan cluster.Event, 100)
	cancelFollow, err := b.Events.Follow(ctx, "s", "x", func(ev cluster.Event) { hints <- ev })
	if err != nil {
		t.Fatal(err)
	}
	defer cancelFollow()

	srv.Kill()
	checks := map[string]func() error{
		"Ping":   func() error { return b.Ping(ctx) },
		"Create": func() error { return b.Sessions.Create(ctx, "s", nil, time.Minute, 0, cluster.CreateOptions{}) },
		"Load": func() error {
			_, err := b.Sessions.Load(ctx, "s", time.Minute, "")
			return err
		},
		"Append": func() error {
			_, err := b.Events.Append(ctx, "s", "x", nil, false, cluster.Limits{})
			return err
		},
		"Read": func() error {
			_, _, err := b.Events.Read(ctx, "s", "x", 0)
			return err
		},
		"Publish": func() error {
			_, err := b.Bus.Publish(ctx, "news", []byte("lost"))
			return err
		},
		"Heartbeat": func() error { return b.Members.Heartbeat(ctx, "n", time.Second) },
		"Claim": func() error {
			_, err := b.Claims.Claim(ctx, "k", "o", time.Second)
			return err
		},
		"Subscribe": func() error {
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			s, err := b.Bus.Subscribe(sctx, "other", func([]byte) {})
			if err == nil {
				s()
			}
			return err
		},
	}
	for name, op := range checks {
		err := op()
		if !errors.Is(err, cluster.ErrUnavailable) && !(name == "Subscribe" && errors.Is(err, context.DeadlineExceeded)) {
			t.Errorf("%s while Redis is down: got %v, want ErrUnavailable", name, err)
		}
	}

	srv.Restart()
	waitFor(t, 10*time.Second, "Ping to succeed again", func() bool { return b.Ping(ctx) == nil })
	if err := b.Sessions.Create(ctx, "s", map[string]string{"a": "1"}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatalf("Create after recovery: %v", err)
	}
	if _, err := b.Sessions.Load(ctx, "s", time.Minute, ""); err != nil {
		t.Fatalf("Load after recovery: %v", err)
	}
	waitFor(t, 10*time.Second, "OnReconnect", func() bool { return reconnects.Load() > 0 })
	waitFor(t, 5*time.Second, "a re-read hint to the follower", func() bool {
		for {
			select {
			case ev := <-hints:
				if ev.Seq == 0 {
					return true
				}
			default:
				return false
			}
		}
	})

	// The old subscription is live again: a Publish from another node
	// reaches it.
	other := backend(t, client(t, srv, ""), redis.Options{Prefix: prefix})
	if n, err := other.Bus.Publish(ctx, "news", []byte("back")); err != nil || n != 1 {
		t.Fatalf("Publish after the reconnect: got %d receivers, %v, want 1", n, err)
	}
	select {
	case m := <-got:
		if m != "back" {
			t.Fatalf("got %q, want back", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the old subscriber missed a message published after the restart")
	}
}

// TestNodesShareStreams follows, on node B, a stream appended on node A
// (flow 4 of docs/ARCHITECTURE.md): replay plus live, exactly once.
func TestNodesShareStreams(t *testing.T) {
	srv := redistest.Start(t)
	prefix := fmt.Sprintf("shared%d", prefixes.Add(1))
	a := backend(t, client(t, srv, ""), redis.Options{Prefix: prefix})
	b := backend(t, client(t, srv, ""), redis.Options{Prefix: prefix})
	ctx := t.Context()
	lim := cluster.Limits{MaxEvents: 1000, MaxStreams: 10, TTL: time.Minute}
	if err := a.Events.Open(ctx, "x", cluster.StreamMeta{Session: "s", Owner: "A"}, lim); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := a.Events.Append(ctx, "s", "x", fmt.Appendf(nil, "%d", i), false, lim); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		seqs []uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		_, r.err = cluster.Tail(ctx, b.Events, "s", "x", 3, func(ev cluster.Event) error {
			r.seqs = append(r.seqs, ev.Seq)
			return nil
		})
		done <- r
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if _, err := a.Events.Append(ctx, "s", "x", []byte("live"), false, lim); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	last, err := a.Events.Append(ctx, "s", "x", []byte("final"), true, lim)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	var want []uint64
	for s := uint64(4); s <= last; s++ {
		want = append(want, s)
	}
	if r.err != nil || !slices.Equal(r.seqs, want) {
		t.Fatalf("Tail on node B: got %v, %v, want 4..%d", r.seqs, r.err, last)
	}
	if _, _, err := b.Events.Read(ctx, "intruder", "x", 0); !errors.Is(err, cluster.ErrForbidden) {
		t.Fatalf("Read by another session on node B: got %v, want ErrForbidden", err)
	}
}

// TestConnectionsBounded opens 200 follows and 50 bus subscriptions: the
// node's Redis connections stay at the pool plus one pub/sub connection.
func TestConnectionsBounded(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv, "?pool_size=4")
	b := backend(t, c, redis.Options{})
	ctx := t.Context()
	clients := func() int {
		admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
		defer admin.Close()
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(strings.TrimSpace(list), "\n") // minus the admin connection itself
	}
	lim := cluster.Limits{}
	var cancels []func()
	var delivered atomic.Int64
	for i := range 200 {
		x := fmt.Sprintf("x%d", i)
		if err := b.Events.Open(ctx, x, cluster.StreamMeta{Session: fmt.Sprintf("s%d", i%20)}, lim); err != nil {
			t.Fatal(err)
		}
		cancel, err := b.Events.Follow(ctx, fmt.Sprintf("s%d", i%20), x, func(ev cluster.Event) { delivered.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
		if _, _, err := b.Events.Read(ctx, fmt.Sprintf("s%d", i%20), x, 0); err != nil { // marks it followed
			t.Fatal(err)
		}
	}
	for i := range 50 {
		cancel, err := b.Bus.Subscribe(ctx, fmt.Sprintf("t%d", i), func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			x := fmt.Sprintf("x%d", i)
			if _, err := b.Events.Append(ctx, fmt.Sprintf("s%d", i%20), x, []byte("hi"), false, lim); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "every follower to get its event", func() bool { return delivered.Load() == 200 })
	if n := clients(); n > 4+1 {
		t.Fatalf("%d Redis connections for 250 subscriptions, want at most pool (4) + pub/sub (1)", n)
	} else {
		t.Logf("%d Redis connections for 250 subscriptions", n)
	}
	for _, cancel := range cancels {
		cancel()
	}
}

// TestSessionIDsNeedNoCare uses ids that would break naive hash tags.
func TestSessionIDsNeedNoCare(t *testing.T) {
	for _, mode := range []redistest.Options{{}, {Cluster: true}} {
		srv := redistest.StartWith(t, mode)
		b := backend(t, client(t, srv, ""), redis.Options{})
		ctx := t.Context()
		for _, id := range []string{"", "a{b}c", "}{", "%7B", "x:y", "{}"} {
			if err := b.Sessions.Create(ctx, id, map[string]string{"k": id}, time.Minute, 0, cluster.CreateOptions{}); err != nil {
				t.Fatalf("Create(%q): %v", id, err)
			}
			if err := b.Events.Open(ctx, "x"+id, cluster.StreamMeta{Session: id}, cluster.Limits{}); err != nil {
				t.Fatalf("Open for %q: %v", id, err)
			}
			if _, err := b.Events.Append(ctx, id, "x"+id, []byte("e"), false, cluster.Limits{}); err != nil {
				t.Fatalf("Append for %q: %v", id, err)
			}
			if _, err := b.Claims.Claim(ctx, "session:"+id+":get", "c", time.Minute); err != nil {
				t.Fatalf("Claim for %q: %v", id, err)
			}
		}
		for _, id := range []string{"", "a{b}c", "}{", "%7B", "x:y", "{}"} {
			f, err := b.Sessions.Load(ctx, id, time.Minute, "")
			if err != nil || f["k"] != id {
				t.Fatalf("Load(%q): got %v, %v", id, f, err)
			}
			if live, err := b.Sessions.End(ctx, id, cluster.EndOptions{}); err != nil || !live {
				t.Fatalf("End(%q): got %v, %v", id, live, err)
			}
		}
		if n, err := b.Sessions.Count(ctx); err != nil || n != 0 {
			t.Fatalf("Count: got %d, %v, want 0", n, err)
		}
	}
}

// The server refuses the re-subscription of a node whose pub/sub
// connection it dropped (an ACL here; a server still loading after a
// failover does the same): the bus stays not ready, publishing to it
// counts no receiver, and once the server accepts the subscription again
// the bus re-subscribes every channel by itself, reports ready only then,
// and receives. Publish counts one receiver per node.
func TestBusRecoversFromRefusedSubscription(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Args: []string{"--user", "cut", "on", ">pw", "~*", "&*", "+@all"}})
	opts, err := redis.ParseURL("redis://cut:pw@" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cutClient := goredis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = cutClient.Close() })
	prefix := fmt.Sprintf("refused%d", prefixes.Add(1))
	cut := backend(t, cutClient, redis.Options{Prefix: prefix, PingInterval: 200 * time.Millisecond})
	other := backend(t, client(t, srv, ""), redis.Options{Prefix: prefix})
	ctx := t.Context()
	got := make(chan string, 10)
	stop, err := cut.Bus.Subscribe(ctx, "news", func(m []byte) { got <- string(m) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stopOther, err := other.Bus.Subscribe(ctx, "news", func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := other.Bus.Publish(ctx, "news", []byte("both")); err != nil || n != 2 {
		t.Fatalf("Publish to two nodes: got %d receivers, %v, want 2", n, err)
	}
	stopOther()
	<-got

	acl := func(rule string) {
		t.Helper()
		if line, err := srv.Do("ACL SETUSER cut " + rule); err != nil || line != "+OK" {
			t.Fatalf("ACL SETUSER cut %s: %q, %v", rule, line, err)
		}
	}
	acl("resetchannels")
	waitFor(t, 5*time.Second, "the bus to report the lost connection", func() bool { return !cut.Ready() })
	time.Sleep(500 * time.Millisecond) // a few refused re-subscriptions and health pings
	if cut.Ready() {
		t.Fatalf("the bus reports ready while its subscriptions are refused")
	}
	if n, err := other.Bus.Publish(ctx, "news", []byte("lost")); err != nil || n != 0 {
		t.Fatalf("Publish to the cut node: got %d receivers, %v, want 0", n, err)
	}

	acl("allchannels")
	waitFor(t, 5*time.Second, "the bus to report ready again", cut.Ready)
	if n, err := other.Bus.Publish(ctx, "news", []byte("back")); err != nil || n != 1 {
		t.Fatalf("Publish once ready again: got %d receivers, %v, want 1", n, err)
	}
	select {
	case m := <-got:
		if m != "back" {
			t.Fatalf("got %q, want back", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the re-subscribed bus did not receive")
	}
}
