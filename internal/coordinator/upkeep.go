package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Upkeep is the periodic chores of one open stream.
type Upkeep struct {
	Conn *Conn
	// Claim is the claim to renew; losing it ends the stream with
	// ErrTakenOver.
	Claim string
	// Session is the session to keep alive while its GET stream is open
	// (a listening client is not idle); the stream ends with
	// ErrSessionEnded when the session is gone.
	Session string
	// Owner is the producer to watch on a resumed POST stream.
	Owner *OwnerWatch
}

// RunUpkeep keeps a stream's claim and session alive until ctx ends:
// they join the node-wide upkeep (renewed every LeaseTTL/3 and slid every
// SessionTTL/4 for all streams at once, see runUpkeep), which costs the
// stream no goroutine of its own. With an Owner it then watches, until
// ctx ends, the node that produces the resumed stream (every LeaseTTL/2);
// else it returns at once. SSE keep-alives are the stream writer's own
// (see sse.Writer).
func (n *Node) RunUpkeep(ctx context.Context, j Upkeep) {
	if j.Claim != "" || j.Session != "" {
		h := &held{conn: j.Conn, claim: j.Claim, session: j.Session}
		n.upkeep.add(h)
		context.AfterFunc(ctx, func() { n.upkeep.remove(h) })
	}
	if j.Owner == nil {
		return
	}
	t := time.NewTicker(n.leaseTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n.OwnerLost(ctx, j.Owner) {
				return
			}
		}
	}
}

// held is what an open stream keeps alive: its claim, its session, or
// both.
type held struct {
	conn           *Conn
	claim, session string
}

// upkeep is the set of streams whose claims and sessions the node keeps
// alive.
type upkeep struct {
	mu   sync.Mutex
	held map[*held]struct{}
}

func (u *upkeep) add(h *held) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held == nil {
		u.held = make(map[*held]struct{})
	}
	u.held[h] = struct{}{}
}

func (u *upkeep) remove(h *held) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.held, h)
}

// list returns the held entries that keep what want picks.
func (u *upkeep) list(want func(*held) string) []*held {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*held
	for h := range u.held {
		if want(h) != "" {
			out = append(out, h)
		}
	}
	return out
}

// end cancels with cause the streams of hs whose entry in kept is false,
// unless they left the upkeep meanwhile (their stream ended on its own).
func (u *upkeep) end(hs []*held, kept []bool, cause error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, h := range hs {
		if _, ok := u.held[h]; ok && !kept[i] {
			delete(u.held, h)
			h.conn.Cancel(cause)
		}
	}
}

func claimOf(h *held) string   { return h.claim }
func sessionOf(h *held) string { return h.session }

// runUpkeep renews the claims of every open stream of this node every
// LeaseTTL/3 in one RenewMany, and slides their sessions every
// SessionTTL/4 in one TouchMany, so an idle stream costs the store a
// share of one batched call instead of calls of its own. A stream whose
// claim was taken over, or whose session is gone, is ended as its own
// timers did before. A failed batch changes nothing: the next one retries.
func (n *Node) runUpkeep(ctx context.Context) {
	renew := time.NewTicker(n.leaseTTL / 3)
	defer renew.Stop()
	touch := time.NewTicker(max(n.sessionTTL/4, 50*time.Millisecond))
	defer touch.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			hs := n.upkeep.list(claimOf)
			if len(hs) == 0 {
				continue
			}
			claims := make([]cluster.Held, len(hs))
			for i, h := range hs {
				claims[i] = cluster.Held{Key: h.claim, Owner: h.conn.ID}
			}
			cctx, cancel := context.WithTimeout(ctx, n.leaseTTL/3)
			ok, err := n.be.Claims.RenewMany(cctx, claims, n.leaseTTL)
			cancel()
			if err == nil {
				n.upkeep.end(hs, ok, ErrTakenOver)
			}
		case <-touch.C:
			hs := n.upkeep.list(sessionOf)
			if len(hs) == 0 {
				continue
			}
			ids := make([]string, len(hs))
			for i, h := range hs {
				ids[i] = h.session
			}
			cctx, cancel := context.WithTimeout(ctx, max(n.sessionTTL/4, time.Second))
			live, err := n.sessions.TouchMany(cctx, ids)
			cancel()
			if err == nil {
				n.upkeep.end(hs, live, ErrSessionEnded)
			}
		}
	}
}
