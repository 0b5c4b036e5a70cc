package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Per-caller limits, kept cluster-wide in the backend's Limiter: live
// sessions, open streams and a request rate per caller (callerKey).
//
// Sessions and streams are leases in a set per caller. A session's is
// taken and released by the session store in the round trips that
// create and end the session (cluster.CreateOptions, EndOptions); a
// stream's with one round trip of its own when it opens and ends. A
// session's lease is as long as its idle timeout and is renewed every
// eighth of it, in one batch, for the sessions this node
// served since the last renewal and those with a stream open here; so
// an expired session frees its place by itself. A stream's lease is
// streamLeases·LeaseTTL, renewed every 2·LeaseTTL while it is open (an
// idle stream costs its store 1/(2·LeaseTTL) script runs a second, one
// pipeline per node): the streams of a node that died free their places
// within the lease.
//
// The rate costs no round trip on the request path. Each node admits a
// request against a local token bucket of the caller (the full rate and
// burst), notes it, and debits the shared bucket with everything noted,
// in one batch, callerFlush after the first note, or at once when one
// caller has noted an eighth of its burst; a caller the shared bucket
// finds in debt is refused on this node until the debt is paid.
// Error bound: over the whole deployment a caller may get past the rate
// by what every node admits before it hears of the debt: per node that
// serves it, an eighth of the burst, or callerFlush of the rate, plus
// what arrives during one round trip to the store (and never more than
// the burst, the local bucket's). The debt then shuts it out for as long
// as it took, so over time it gets the rate and no more. When the shared store fails, each node keeps its local bucket
// alone (each node then admits up to the rate).

// streamLeases is a stream's lease in LeaseTTLs: three renewals (every
// 2·LeaseTTL) may fail before it lapses.
const streamLeases = 6

// callerFlush is how long notes of admitted requests wait to be debited
// together.
const callerFlush = 20 * time.Millisecond

// maxCallers bounds the callers one node tracks at once; past it the
// idle ones are dropped, and a new caller that still finds no room is
// refused with 503.
const maxCallers = 1 << 16

// callers enforces the per-caller limits on one node.
type callers struct {
	lim     cluster.Limiter
	o       *HTTPOptions
	log     zerolog.Logger
	trusted []netip.Prefix
	off     bool

	mu      sync.Mutex
	m       map[string]*caller
	dirty   bool      // some caller has notes to debit
	pruned  time.Time // last prune forced by a full table
	streams map[*callerStream]struct{}
	failing bool // the last debit failed (run's goroutine only)
	// refused counts the refusals of each limit: rate, sessions, streams.
	refused [3]func()

	proxyWarned atomic.Bool // untrustedProxy warned

	kick   chan struct{} // the first note since the last flush
	urgent chan struct{} // a caller noted an eighth of its burst: flush now
}

// caller is one caller as this node sees it.
type caller struct {
	tokens   float64   // local bucket
	at       time.Time // of tokens
	notes    int       // requests admitted, not yet debited
	blocked  time.Time // refused until then: the shared bucket's debt
	sessions map[string]struct{}
}

// callerStream is a stream open on this node, for lease renewal.
type callerStream struct{ key, id, session string }

func newCallers(lim cluster.Limiter, o *HTTPOptions, log zerolog.Logger, m *telemetry.Metrics) *callers {
	trusted, _ := parseTrustedProxies(o.TrustedProxies) // Validate checked them
	c := &callers{lim: lim, o: o, log: log, trusted: trusted, off: o.NoCallerLimits || lim == nil,
		m: map[string]*caller{}, streams: map[*callerStream]struct{}{}, kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}
	for i, limit := range []string{"rate", "sessions", "streams"} {
		c.refused[i] = m.Counter("mcp_caller_refused_"+limit+"_total", "Requests refused (429) because their caller was over its "+limit+" limit.")
	}
	m.GaugeFunc("mcp_callers_tracked", "Callers this node tracks for the per-caller limits.", func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.m))
	})
	return c
}

// untrustedProxy warns, once per node, when an anonymous request names a
// client in X-Forwarded-For or Forwarded but comes from a peer that is
// not a trusted proxy: every client behind that proxy then counts as
// one caller, the proxy, and they share one caller's limits.
func (c *callers) untrustedProxy(r *http.Request) {
	if r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == "" {
		return
	}
	peer := parseHop(r.RemoteAddr)
	if isTrusted(peer, c.trusted) || !c.proxyWarned.CompareAndSwap(false, true) {
		return
	}
	c.log.Warn().Str("peer", peer.String()).
		Msg("requests arrive through a proxy this node does not trust: every anonymous client behind it counts as one caller for the per-caller limits (--caller-rate, --caller-max-sessions, --caller-max-streams); name the proxy in --trusted-proxies (MCP_TRUSTED_PROXIES)")
}

