package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Upkeep is the periodic chores of one open stream.
type Upkeep struct {
	Conn *Conn
	// Claim is the claim the stream holds (its holder is Conn.ID);
	// losing it ends the stream with ErrTakenOver.
	Claim string
	// Session is the session to keep alive while its GET stream is open
	// (a listening client is not idle); the stream ends with
	// ErrSessionEnded when the session is gone.
	Session string
	// Owner is the producer to watch on a resumed POST stream.
	Owner *OwnerWatch
	// History is the stream the connection reads: its history is slid
	// while the connection is open, so that an idle stream can still be
	// resumed (Last-Event-ID) for the history TTL after it closes.
	History cluster.StreamRef
}

// addUpkeep keeps a stream's claim and session alive, and watches its
// owner, until ctx ends. All of it is node-wide work that costs the
// stream no goroutine and no store call of its own, and returns at once:
//
//   - the claim names this process (NewConnID), so it lives as long as
//     the node's membership lease; its key's safety TTL (ClaimTTL) is
//     slid every ClaimTTL/4 for all streams in one RenewMany, which also
//     finds the claims another connection took over (else told by a
//     GetTakeover message, or re-checked when the bus comes back);
//   - the session is slid every SessionTTL/4 for all streams in one
//     TouchMany;
//   - the history of the stream read is slid every HistoryTTL/3 to
//     HistoryTTL for all streams in one SlideMany (appends slide it too,
//     but an idle stream has none), so it expires HistoryTTL after the
//     stream closed, not while it is open;
//   - the owner's membership is checked against the node's view of live
//     instances, loaded every LeaseTTL/3 (see OwnerLost).
//
// SSE keep-alives are the stream writer's own (see sse.Writer).
func (n *Node) addUpkeep(ctx context.Context, j Upkeep) {
	if j.Claim != "" || j.Session != "" || j.History.Stream != "" {
		h := &held{conn: j.Conn, claim: j.Claim, session: j.Session, history: j.History}
		n.upkeep.add(h)
		context.AfterFunc(ctx, func() { n.upkeep.remove(h) })
	}
	if j.Owner != nil {
		n.upkeep.watch(j.Owner)
		context.AfterFunc(ctx, func() { n.upkeep.unwatch(j.Owner) })
	}
}

// claimTTL is the safety TTL of the claims of this node's streams: how
// long a claim outlives a holder that could not release it (the holder's
// membership lease, not this TTL, decides whether it still holds it).
func (n *Node) claimTTL() time.Duration { return max(n.sessionTTL, 10*n.leaseTTL) }

// held is what an open stream keeps alive: its claim, its session, its
// history, or several.
type held struct {
	conn           *Conn
	claim, session string
	history        cluster.StreamRef
}

// maxRetries bounds the store writes waiting to be retried (releases of
// claims, errors for abandoned streams); past it new ones are dropped
// and the claims' TTLs clean up.
const maxRetries = 4096

// retry is a store write that failed and is tried again every heartbeat
// until it succeeds, fails for good, or its deadline passes.
type retry struct {
	what  string
	until time.Time
	run   func(ctx context.Context) error
}

// upkeep is the set of streams whose claims, sessions and owners the
// node keeps, and the writes it retries.
type upkeep struct {
	mu      sync.Mutex
	held    map[*held]struct{}
	watches map[*OwnerWatch]struct{}
	retries []retry
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

func (u *upkeep) watch(w *OwnerWatch) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.watches == nil {
		u.watches = make(map[*OwnerWatch]struct{})
	}
	u.watches[w] = struct{}{}
}

func (u *upkeep) unwatch(w *OwnerWatch) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.watches, w)
}

// watched returns the owner watches whose owner pick says is gone.
func (u *upkeep) watched(gone func(owner string) bool) []*OwnerWatch {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*OwnerWatch
	for w := range u.watches {
		if gone(w.Info.Owner) {
			out = append(out, w)
		}
	}
	return out
}

// later queues r; it reports false when the queue is full.
func (u *upkeep) later(r retry) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.retries) >= maxRetries {
		return false
	}
	u.retries = append(u.retries, r)
	return true
}

func (u *upkeep) takeRetries() []retry {
	u.mu.Lock()
	defer u.mu.Unlock()
	rs := u.retries
	u.retries = nil
	return rs
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
func historyOf(h *held) string { return h.history.Stream }

// runUpkeep runs everyHeartbeat every LeaseTTL/3, slides the claims of
// every open stream of this node every ClaimTTL/4 in one RenewMany, and
// their sessions (with those the session cache answered) every
// SessionTTL/4 in one TouchMany (touchSessions), and their
// histories every HistoryTTL/3 in one SlideMany, so an idle stream costs
// the store a share of a batched call every few minutes instead of calls
// of its own. A stream whose
// claim was taken over, or whose session is gone, is ended. A failed
// batch changes nothing: the next one retries.
func (n *Node) runUpkeep(ctx context.Context) {
	renew := time.NewTicker(max(n.claimTTL()/4, 50*time.Millisecond))
	defer renew.Stop()
	touch := time.NewTicker(max(n.sessionTTL/4, 50*time.Millisecond))
	defer touch.Stop()
	beat := time.NewTicker(n.leaseTTL / 3)
	defer beat.Stop()
	slide := time.NewTicker(max(n.lim.WithDefaults().TTL/3, 50*time.Millisecond))
	defer slide.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			bctx, cancel := context.WithTimeout(ctx, n.leaseTTL/3)
			n.everyHeartbeat(bctx)
			cancel()
		case <-renew.C:
			n.renewClaims(ctx)
		case <-slide.C:
			n.slideHistories(ctx)
		case <-touch.C:
			n.touchSessions(ctx)
		}
	}
}

