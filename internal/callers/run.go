package callers

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// The per-caller limits' upkeep on one node: the debits of the notes of
// admitted requests, the renewals of the session and stream leases, and
// the pruning of idle callers (see ledger.go).

// Run debits the notes of admitted requests as they fall due (see
// flush); renews the stream leases every 2·LeaseTTL and the session
// leases every eighth of SessionTTL, until ctx ends.
func (c *Ledger) Run(ctx context.Context) {
	if c.off {
		return
	}
	streams := time.NewTicker(2 * c.o.LeaseTTL)
	defer streams.Stop()
	sessions := time.NewTicker(max(c.o.SessionTTL/8, time.Millisecond))
	defer sessions.Stop()
	due := time.NewTimer(c.longest())
	defer due.Stop()
	defer func() {
		c.mu.Lock()
		c.stopped = true
		c.heard.Broadcast()
		c.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-streams.C:
			c.renewStreams(ctx)
		case <-sessions.C:
			c.renewSessions(ctx)
		case <-c.urgent:
			c.flush(ctx)
		case <-due.C:
			c.flush(ctx)
		case <-c.kick:
		}
		c.mu.Lock()
		next := c.next
		c.mu.Unlock()
		if next.IsZero() {
			due.Stop()
		} else {
			due.Reset(time.Until(next))
		}
	}
}

// flush debits, in one batch, the notes of every caller that has noted
// its threshold or whose oldest note waited its delay, and of those
// halfway to either (they would be due soon: one batch carries them
// too); it refuses, until it is paid, the callers found in debt, and
// sets each debited caller's threshold from the balance heard and its
// delay from the pace seen.
func (c *Ledger) flush(ctx context.Context) {
	c.mu.Lock()
	now := time.Now()
	drain := c.drain
	c.drain = false
	var keys []string
	var debits []cluster.Debit
	var next time.Time
	for k, cl := range c.m {
		if cl.notes == 0 {
			continue
		}
		if !drain && 2*cl.notes < cl.limit && 2*now.Sub(cl.first) < cl.delay {
			if due := cl.first.Add(cl.delay); next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		keys = append(keys, k)
		debits = append(debits, cluster.Debit{Key: rateKey(k), N: cl.notes, Rate: float64(c.o.Rate), Burst: c.o.Burst})
		if el := now.Sub(cl.since).Seconds(); el > 0 {
			cl.pace = float64(cl.notes) / el
		}
		cl.since = now
		cl.flying, cl.notes = cl.notes, 0
	}
	c.next = next
	c.mu.Unlock()
	if len(debits) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	taken, err := c.lim.Take(ctx, debits)
	now = time.Now()
	rate, burst := float64(c.o.Rate), c.o.Burst
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.heard.Broadcast()
	if err != nil {
		if !c.failing {
			c.log.Warn().Err(err).Int("callers", len(debits)).Msg("request rates not debited from the shared store; this node limits callers alone until it can again")
		}
		c.failing = true
	} else if c.failing {
		c.log.Info().Msg("request rates debited from the shared store again")
		c.failing = false
	}
	for i, k := range keys {
		cl := c.m[k]
		if cl == nil {
			continue
		}
		cl.flying = 0
		if err != nil {
			continue
		}
		cl.limit = c.threshold(taken[i].Balance)
		cl.delay = lingerFor(cl.limit, cl.pace, c.longest())
		// The local bucket holds no more than the shared one, less what
		// this node admitted since the debit left: else each node would
		// spend, as each debt is paid, what its own bucket gained
		// meanwhile.
		tokens, _ := cluster.Refill(cl.tokens, now.Sub(cl.at), 0, rate, burst)
		cl.tokens, cl.at = min(tokens, taken[i].Balance-float64(cl.notes)), now
		if w := taken[i].Wait; w > 0 {
			if until := now.Add(w); until.After(cl.blocked) {
				cl.blocked = until
			}
		}
	}
}

// renewSessions renews, in one batch, the leases of the sessions this
// node served since the last renewal and of those with a stream open
// here.
func (c *Ledger) renewSessions(ctx context.Context) {
	c.mu.Lock()
	var leases []cluster.Lease
	for k, cl := range c.m {
		for sid := range cl.sessions {
			leases = append(leases, cluster.Lease{Key: sessionsKey(k), Member: sid, TTL: c.o.SessionTTL})
		}
		cl.sessions = nil
	}
	for s := range c.streams {
		if s.session != "" {
			leases = append(leases, cluster.Lease{Key: sessionsKey(s.key), Member: s.session, TTL: c.o.SessionTTL})
		}
	}
	c.mu.Unlock()
	c.renew(ctx, leases, "session")
}

// renewStreams renews, in one batch, the leases of the streams open on
// this node, and drops idle callers.
func (c *Ledger) renewStreams(ctx context.Context) {
	c.mu.Lock()
	var leases []cluster.Lease
	for s := range c.streams {
		leases = append(leases, cluster.Lease{Key: streamsKey(s.key), Member: s.id, TTL: streamLeases * c.o.LeaseTTL})
	}
	c.pruneLocked(time.Now())
	c.mu.Unlock()
	c.renew(ctx, leases, "stream")
}

func (c *Ledger) renew(ctx context.Context, leases []cluster.Lease, what string) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*c.o.LeaseTTL)
	defer cancel()
	if err := c.lim.Renew(ctx, leases); err != nil {
		c.log.Warn().Err(err).Int("leases", len(leases)).Msg("caller " + what + " leases not renewed")
	}
}

// pruneLocked drops the callers that hold nothing: no notes, none in a
// debit under way, no debt, no sessions to renew, and a full local
// bucket.
func (c *Ledger) pruneLocked(now time.Time) {
	for k, cl := range c.m {
		if cl.notes == 0 && cl.flying == 0 && len(cl.sessions) == 0 && !now.Before(cl.blocked) {
			if t, _ := cluster.Refill(cl.tokens, now.Sub(cl.at), 0, float64(c.o.Rate), c.o.Burst); t >= float64(c.o.Burst) {
				delete(c.m, k)
			}
		}
	}
}