// Limiter keys of a caller.
func rateKey(caller string) string     { return "rate:" + caller }
func sessionsKey(caller string) string { return "sessions:" + caller }
func streamsKey(caller string) string  { return "streams:" + caller }

// tooMany is the 429 of a caller over one of its limits.
func tooMany(after time.Duration, format string, args ...any) *refusal {
	rf := refuse(http.StatusTooManyRequests, format, args...)
	rf.after = after
	return rf
}

// allow admits one request of key on the local bucket, or refuses it.
func (c *callers) allow(key string, now time.Time) error {
	if c.off {
		return nil
	}
	rate, burst := float64(c.o.CallerRate), c.o.CallerBurst
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.m[key]
	if cl == nil {
		if len(c.m) >= maxCallers && now.Sub(c.pruned) > callerFlush {
			c.pruned = now // at most one full scan per callerFlush
			c.pruneLocked(now)
		}
		if len(c.m) >= maxCallers {
			return refuse(http.StatusServiceUnavailable, "this node tracks as many callers as it may (%d); retry shortly", maxCallers)
		}
		cl = &caller{tokens: float64(burst), at: now}
		c.m[key] = cl
	}
	if now.Before(cl.blocked) {
		c.refused[0]()
		return tooMany(cl.blocked.Sub(now), "too many requests from this caller (at most %d a second); retry later", c.o.CallerRate)
	}
	tokens, wait := cluster.Refill(cl.tokens, now.Sub(cl.at), 0, rate, burst)
	cl.tokens, cl.at = tokens, now
	if wait > 0 {
		c.refused[0]()
		return tooMany(wait, "too many requests from this caller (at most %d a second); retry later", c.o.CallerRate)
	}
	cl.tokens--
	cl.notes++
	if cl.notes >= max(1, burst/8) {
		select {
		case c.urgent <- struct{}{}:
		default:
		}
	}
	if !c.dirty {
		c.dirty = true
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// sawSession notes that key used session sid, so its lease is renewed.
func (c *callers) sawSession(key, sid string) {
	if c.off {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.m[key]
	if cl == nil {
		cl = &caller{tokens: float64(c.o.CallerBurst), at: time.Now()}
		c.m[key] = cl
	}
	if cl.sessions == nil {
		cl.sessions = map[string]struct{}{}
	}
	if len(cl.sessions) < c.o.MaxCallerSessions {
		cl.sessions[sid] = struct{}{}
	}
}

// sessionLease is the lease a session of key takes as it is created
// (with the session, in one round trip: cluster.CreateOptions), nil
// when the limits are off.
func (c *callers) sessionLease(key string) *cluster.SessionLease {
	if c.off {
		return nil
	}
	return &cluster.SessionLease{Key: sessionsKey(key), TTL: c.o.SessionTTL, Max: c.o.MaxCallerSessions}
}

// refusedSession reports whether err is a session lease refused by the
// store, and turns it into the 429 of a caller at its cap of live
// sessions.
func (c *callers) refusedSession(err error) (*refusal, bool) {
	var lr *cluster.LeaseRefused
	if !errors.As(err, &lr) {
		return nil, false
	}
	c.refused[1]()
	return tooMany(lr.Wait, "this caller holds as many live sessions as it may (%d); end one (DELETE) or wait for one to expire", c.o.MaxCallerSessions), true
}

// sessionsSet is the set of key's session leases, which the store
// releases a session's from as it ends it (cluster.EndOptions), "" when
// the limits are off.
func (c *callers) sessionsSet(key string) string {
	if c.off {
		return ""
	}
	return sessionsKey(key)
}

// endedSession stops renewing the lease of sid, which key ended.
func (c *callers) endedSession(key, sid string) {
	if c.off {
		return
	}
	c.mu.Lock()
	if cl := c.m[key]; cl != nil {
		delete(cl.sessions, sid)
	}
	c.mu.Unlock()
}

// openStream takes one of key's open-stream places for a stream of
// session (or none); the returned func gives it back.
func (c *callers) openStream(ctx context.Context, key, session string) (func(), error) {
	if c.off {
		return func() {}, nil
	}
	s := &callerStream{key: key, id: randomToken(9), session: session}
	ok, wait, err := c.lim.Acquire(ctx, streamsKey(key), s.id, streamLeases*c.o.LeaseTTL, c.o.MaxCallerStreams)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.refused[2]()
		return nil, tooMany(wait, "this caller has as many streams open as it may (%d); close one first", c.o.MaxCallerStreams)
	}
	c.mu.Lock()
	c.streams[s] = struct{}{}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.streams, s)
			c.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			if err := c.lim.Release(ctx, streamsKey(key), s.id); err != nil {
				c.log.Debug().Err(err).Msg("caller's stream place not released; it frees when its lease ends")
			}
		})
	}, nil
}

