package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// lostReply makes the network lose one reply: once armed, the next
// command written runs on the real server, but its reply is read and
// thrown away and the client sees a read timeout instead, as when the
// reply arrives after ReadTimeout. go-redis then sends the command again
// on a fresh connection.
type lostReply struct {
	armed atomic.Bool
	lost  atomic.Int32
}

// dial connects through the lossy network.
func (l *lostReply) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, l: l}, nil
}

type lossyConn struct {
	net.Conn
	l    *lostReply
	mu   sync.Mutex
	drop bool
}

func (c *lossyConn) Write(p []byte) (int, error) {
	// Only scripts and SET: the handshake and PINGs pass.
	lower := bytes.ToLower(p)
	call := bytes.Contains(lower, []byte("eval")) || bytes.Contains(lower, []byte("\r\nset\r\n"))
	if call && c.l.armed.CompareAndSwap(true, false) {
		c.mu.Lock()
		c.drop = true
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *lossyConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	drop := c.drop
	c.drop = false
	c.mu.Unlock()
	if drop {
		// The server ran the command: wait for its reply, then lose it.
		_, _ = c.Conn.Read(p)
		c.l.lost.Add(1)
		return 0, timeoutError{}
	}
	return c.Conn.Read(p)
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout (reply lost by the test)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestRetriedScriptsRunOnce loses the reply of each non-idempotent call
// once, so go-redis sends it again after Redis ran it: the call must
// still have its effect once and answer as the first run did.
func TestRetriedScriptsRunOnce(t *testing.T) {
	onSingleAndCluster(t, retriedScriptsRunOnce)
}

// onSingleAndCluster runs f on a Redis server and on a Redis Cluster.
func onSingleAndCluster(t *testing.T, f func(t *testing.T, srv *redistest.Server)) {
	for _, mode := range []struct {
		name string
		opts redistest.Options
	}{
		{"single", redistest.Options{}},
		{"cluster", redistest.Options{Cluster: true}},
	} {
		t.Run(mode.name, func(t *testing.T) { f(t, redistest.StartWith(t, mode.opts)) })
	}
}

// lossyClient is a client of srv through a network that loses the
// replies l is armed for; go-redis retries (3 times, after a 200ms read
// timeout).
func lossyClient(t *testing.T, srv *redistest.Server, l *lostReply) goredis.UniversalClient {
	url := srv.URL()
	if srv.Cluster() {
		url = "redis-cluster://" + srv.Addr()
	}
	opts, err := redis.ParseURL(url + "?max_retries=3&read_timeout=200ms")
	if err != nil {
		t.Fatal(err)
	}
	opts.Dialer = l.dial
	c := goredis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func retriedScriptsRunOnce(t *testing.T, srv *redistest.Server) {
	l := &lostReply{}
	c := lossyClient(t, srv, l)
	// No janitor: its commands must not take the lost reply.
	b := backend(t, c, redis.Options{JanitorInterval: -1})
	ctx := t.Context()
	lim := cluster.Limits{}
	// Load every script first, so that the lost reply is never NOSCRIPT.
	if err := b.Sessions.Create(ctx, "warm", nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Events.Open(ctx, "warm", cluster.StreamMeta{Session: "warm"}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.Append(ctx, "warm", "warm", nil, false, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Events.AppendBatch(ctx, "warm", "warm", [][]byte{nil}, false, cluster.Batch{}, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claims.Once(ctx, "warm", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sessions.End(ctx, "warm", cluster.EndOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Limiter.Take(ctx, []cluster.Debit{{Key: "warm", N: 1, Rate: 1, Burst: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Registry.Swap(ctx, "warm", true, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Registry.Toggle(ctx, "warm", true); err != nil {
		t.Fatal(err)
	}
	lose := func(t *testing.T) {
		t.Helper()
		l.armed.Store(true)
	}
	check := func(t *testing.T, before int32) {
		t.Helper()
		if l.lost.Load() != before+1 {
			t.Fatalf("no reply was lost (%d): the test did not exercise a retry", l.lost.Load()-before)
		}
	}

	t.Run("Append", func(t *testing.T) {
		if err := b.Sessions.Create(ctx, "s1", nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.Events.Open(ctx, "x1", cluster.StreamMeta{Session: "s1"}, lim); err != nil {
			t.Fatal(err)
		}
		for i, data := range []string{"a", "b", "fin"} {
			n := l.lost.Load()
			lose(t)
			seq, err := b.Events.Append(ctx, "s1", "x1", []byte(data), data == "fin", lim)
			if err != nil {
				t.Fatalf("append %q: %v", data, err)
			}
			check(t, n)
			if seq != uint64(i+1) {
				t.Errorf("append %q: seq %d, want %d", data, seq, i+1)
			}
		}
		evs, info, err := b.Events.Read(ctx, "s1", "x1", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, string(ev.Data))
		}
		if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "fin" || info.Last != 3 || !info.Done {
			t.Fatalf("history %q (last %d, done %v), want [a b fin] once each", got, info.Last, info.Done)
		}
	})
	t.Run("AppendBatch", func(t *testing.T) {
		if err := b.Sessions.Create(ctx, "s4", nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		open := &cluster.StreamMeta{Session: "s4", Owner: "n", Request: "n:1"}
		for i, batch := range [][]string{{"", "a"}, {"b", "c"}, {"fin"}} {
			data := make([][]byte, len(batch))
			for j, d := range batch {
				data[j] = []byte(d)
			}
			n := l.lost.Load()
			lose(t)
			first, err := b.Events.AppendBatch(ctx, "s4", "x4", data, i == 2, cluster.Batch{Open: open}, lim)
			if err != nil {
				t.Fatalf("batch %q: %v", batch, err)
			}
			check(t, n)
			if want := uint64(2*i + 1); first != want {
				t.Errorf("batch %q: first seq %d, want %d", batch, first, want)
			}
		}
		evs, info, err := b.Events.Read(ctx, "s4", "x4", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, string(ev.Data))
		}
		if fmt.Sprint(got) != "[ a b c fin]" || info.Last != 5 || !info.Done {
			t.Fatalf("history %q (last %d, done %v), want [ a b c fin] once each", got, info.Last, info.Done)
		}
	})
	// leased reports whether the caller's lease set holds a member (it
	// holds at most one here).
	leased := func(t *testing.T, key string) bool {
		t.Helper()
		ok, _, err := b.Limiter.Acquire(ctx, key, "probe", time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := b.Limiter.Release(ctx, key, "probe"); err != nil {
				t.Fatal(err)
			}
		}
		return !ok
	}
	lease := cluster.CreateOptions{Lease: &cluster.SessionLease{Key: "caller", TTL: time.Minute, Max: 1}}
	t.Run("Create", func(t *testing.T) {
		n := l.lost.Load()
		lose(t)
		if err := b.Sessions.Create(ctx, "s2", map[string]string{"k": "v"}, time.Minute, 0, lease); err != nil {
			t.Fatalf("create with a lost reply: %v", err)
		}
		check(t, n)
		if err := b.Sessions.Create(ctx, "s2", nil, time.Minute, 0, lease); err == nil {
			t.Fatal("a second Create of the same id succeeded")
		}
		if !leased(t, "caller") {
			t.Fatal("the created session holds no lease")
		}
	})
	t.Run("End", func(t *testing.T) {
		if _, err := b.Sessions.End(ctx, "s2", cluster.EndOptions{Lease: "caller"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Sessions.Create(ctx, "s3", nil, time.Minute, 0, lease); err != nil {
			t.Fatal(err)
		}
		n := l.lost.Load()
		lose(t)
		live, err := b.Sessions.End(ctx, "s3", cluster.EndOptions{Lease: "caller"})
		if err != nil || !live {
			t.Fatalf("end with a lost reply: live %v, %v; want true", live, err)
		}
		check(t, n)
		if live, err := b.Sessions.End(ctx, "s3", cluster.EndOptions{}); err != nil || live {
			t.Fatalf("second End: live %v, %v; want false", live, err)
		}
		if leased(t, "caller") {
			t.Fatal("the ended session's lease is held")
		}
	})
	t.Run("Take", func(t *testing.T) {
		d := []cluster.Debit{{Key: "bucket", N: 1, Rate: 0.001, Burst: 3}}
		n := l.lost.Load()
		lose(t)
		w, err := b.Limiter.Take(ctx, d)
		if err != nil {
			t.Fatalf("take with a lost reply: %v", err)
		}
		check(t, n)
		// The retry answers what the lost call did: two tokens left.
		if w[0].Wait != 0 || w[0].Balance < 2 || w[0].Balance > 2.01 {
			t.Fatalf("take with a lost reply: got %+v, want no wait and a balance of 2", w[0])
		}
		// Two of three tokens taken leave one: no wait. Had the retry
		// debited again, none would be left.
		w, err = b.Limiter.Take(ctx, d)
		if err != nil || w[0].Wait != 0 {
			t.Fatalf("second take: %v, %v; want no wait (the retried take debited twice)", w, err)
		}
	})
	t.Run("Toggle", func(t *testing.T) {
		for i, want := range []bool{true, false, true} {
			n := l.lost.Load()
			lose(t)
			on, err := b.Registry.Toggle(ctx, "tool:t", false)
			if err != nil {
				t.Fatalf("toggle %d with a lost reply: %v", i+1, err)
			}
			check(t, n)
			if on != want {
				t.Fatalf("toggle %d with a lost reply: got %v, want %v (the retry flipped it again)", i+1, on, want)
			}
		}
	})
	t.Run("Swap", func(t *testing.T) {
		for i, step := range []struct{ on, was bool }{{true, false}, {true, true}, {false, true}} {
			n := l.lost.Load()
			lose(t)
			was, err := b.Registry.Swap(ctx, "tool:s", step.on, false)
			if err != nil {
				t.Fatalf("swap %d with a lost reply: %v", i+1, err)
			}
			check(t, n)
			if was != step.was {
				t.Fatalf("swap %d to %v with a lost reply: was %v, want %v (the retry hid the change)", i+1, step.on, was, step.was)
			}
		}
	})
	t.Run("Once", func(t *testing.T) {
		n := l.lost.Load()
		lose(t)
		first, err := b.Claims.Once(ctx, "tok", time.Minute)
		if err != nil || !first {
			t.Fatalf("once with a lost reply: %v, %v; want true", first, err)
		}
		check(t, n)
		if again, err := b.Claims.Once(ctx, "tok", time.Minute); err != nil || again {
			t.Fatalf("second Once: %v, %v; want false", again, err)
		}
	})
}

// Releasing a session's claim also drops it from the session's claim
// index, so a long session that claims and releases many keys keeps a
// bounded index.
func TestReleaseDropsSessionClaimIndexEntry(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv, "")
	b := backend(t, c, redis.Options{Prefix: "rel"})
	ctx := t.Context()
	for i := range 20 {
		key := "session:s:follow:x" + strconv.Itoa(i)
		if _, err := b.Claims.Claim(ctx, key, "conn", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := b.Claims.Release(ctx, key, "conn"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Claims.Claim(ctx, "session:s:get", "conn", time.Minute); err != nil {
		t.Fatal(err)
	}
	members, err := c.SMembers(ctx, "rel:{s}:claims").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0] != "get" {
		t.Fatalf("claim index %q, want only the held claim [get]", members)
	}
}