// touchSessions slides, in one TouchMany, the sessions of this node's
// open streams and those its session cache answered requests of (which
// did not reach the store), and ends the streams whose session is gone.
func (n *Node) touchSessions(ctx context.Context) {
	hs := n.upkeep.list(sessionOf)
	hits := n.Sessions.Hits()
	if len(hs) == 0 && len(hits) == 0 {
		return
	}
	ids := make([]string, len(hs), len(hs)+len(hits))
	for i, h := range hs {
		ids[i] = h.session
	}
	ids = append(ids, hits...)
	cctx, cancel := context.WithTimeout(ctx, max(n.sessionTTL/4, time.Second))
	live, err := n.Sessions.TouchMany(cctx, ids)
	cancel()
	if err == nil {
		n.upkeep.end(hs, live[:len(hs)], ErrSessionEnded)
	}
}

// renewClaims renews every claim held by an open stream of this node in
// one RenewMany and ends the streams whose claim another connection took.
func (n *Node) renewClaims(ctx context.Context) {
	hs := n.upkeep.list(claimOf)
	if len(hs) == 0 {
		return
	}
	claims := make([]cluster.Held, len(hs))
	for i, h := range hs {
		claims[i] = cluster.Held{Key: h.claim, Owner: h.conn.ID}
	}
	cctx, cancel := context.WithTimeout(ctx, max(n.leaseTTL, time.Second))
	ok, err := n.be.Claims.RenewMany(cctx, claims, n.claimTTL())
	cancel()
	if err == nil {
		n.upkeep.end(hs, ok, ErrTakenOver)
	}
}

// slideHistories slides the history of every stream an open connection
// of this node reads, in one SlideMany; a failed batch is retried by the
// next, well before the history's TTL runs out.
func (n *Node) slideHistories(ctx context.Context) {
	hs := n.upkeep.list(historyOf)
	if len(hs) == 0 {
		return
	}
	refs := make([]cluster.StreamRef, len(hs))
	for i, h := range hs {
		refs[i] = h.history
	}
	ttl := n.lim.WithDefaults().TTL
	cctx, cancel := context.WithTimeout(ctx, max(ttl/6, time.Second))
	defer cancel()
	if err := n.be.Events.SlideMany(cctx, refs, ttl); err != nil {
		n.log.Debug().Err(err).Int("streams", len(refs)).Msg("histories of open streams not slid")
	}
}

// everyHeartbeat is the node-wide work done at the pace of heartbeats
// (every LeaseTTL/3): the view of live instances is reloaded, the
// resumed streams whose owner is gone are ended, the server→client
// requests of sessions that vanished are failed, and failed writes are
// retried.
func (n *Node) everyHeartbeat(ctx context.Context) {
	if err := n.refreshMembers(ctx); err == nil {
		for _, w := range n.upkeep.watched(func(owner string) bool { return !n.members.has(owner) }) {
			if n.ownerLost(ctx, w) {
				n.upkeep.unwatch(w)
			}
		}
	}
	n.checkWaiting(ctx)
	now := time.Now()
	for _, r := range n.upkeep.takeRetries() {
		err := r.run(ctx)
		if !retryable(err) {
			continue
		}
		if now.After(r.until) || !n.upkeep.later(r) {
			n.log.Warn().Err(err).Str("what", r.what).Msg("gave up retrying a store write")
		}
	}
}

// retryLater runs f now and, while it fails because the store is
// unavailable, again after every heartbeat for up to within.
func (n *Node) retryLater(ctx context.Context, what string, within time.Duration, f func(ctx context.Context) error) {
	err := f(ctx)
	if !retryable(err) {
		return
	}
	if !n.upkeep.later(retry{what: what, until: time.Now().Add(within), run: f}) {
		n.log.Warn().Err(err).Str("what", what).Msg("store write not retried: too many waiting")
	}
}

// release drops the claim key held by holder, retrying after a failure
// (until ClaimTTL) so that readers do not take a closed connection for
// a live one.
func (n *Node) release(ctx context.Context, key, holder string) {
	n.retryLater(ctx, "release "+key, n.claimTTL(), func(ctx context.Context) error {
		return n.be.Claims.Release(ctx, key, holder)
	})
}

// retryable reports whether a store write that failed with err may
// succeed later: the store was unreachable or slow.
func retryable(err error) bool {
	return errors.Is(err, cluster.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// ErrSessionVanished fails the server→client requests of a session that
// is gone from the store while they wait (an evicting Redis, or one that
// lost its data): the client's reply is refused (404), so it will not
// come.
var ErrSessionVanished = jsonrpc.NewError(jsonrpc.CodeUnavailable,
	"the session is gone from the shared state, so the client's reply cannot arrive; start a new session and retry", nil)

// checkWaiting slides, in one TouchMany, the sessions of this node's
// pending server→client requests, and fails the requests of those that
// are gone: a reply posted to any node is refused then, and the request
// would wait for it until its timeout. It costs nothing while no
// request waits.
func (n *Node) checkWaiting(ctx context.Context) {
	ids := n.Waiters.Sessions()
	if len(ids) == 0 {
		return
	}
	live, err := n.Sessions.TouchMany(ctx, ids)
	if err != nil {
		return
	}
	for i, ok := range live {
		if !ok {
			n.log.Warn().Str("session", telemetry.SessionTag(ids[i])).Msg("session vanished from the store while its requests waited for the client: they fail")
			n.Waiters.FailSession(ids[i], ErrSessionVanished)
		}
	}
}