// run debits the notes of admitted requests callerFlush after the first
// one, or at once when a caller noted an eighth of its burst; renews the
// stream leases every 2·LeaseTTL and the session leases every eighth of
// SessionTTL, until ctx ends.
func (c *callers) run(ctx context.Context) {
	if c.off {
		return
	}
	streams := time.NewTicker(2 * c.o.LeaseTTL)
	defer streams.Stop()
	sessions := time.NewTicker(max(c.o.SessionTTL/8, time.Millisecond))
	defer sessions.Stop()
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
		case <-c.kick:
			select {
			case <-ctx.Done():
				return
			case <-c.urgent:
			case <-time.After(callerFlush):
			}
			c.flush(ctx)
		}
	}
}

// flush debits every caller's notes from its shared bucket in one batch
// and refuses, until it is paid, the callers found in debt.
func (c *callers) flush(ctx context.Context) {
	c.mu.Lock()
	var keys []string
	var debits []cluster.Debit
	for k, cl := range c.m {
		if cl.notes > 0 {
			keys = append(keys, k)
			debits = append(debits, cluster.Debit{Key: rateKey(k), N: cl.notes, Rate: float64(c.o.CallerRate), Burst: c.o.CallerBurst})
			cl.notes = 0
		}
	}
	c.dirty = false
	c.mu.Unlock()
	if len(debits) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	wait, err := c.lim.Take(ctx, debits)
	if err != nil {
		if !c.failing {
			c.log.Warn().Err(err).Int("callers", len(debits)).Msg("request rates not debited from the shared store; this node limits callers alone until it can again")
		}
		c.failing = true
		return
	}
	if c.failing {
		c.log.Info().Msg("request rates debited from the shared store again")
		c.failing = false
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		if cl := c.m[k]; cl != nil && wait[i] > 0 {
			if until := now.Add(wait[i]); until.After(cl.blocked) {
				cl.blocked = until
			}
		}
	}
}

// renewSessions renews, in one batch, the leases of the sessions this
// node served since the last renewal and of those with a stream open
// here.
func (c *callers) renewSessions(ctx context.Context) {
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
func (c *callers) renewStreams(ctx context.Context) {
	c.mu.Lock()
	var leases []cluster.Lease
	for s := range c.streams {
		leases = append(leases, cluster.Lease{Key: streamsKey(s.key), Member: s.id, TTL: streamLeases * c.o.LeaseTTL})
	}
	c.pruneLocked(time.Now())
	c.mu.Unlock()
	c.renew(ctx, leases, "stream")
}

func (c *callers) renew(ctx context.Context, leases []cluster.Lease, what string) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*c.o.LeaseTTL)
	defer cancel()
	if err := c.lim.Renew(ctx, leases); err != nil {
		c.log.Warn().Err(err).Int("leases", len(leases)).Msg("caller " + what + " leases not renewed")
	}
}

// pruneLocked drops the callers that hold nothing: no notes, no debt,
// no sessions to renew, and a full local bucket.
func (c *callers) pruneLocked(now time.Time) {
	for k, cl := range c.m {
		if cl.notes == 0 && len(cl.sessions) == 0 && !now.Before(cl.blocked) {
			if t, _ := cluster.Refill(cl.tokens, now.Sub(cl.at), 0, float64(c.o.CallerRate), c.o.CallerBurst); t >= float64(c.o.CallerBurst) {
				delete(c.m, k)
			}
		}
	}
}

// limitCaller is the edge step of the request rate: it works out the
// caller's key once (kept in the request's info) and refuses a caller
// over its rate with 429 and Retry-After; it reports whether the request
// may go on.
func (h *HTTPHandler) limitCaller(w http.ResponseWriter, r *http.Request) bool {
	key := callerKey(r, h.callers.trusted)
	if !h.callers.off && !h.callers.proxyWarned.Load() && strings.HasPrefix(key, "a:") {
		h.callers.untrustedProxy(r)
	}
	if err := h.callers.allow(key, time.Now()); err != nil {
		h.writeRefusal(w, jsonrpc.ID{}, err)
		return false
	}
	noteCaller(r.Context(), key)
	return true
}

// openStream takes a stream place on this node and one of the caller's
// in the deployment, for a stream of session (or none), or refuses.
func (h *HTTPHandler) openStream(r *http.Request, session string) (func(), error) {
	slot, err := h.admit.openStream()
	if err != nil {
		return nil, err
	}
	mine, err := h.callers.openStream(r.Context(), callerKey(r, h.callers.trusted), session)
	if err != nil {
		slot()
		return nil, err
	}
	return func() { mine(); slot() }, nil
}
