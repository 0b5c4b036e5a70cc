package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// countingClaims and countingSessions count the upkeep calls a node makes.
type countingClaims struct {
	cluster.Claims
	renew, renewMany atomic.Int64
}

func (c *countingClaims) Renew(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	c.renew.Add(1)
	return c.Claims.Renew(ctx, key, owner, ttl)
}

func (c *countingClaims) RenewMany(ctx context.Context, claims []cluster.Held, ttl time.Duration) ([]bool, error) {
	c.renewMany.Add(1)
	return c.Claims.RenewMany(ctx, claims, ttl)
}

type countingSessions struct {
	cluster.SessionStore
	touch, touchMany atomic.Int64
}

func (c *countingSessions) Touch(ctx context.Context, id string, ttl time.Duration) error {
	c.touch.Add(1)
	return c.SessionStore.Touch(ctx, id, ttl)
}

func (c *countingSessions) TouchMany(ctx context.Context, ids []string, ttl time.Duration) ([]bool, error) {
	c.touchMany.Add(1)
	return c.SessionStore.TouchMany(ctx, ids, ttl)
}

// The claims and sessions of all open streams are kept alive by one
// node-wide loop in one batched call per interval (ClaimTTL/4 for claims,
// which live as long as the node's lease, SessionTTL/4 for sessions),
// not by calls per stream; a lost claim or an ended session ends exactly
// its stream.
func TestNodeUpkeepBatches(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	claims := &countingClaims{Claims: mem.Claims}
	sessions := &countingSessions{SessionStore: mem.Sessions}
	be := *mem
	be.Claims, be.Sessions = claims, sessions
	const leaseTTL, sessionTTL = 300 * time.Millisecond, 400 * time.Millisecond
	store := session.NewStore(be.Sessions, session.Options{TTL: sessionTTL})
	n := coordinator.NewNode(coordinator.Config{
		Backend: &be, Waiters: coordinator.New("a", "inc", be.Bus, 0), Sessions: store,
		LeaseTTL: leaseTTL, SessionTTL: sessionTTL, HistoryTTL: time.Minute, MaxFanOuts: 2,
		Log: zerolog.Nop(), Metrics: telemetry.NewMetrics("a"),
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(errors.New("closed")); n.Leave() })

	ctx := context.Background()
	const streams = 20
	type stream struct {
		ctx         context.Context
		claim, sess string
	}
	var ss []stream
	for i := range streams {
		sid := newSession(t, store)
		key := coordinator.GetKey(sid)
		conn := fmt.Sprintf("c%d", i)
		if _, err := be.Claims.Claim(ctx, key, conn, n.ClaimTTL()); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancelCause(ctx)
		t.Cleanup(func() { cancel(nil) })
		go n.RunUpkeep(sctx, coordinator.Upkeep{
			Conn: &coordinator.Conn{ID: conn, Cancel: cancel}, Claim: key, Session: sid,
		})
		ss = append(ss, stream{sctx, key, sid})
	}
	wait := n.ClaimTTL()/2 + 100*time.Millisecond
	time.Sleep(wait)
	for i, s := range ss {
		if s.ctx.Err() != nil {
			t.Fatalf("stream %d ended: %v", i, context.Cause(s.ctx))
		}
		if h, err := be.Claims.Holder(ctx, s.claim); err != nil || h != fmt.Sprintf("c%d", i) {
			t.Fatalf("claim of stream %d: holder %q, %v (not renewed)", i, h, err)
		}
	}
	if c, err := mem.Sessions.Count(ctx); err != nil || c != streams {
		t.Fatalf("live sessions: %d, %v, want %d (not slid)", c, err, streams)
	}
	if r, tc := claims.renew.Load(), sessions.touch.Load(); r != 0 || tc != 0 {
		t.Fatalf("per-stream calls: %d Renew, %d Touch, want none", r, tc)
	}
	// About wait/(ClaimTTL/4) renewals and wait/(sessionTTL/4) touches,
	// whatever the number of streams.
	if r := claims.renewMany.Load(); r < 1 || r > int64(wait/(n.ClaimTTL()/4))+1 {
		t.Fatalf("RenewMany calls: %d", r)
	}
	if tc := sessions.touchMany.Load(); tc < 2 || tc > int64(wait/(sessionTTL/4))+1 {
		t.Fatalf("TouchMany calls: %d", tc)
	}

	// Take over the claim of stream 0 and end the session of stream 1.
	if _, err := be.Claims.Claim(ctx, ss[0].claim, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.End(ctx, ss[1].sess, "", nil, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the two streams to end", func() bool { return ss[0].ctx.Err() != nil && ss[1].ctx.Err() != nil })
	if c := context.Cause(ss[0].ctx); !errors.Is(c, coordinator.ErrTakenOver) {
		t.Fatalf("stream 0 ended with %v", c)
	}
	if c := context.Cause(ss[1].ctx); !errors.Is(c, coordinator.ErrSessionEnded) && !errors.Is(c, coordinator.ErrTakenOver) {
		t.Fatalf("stream 1 ended with %v", c)
	}
	time.Sleep(n.ClaimTTL() / 4)
	for i, s := range ss[2:] {
		if s.ctx.Err() != nil {
			t.Fatalf("stream %d ended: %v", i+2, context.Cause(s.ctx))
		}
	}
}

// A session used only from a node's cache (its hits do not reach the
// store) is slid by the node's upkeep, so it outlives its idle timeout
// counted from its last use, not from its last read. It fails when the
// upkeep slides only the sessions of open streams.
func TestNodeUpkeepSlidesCacheHits(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	const sessionTTL = 2 * time.Second
	store := session.NewStore(mem.Sessions, session.Options{TTL: sessionTTL, CacheTTL: time.Hour}) // a copy lives sessionTTL/4
	n := coordinator.NewNode(coordinator.Config{
		Backend: mem, Waiters: coordinator.New("a", "inc", mem.Bus, 0), Sessions: store,
		LeaseTTL: time.Minute, SessionTTL: sessionTTL, HistoryTTL: time.Minute, MaxFanOuts: 2,
		Log: zerolog.Nop(), Metrics: telemetry.NewMetrics("a"),
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(errors.New("closed")); n.Leave() })
	ctx := t.Context()
	sid := newSession(t, store) // the store's TTL runs from here
	created := time.Now()
	time.Sleep(sessionTTL/4 - 100*time.Millisecond)
	if _, err := store.Load(ctx, sid); err != nil { // a hit: the copy is fresh
		t.Fatal(err)
	}
	time.Sleep(time.Until(created.Add(sessionTTL + 200*time.Millisecond)))
	if err := mem.Sessions.Touch(ctx, sid, sessionTTL); errors.Is(err, cluster.ErrNotFound) {
		t.Fatal("the session expired in the store although a request used it (from the cache) less than its TTL ago")
	} else if err != nil {
		t.Fatal(err)
	}
}
