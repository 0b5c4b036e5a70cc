package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// maxSubs is the subscription bound of the test backends.
const maxSubs = 2

// eachBackend runs fn on a fresh memory session store and on a fresh one
// on a redis-server the test starts.
func eachBackend(t *testing.T, fn func(t *testing.T, be cluster.SessionStore)) {
	t.Run("memory", func(t *testing.T) {
		b := memory.New(memory.Options{MaxSubscriptions: maxSubs})
		t.Cleanup(func() { _ = b.Close() })
		fn(t, b.Sessions)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		var n atomic.Int64
		fn(t, newRedis(t, srv, &n))
	})
}

func newRedis(t *testing.T, srv *redistest.Server, n *atomic.Int64) cluster.SessionStore {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	b, err := redis.New(t.Context(), c, redis.Options{Prefix: fmt.Sprintf("t%d", n.Add(1)), MaxSubscriptions: maxSubs})
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b.Sessions
}

func newSession(id string) *session.Session {
	return &session.Session{
		ID: id, Version: "2025-11-25", Capabilities: json.RawMessage(`{"sampling":{}}`),
		ClientInfo: json.RawMessage(`{"name":"c","version":"1"}`),
	}
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, be cluster.SessionStore) {
		ctx := t.Context()
		clk := newClock()
		st := session.NewStore(be, session.Options{TTL: time.Minute, Now: clk.Now})

		t.Run("CreateLoad", func(t *testing.T) {
			s := newSession("a")
			if err := st.Create(ctx, s, nil); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if !s.Created.Equal(clk.Now()) {
				t.Errorf("Created: got %v, want the clock's %v", s.Created, clk.Now())
			}
			clk.Advance(time.Second)
			got, err := st.Load(ctx, "a")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !sameStored(got, s) {
				t.Fatalf("Load: got %+v, want %+v", got, s)
			}
			if !got.LastUsed.Equal(clk.Now()) {
				t.Errorf("LastUsed: got %v, want the time of the load %v", got.LastUsed, clk.Now())
			}
			if err := st.Create(ctx, newSession("a"), nil); err == nil {
				t.Errorf("Create of an existing id: got nil error")
			}
		})

		t.Run("Unknown", func(t *testing.T) {
			if _, err := st.Load(ctx, "nope"); !errors.Is(err, cluster.ErrNotFound) {
				t.Errorf("Load: got %v, want ErrNotFound", err)
			}
			if err := st.Touch(ctx, "nope"); !errors.Is(err, cluster.ErrNotFound) {
				t.Errorf("Touch: got %v, want ErrNotFound", err)
			}
			if _, err := st.SetLogLevel(ctx, "nope", "info"); !errors.Is(err, cluster.ErrNotFound) {
				t.Errorf("SetLogLevel: got %v, want ErrNotFound", err)
			}
			if err := st.Subscribe(ctx, "nope", "file:///x"); !errors.Is(err, cluster.ErrNotFound) {
				t.Errorf("Subscribe: got %v, want ErrNotFound", err)
			}
		})

		t.Run("SetLogLevel", func(t *testing.T) {
			if err := st.Create(ctx, newSession("lvl"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := st.SetLogLevel(ctx, "lvl", "warning"); err != nil {
				t.Fatalf("SetLogLevel: %v", err)
			}
			got, err := st.Load(ctx, "lvl")
			if err != nil {
				t.Fatal(err)
			}
			if got.LogLevel != "warning" || got.Version != "2025-11-25" {
				t.Fatalf("got level %q, version %q; want warning and the version kept", got.LogLevel, got.Version)
			}
		})

		t.Run("Subscribe", func(t *testing.T) {
			if err := st.Create(ctx, newSession("sub"), nil); err != nil {
				t.Fatal(err)
			}
			for _, uri := range []string{"file:///a", "file:///b", "file:///a"} {
				if err := st.Subscribe(ctx, "sub", uri); err != nil {
					t.Fatalf("Subscribe %s: %v", uri, err)
				}
			}
			if err := st.Subscribe(ctx, "sub", "file:///c"); !errors.Is(err, cluster.ErrLimit) {
				t.Fatalf("Subscribe past the bound: got %v, want ErrLimit", err)
			}
			if err := st.Unsubscribe(ctx, "sub", "file:///a"); err != nil {
				t.Fatal(err)
			}
			for uri, want := range map[string]bool{"file:///a": false, "file:///b": true} {
				ids, err := be.Subscribers(ctx, uri)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Contains(ids, "sub"); got != want {
					t.Errorf("subscribers of %s: got %v, want sub there: %v", uri, ids, want)
				}
			}
		})

		t.Run("End", func(t *testing.T) {
			if err := st.Create(ctx, newSession("end"), nil); err != nil {
				t.Fatal(err)
			}
			if live, _, err := st.End(ctx, "end", "", nil, ""); err != nil || !live {
				t.Fatalf("End: got %v, %v; want true", live, err)
			}
			if _, err := st.Load(ctx, "end"); !errors.Is(err, cluster.ErrNotFound) {
				t.Fatalf("Load after End: got %v, want ErrNotFound", err)
			}
			if live, _, err := st.End(ctx, "end", "", nil, ""); err != nil || live {
				t.Fatalf("End again: got %v, %v; want false", live, err)
			}
		})

		t.Run("Records", func(t *testing.T) {
			for _, c := range []struct {
				id     string
				fields map[string]string
				want   error
			}{
				// As the mcp package wrote sessions before the codec.
				{"format1", map[string]string{"v": "2025-06-18", "caps": `{"roots":{}}`, "c": "2026-11-21T10:00:00Z", "p": "", "lvl": "debug"}, nil},
				{"corrupt", map[string]string{"v": "2025-06-18", "caps": `{"roots":`, "c": "2026-11-21T10:00:00Z"}, session.ErrCorrupt},
				{"newer", map[string]string{"f": "9", "v": "2025-06-18"}, session.ErrFormat},
			} {
				if err := be.Create(ctx, c.id, c.fields, time.Minute, 0, cluster.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				got, err := st.Load(ctx, c.id)
				if !errors.Is(err, c.want) || (c.want == nil) != (got != nil) {
					t.Errorf("%s: got %+v, %v; want error %v", c.id, got, err, c.want)
				}
			}
		})
	})
}

func TestStoreMaxSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, be cluster.SessionStore) {
		st := session.NewStore(be, session.Options{TTL: time.Minute, MaxSessions: 1})
		if err := st.Create(t.Context(), newSession("one"), nil); err != nil {
			t.Fatal(err)
		}
		if err := st.Create(t.Context(), newSession("two"), nil); !errors.Is(err, cluster.ErrLimit) {
			t.Fatalf("Create past MaxSessions: got %v, want ErrLimit", err)
		}
	})
}

// counting counts the loads that reach the store and records the idle
// timeout of each operation.
type counting struct {
	cluster.SessionStore
	loads atomic.Int64
	ttls  sync.Map // operation → last ttl
}

func (c *counting) Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error) {
	c.loads.Add(1)
	c.ttls.Store("load", ttl)
	return c.SessionStore.Load(ctx, id, ttl, holder)
}

func (c *counting) Touch(ctx context.Context, id string, ttl time.Duration) error {
	c.ttls.Store("touch", ttl)
	return c.SessionStore.Touch(ctx, id, ttl)
}

func (c *counting) Create(ctx context.Context, id string, fields map[string]string, ttl time.Duration, max int, opts cluster.CreateOptions) error {
	c.ttls.Store("create", ttl)
	return c.SessionStore.Create(ctx, id, fields, ttl, max, opts)
}

func newCounting(t *testing.T) *counting {
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	return &counting{SessionStore: b.Sessions}
}

// The idle timeout is set on Create and slid by every Load and Touch.
func TestStoreSlidesTTL(t *testing.T) {
	be := newCounting(t)
	st := session.NewStore(be, session.Options{TTL: 42 * time.Second})
	ctx := t.Context()
	if err := st.Create(ctx, newSession("s"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := st.Touch(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"create", "load", "touch"} {
		if got, _ := be.ttls.Load(op); got != 42*time.Second {
			t.Errorf("%s: got ttl %v, want 42s", op, got)
		}
	}
}

func TestStoreCache(t *testing.T) {
	ctx := t.Context()
	setup := func(t *testing.T, live func() bool) (*counting, *session.Store, *clock) {
		be := newCounting(t)
		clk := newClock()
		st := session.NewStore(be, session.Options{TTL: time.Minute, CacheTTL: time.Second, Now: clk.Now, Live: live})
		if err := st.Create(ctx, newSession("s"), nil); err != nil {
			t.Fatal(err)
		}
		return be, st, clk
	}
	load := func(t *testing.T, st *session.Store) *session.Session {
		t.Helper()
		s, err := st.Load(ctx, "s")
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return s
	}
	wantLoads := func(t *testing.T, be *counting, n int64) {
		t.Helper()
		if got := be.loads.Load(); got != n {
			t.Fatalf("loads from the store: got %d, want %d", got, n)
		}
	}

	// lives checks that the cached copy answers until life after it was
	// made, and that the store is read (loads+1 reads) at life.
	lives := func(t *testing.T, be *counting, st *session.Store, clk *clock, life time.Duration, loads int64) {
		t.Helper()
		clk.Advance(life - time.Millisecond)
		load(t, st)
		wantLoads(t, be, loads)
		clk.Advance(time.Millisecond)
		load(t, st)
		wantLoads(t, be, loads+1)
	}

	t.Run("HitUntilCacheTTL", func(t *testing.T) {
		be, st, clk := setup(t, nil)
		// Create cached what it wrote: the requests after initialize
		// do not read it back.
		lives(t, be, st, clk, time.Second, 0)
		lives(t, be, st, clk, time.Second, 1)
	})

	// A copy lives at most a quarter of the session's idle timeout, so a
	// session used only from the cache is read, and slid, long before
	// its TTL runs out.
	t.Run("CacheTTLCappedAtQuarterOfTTL", func(t *testing.T) {
		be := newCounting(t)
		clk := newClock()
		st := session.NewStore(be, session.Options{TTL: time.Minute, CacheTTL: time.Hour, Now: clk.Now})
		if err := st.Create(ctx, newSession("s"), nil); err != nil {
			t.Fatal(err)
		}
		lives(t, be, st, clk, 15*time.Second, 0)
	})

	// Hits do not slide the session's TTL in the store: Hits names them,
	// once, for the node's upkeep to slide.
	t.Run("HitsRecorded", func(t *testing.T) {
		_, st, _ := setup(t, nil)
		if got := st.Hits(); len(got) != 0 {
			t.Fatalf("Hits before any load: %v", got)
		}
		load(t, st)
		load(t, st)
		if got := st.Hits(); !slices.Equal(got, []string{"s"}) {
			t.Fatalf("Hits: got %v, want [s]", got)
		}
		if got := st.Hits(); len(got) != 0 {
			t.Fatalf("Hits again: got %v, want none", got)
		}
	})

	t.Run("OtherNodesChangeSeenAfterInvalidate", func(t *testing.T) {
		be, st, _ := setup(t, nil)
		load(t, st)
		// Another node sets the level: this node's copy is stale (as
		// documented) until the change's broadcast invalidates it.
		if _, err := be.Set(ctx, "s", map[string]string{"lvl": "error"}); err != nil {
			t.Fatal(err)
		}
		if got := load(t, st).LogLevel; got != "" {
			t.Fatalf("before Invalidate: got level %q from the cache, want the cached \"\"", got)
		}
		st.Invalidate("s")
		if got := load(t, st).LogLevel; got != "error" {
			t.Fatalf("after Invalidate: got level %q, want error", got)
		}
	})

	t.Run("OwnChangesSeenAtOnce", func(t *testing.T) {
		_, st, _ := setup(t, nil)
		load(t, st)
		if _, err := st.SetLogLevel(ctx, "s", "notice"); err != nil {
			t.Fatal(err)
		}
		if got := load(t, st).LogLevel; got != "notice" {
			t.Fatalf("after SetLogLevel: got level %q, want notice", got)
		}
		if _, _, err := st.End(ctx, "s", "", nil, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load(ctx, "s"); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("after End: got %v, want ErrNotFound", err)
		}
	})

	t.Run("EndedElsewhereDroppedOnNotFound", func(t *testing.T) {
		be, st, clk := setup(t, nil)
		load(t, st)
		if _, err := be.End(ctx, "s", cluster.EndOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := st.Touch(ctx, "s"); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("Touch: got %v, want ErrNotFound", err)
		}
		// Touch found it gone: the cached copy went with it.
		clk.Advance(time.Millisecond)
		if _, err := st.Load(ctx, "s"); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("Load: got %v, want ErrNotFound", err)
		}
	})

	t.Run("BypassedWhileNotLive", func(t *testing.T) {
		var live atomic.Bool
		be, st, _ := setup(t, live.Load)
		load(t, st)
		load(t, st)
		wantLoads(t, be, 2)
		live.Store(true)
		load(t, st)
		load(t, st)
		wantLoads(t, be, 3)
		// Invalidations lost while the bus was down: Flush.
		if _, err := be.Set(ctx, "s", map[string]string{"lvl": "alert"}); err != nil {
			t.Fatal(err)
		}
		st.Flush()
		if got := load(t, st).LogLevel; got != "alert" {
			t.Fatalf("after Flush: got level %q, want alert", got)
		}
	})

	// Current is asked before every answer from the cache: while it is
	// false the store is read, although the copy (kept while Live) is
	// there; once it holds again the copy answers.
	t.Run("AnsweredOnlyWhileCurrent", func(t *testing.T) {
		be := newCounting(t)
		var current atomic.Bool
		var asked atomic.Int64
		st := session.NewStore(be, session.Options{TTL: time.Minute, CacheTTL: time.Second, Now: newClock().Now,
			Current: func() bool { asked.Add(1); return current.Load() }})
		if err := st.Create(ctx, newSession("s"), nil); err != nil {
			t.Fatal(err)
		}
		load(t, st)
		load(t, st)
		wantLoads(t, be, 2)
		current.Store(true)
		load(t, st)
		load(t, st)
		wantLoads(t, be, 2)
		if asked.Load() != 4 {
			t.Fatalf("Current asked %d times for 4 loads, want 4", asked.Load())
		}
	})

	t.Run("NoCacheWithoutCacheTTL", func(t *testing.T) {
		be := newCounting(t)
		st := session.NewStore(be, session.Options{TTL: time.Minute})
		if err := st.Create(ctx, newSession("s"), nil); err != nil {
			t.Fatal(err)
		}
		load(t, st)
		load(t, st)
		wantLoads(t, be, 2)
	})

	// A load that read the store before a change, and returns after the
	// change's invalidation, must not cache what it read: the copy would
	// outlive the invalidation meant to drop it.
	t.Run("LoadOvertakenByInvalidateIsNotCached", func(t *testing.T) {
		be, _, _ := setup(t, nil)
		old, err := be.Load(ctx, "s", time.Minute, "")
		if err != nil {
			t.Fatal(err)
		}
		slow := &slowOnce{SessionStore: be, fields: old, read: make(chan struct{}), resume: make(chan struct{})}
		st := session.NewStore(slow, session.Options{TTL: time.Minute, CacheTTL: time.Hour})
		slowDone := make(chan *session.Session)
		go func() {
			s, err := st.Load(ctx, "s")
			if err != nil {
				t.Error(err)
			}
			slowDone <- s
		}()
		// The slow load has read the old state; the change lands and is
		// invalidated while its answer is in flight.
		<-slow.read
		if _, err := be.Set(ctx, "s", map[string]string{"lvl": "critical"}); err != nil {
			t.Fatal(err)
		}
		st.Invalidate("s")
		close(slow.resume)
		if s := <-slowDone; s == nil || s.LogLevel != "" {
			t.Fatalf("the slow load: got %+v, want the old state", s)
		}
		if got := load(t, st).LogLevel; got != "critical" {
			t.Fatalf("the next load: got level %q, want critical (the overtaken load cached a stale copy)", got)
		}
	})
}

// slowOnce answers its first load with fields read earlier, once resume
// is closed: a load whose answer was in flight while the session changed.
type slowOnce struct {
	cluster.SessionStore
	fields       map[string]string
	read, resume chan struct{}
	served       atomic.Bool
}

func (s *slowOnce) Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error) {
	if s.served.CompareAndSwap(false, true) {
		close(s.read)
		<-s.resume
		return s.fields, nil
	}
	return s.SessionStore.Load(ctx, id, ttl, holder)
}

// Loads, changes and invalidations from many goroutines (run with -race).
func TestStoreConcurrent(t *testing.T) {
	be := newCounting(t)
	st := session.NewStore(be, session.Options{TTL: time.Minute, CacheTTL: time.Hour, MaxCached: 3})
	ctx := t.Context()
	ids := []string{"a", "b", "c", "d", "e"}
	for _, id := range ids {
		if err := st.Create(ctx, newSession(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := ids[(g+i)%len(ids)]
				switch i % 7 {
				case 0:
					st.Invalidate(id)
				case 1:
					if _, err := st.SetLogLevel(ctx, id, "info"); err != nil {
						t.Error(err)
					}
				case 2:
					st.Flush()
				default:
					if _, err := st.Load(ctx, id); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		s, err := st.Load(ctx, id)
		if err != nil || s.LogLevel != "info" {
			t.Fatalf("%s: got %+v, %v; want level info", id, s, err)
		}
	}
}
