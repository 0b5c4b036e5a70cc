// Package callers keeps the per-caller limits of a deployment on one
// node: live sessions, open streams and a request rate per caller, in the
// backend's Limiter. The transport names the caller (a key) and turns a
// Refusal into its answer (429 or 503, with Retry-After).
package callers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Per-caller limits, kept cluster-wide in the backend's Limiter: live
// sessions, open streams and a request rate per caller (a key the transport makes).
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
// burst) and notes it. It debits the shared bucket with a caller's notes
// once they reach the caller's threshold, or once the oldest has waited
// the caller's delay, in one batch with the notes of every caller
// halfway to either (one script for the whole batch on a single server:
// Limiter.Take). The answer sets the local bucket to no more than the
// shared one's balance (less what the node admitted since), and a
// caller it finds in debt is refused on this node until the debt is
// paid. A node holds at most two thresholds of a caller unheard of by
// the store (noted, or in the debit under way): a request past them
// waits for that debit's answer, so only a flood waits a round trip.
//
// The threshold is an eighth of the balance the shared bucket reported
// at the caller's last debit from this node (a caller this node has not
// debited yet counts as full, as an unknown bucket is), at most an eighth
// of the burst and at least callerFlush of the rate (within [1, burst/8]):
// at the defaults a caller far from its limit is debited every 250 of its
// requests here, one near it every 20, as often as a single node
// debited it before. The delay is twice the time this node took to note
// a threshold of the caller, at the pace it saw between the caller's
// last two debits, within [callerFlush, callerLinger × the live nodes]:
// a caller that keeps its pace is debited by count, one that slows down
// or stops within that longest wait.
//
// Cost: a debit carries a threshold of notes, or all that one node noted
// in its longest wait. Where each node notes a threshold of the caller
// within half of it, the debits per request are 1/threshold, however
// many nodes share the caller's requests; past that (a node sees little
// of the caller), one per callerLinger × N per node and caller, N the
// live nodes: one per callerLinger for the whole deployment, whatever N;
// never more than one per request. The longest wait does not enter the
// error bound below, only how late the shared bucket hears of a slow
// caller's requests.
//
// Error bound: time does not enter it, the counts do. A node lets a
// caller past the shared bucket by at most what it holds unheard of
// when the bucket runs dry: two thresholds, at most a quarter of the
// burst. So by time t a caller gets at most rate·t + burst + two
// thresholds per node that serves it, where a node's threshold near the
// limit is callerFlush of the rate (TestCallerRateBoundAcrossNodes).
// Far from its limit a node holds at most a quarter of the balance it
// heard: on up to four nodes that heard it, their notes together stay
// within it, and nothing gets past. The overshoot is a debt the caller
// then waits out, so over time it gets the rate and no more; only a debt
// past the floor of -burst is forgiven, which takes more than four nodes
// each holding a quarter of the burst. A node's notes when it stops are
// not debited (two thresholds per caller at most, within the bound).
// When the shared store fails, each node keeps its local bucket alone
// (each node then admits up to the rate).

// streamLeases is a stream's lease in LeaseTTLs: three renewals (every
// 2·LeaseTTL) may fail before it lapses.
const streamLeases = 6

// callerFlush is the time of the rate a node holds back, at most, in
// notes of a caller near its limit, and the shortest wait of a note.
const callerFlush = 20 * time.Millisecond

// callerLinger is the longest a note waits to be debited, per live node
// of the deployment (Options.Nodes).
const callerLinger = time.Second

// maxCallers bounds the callers one node tracks at once; past it the
// idle ones are dropped, and a new caller that still finds no room is
// refused with 503.
const maxCallers = 1 << 16

// Options are the per-caller limits and the settings they depend on.
type Options struct {
	// Rate and Burst bound a caller's requests a second (a token bucket).
	Rate, Burst int
	// MaxSessions and MaxStreams bound a caller's live sessions and open
	// streams in the deployment.
	MaxSessions, MaxStreams int
	// SessionTTL is a session's idle timeout (its lease), LeaseTTL the
	// node's membership lease (a stream's lease is streamLeases of it).
	SessionTTL, LeaseTTL time.Duration
	// Off turns the limits off, as does a Rate or Burst of 0.
	Off bool
	// Nodes counts the deployment's live nodes (1 when nil): the longest
	// wait of a note grows with it (longest).
	Nodes func() int
}

// Ledger enforces the per-caller limits on one node.
type Ledger struct {
	lim cluster.Limiter
	o   Options
	log zerolog.Logger
	off bool

	// most and least bound a caller's threshold: the notes debited at
	// once (see threshold).
	most, least int

	mu      sync.Mutex
	m       map[string]*caller
	next    time.Time // when the oldest notes of some caller are due; zero when none are held
	drain   bool      // the table is full: debit every note, so that the callers can be dropped
	pruned  time.Time // last prune forced by a full table
	streams map[*callerStream]struct{}
	failing bool       // the last debit failed (set by run's goroutine, under mu)
	stopped bool       // run returned: nothing debits any more
	heard   *sync.Cond // on mu: a debit's answer came (or run returned)
	// refused counts the refusals of each limit: rate, sessions, streams.
	refused [3]func()

	kick   chan struct{} // next moved earlier
	urgent chan struct{} // a caller's notes reached its threshold: flush now
}

// caller is one caller as this node sees it.
type caller struct {
	tokens  float64   // local bucket
	at      time.Time // of tokens
	notes   int       // requests admitted, not yet debited
	flying  int       // requests in the debit under way
	first   time.Time // of the oldest of notes
	since   time.Time // of the last debit (before one, of the caller's arrival)
	pace    float64   // notes a second between the last two debits
	limit   int       // threshold: notes debited at once
	delay   time.Duration
	blocked time.Time // refused until then: the shared bucket's debt

	sessions map[string]struct{}
}

// callerStream is a stream open on this node, for lease renewal.
type callerStream struct{ key, id, session string }

// New returns the ledger of one node, kept in lim (the limits are off
// when lim is nil), its refusals counted in m.
func New(lim cluster.Limiter, o Options, log zerolog.Logger, m *telemetry.Metrics) *Ledger {
	c := &Ledger{lim: lim, o: o, log: log, off: o.Off || lim == nil || o.Rate <= 0 || o.Burst <= 0,
		m: map[string]*caller{}, streams: map[*callerStream]struct{}{}, kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}
	c.heard = sync.NewCond(&c.mu)
	c.most = max(1, o.Burst/8)
	c.least = min(c.most, max(1, int(math.Ceil(float64(o.Rate)*callerFlush.Seconds()))))
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

// newCaller is a caller first seen at now. Its shared bucket is taken
// to be full (as an unknown bucket is) until a debit tells.
func (c *Ledger) newCaller(now time.Time) *caller {
	return &caller{tokens: float64(c.o.Burst), at: now, since: now, limit: c.threshold(float64(c.o.Burst)), delay: c.longest()}
}

// longest is the longest a note waits to be debited: callerLinger per
// live node, so that the debits of callers each node sees little of do
// not multiply with the nodes.
func (c *Ledger) longest() time.Duration {
	n := 1
	if c.o.Nodes != nil {
		n = max(1, c.o.Nodes())
	}
	return time.Duration(n) * callerLinger
}

// threshold is how many notes of a caller whose shared bucket held
// balance are debited at once: an eighth of the balance, within
// [least, most].
func (c *Ledger) threshold(balance float64) int {
	return min(c.most, max(c.least, int(balance/8)))
}

// lingerFor is the longest the oldest note of a caller waits: twice the
// time this node takes to note limit of it at pace (so that a caller
// which keeps its pace is debited by count), within [callerFlush,
// longest].
func lingerFor(limit int, pace float64, longest time.Duration) time.Duration {
	d := 2 * float64(limit) / pace
	if pace <= 0 || d >= longest.Seconds() {
		return longest
	}
	return max(callerFlush, time.Duration(d*float64(time.Second)))
}

// signal sends on a channel of one without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Limiter keys of a caller.
func rateKey(caller string) string     { return "rate:" + caller }
func sessionsKey(caller string) string { return "sessions:" + caller }
func streamsKey(caller string) string  { return "streams:" + caller }

// Refusal is a request the limits refuse: a caller over one of its
// limits (retry after Wait), or, with Busy, one this node has no room to
// track (retry shortly).
type Refusal struct {
	Msg  string
	Wait time.Duration
	Busy bool
}

func (r *Refusal) Error() string { return r.Msg }

// tooMany is the refusal of a caller over one of its limits.
func tooMany(after time.Duration, format string, args ...any) *Refusal {
	return &Refusal{Msg: fmt.Sprintf(format, args...), Wait: after}
}

// Allow admits one request of key on the local bucket, or refuses it.
func (c *Ledger) Allow(key string, now time.Time) error {
	if c.off {
		return nil
	}
	rate, burst := float64(c.o.Rate), c.o.Burst
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.m[key]
	if cl == nil {
		if len(c.m) >= maxCallers && now.Sub(c.pruned) > callerFlush {
			c.pruned = now // at most one full scan per callerFlush
			c.pruneLocked(now)
		}
		if len(c.m) >= maxCallers {
			if !c.drain {
				c.drain = true
				signal(c.urgent)
			}
			return &Refusal{Msg: fmt.Sprintf("this node tracks as many callers as it may (%d); retry shortly", maxCallers), Busy: true}
		}
		cl = c.newCaller(now)
		c.m[key] = cl
	}
	for {
		if now.Before(cl.blocked) {
			c.refused[0]()
			return tooMany(cl.blocked.Sub(now), "too many requests from this caller (at most %d a second); retry later", c.o.Rate)
		}
		tokens, wait := cluster.Refill(cl.tokens, now.Sub(cl.at), 0, rate, burst)
		cl.tokens, cl.at = tokens, now
		if wait > 0 {
			c.refused[0]()
			return tooMany(wait, "too many requests from this caller (at most %d a second); retry later", c.o.Rate)
		}
		if cl.notes+cl.flying < 2*cl.limit || c.failing || c.stopped {
			break
		}
		// Two thresholds of the caller unheard of by the store: wait
		// for the debit under way (only a flood waits), then look again.
		signal(c.urgent)
		c.heard.Wait()
		now = time.Now()
	}
	cl.tokens--
	if cl.notes == 0 {
		cl.first = now
		if due := now.Add(cl.delay); c.next.IsZero() || due.Before(c.next) {
			c.next = due
			signal(c.kick)
		}
	}
	cl.notes++
	if cl.notes >= cl.limit {
		signal(c.urgent)
	}
	return nil
}

// Off reports whether the limits are off.
func (c *Ledger) Off() bool { return c.off }

// SawSession notes that key used session sid, so its lease is renewed.
func (c *Ledger) SawSession(key, sid string) {
	if c.off {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.m[key]
	if cl == nil {
		cl = c.newCaller(time.Now())
		c.m[key] = cl
	}
	if cl.sessions == nil {
		cl.sessions = map[string]struct{}{}
	}
	if len(cl.sessions) < c.o.MaxSessions {
		cl.sessions[sid] = struct{}{}
	}
}

// SessionLease is the lease a session of key takes as it is created
// (with the session, in one round trip: cluster.CreateOptions), nil
// when the limits are off.
func (c *Ledger) SessionLease(key string) *cluster.SessionLease {
	if c.off {
		return nil
	}
	return &cluster.SessionLease{Key: sessionsKey(key), TTL: c.o.SessionTTL, Max: c.o.MaxSessions}
}

// RefusedSession reports whether err is a session lease refused by the
// store, and turns it into the 429 of a caller at its cap of live
// sessions.
func (c *Ledger) RefusedSession(err error) (*Refusal, bool) {
	var lr *cluster.LeaseRefused
	if !errors.As(err, &lr) {
		return nil, false
	}
	c.refused[1]()
	return tooMany(lr.Wait, "this caller holds as many live sessions as it may (%d); end one (DELETE) or wait for one to expire", c.o.MaxSessions), true
}

// SessionsSet is the set of key's session leases, which the store
// releases a session's from as it ends it (cluster.EndOptions), "" when
// the limits are off.
func (c *Ledger) SessionsSet(key string) string {
	if c.off {
		return ""
	}
	return sessionsKey(key)
}

// EndedSession stops renewing the lease of sid, which key ended.
func (c *Ledger) EndedSession(key, sid string) {
	if c.off {
		return
	}
	c.mu.Lock()
	if cl := c.m[key]; cl != nil {
		delete(cl.sessions, sid)
	}
	c.mu.Unlock()
}

// OpenStream takes one of key's open-stream places for a stream of
// session (or none); the returned func gives it back.
func (c *Ledger) OpenStream(ctx context.Context, key, session string) (func(), error) {
	if c.off {
		return func() {}, nil
	}
	s := &callerStream{key: key, id: streamID(), session: session}
	ok, wait, err := c.lim.Acquire(ctx, streamsKey(key), s.id, streamLeases*c.o.LeaseTTL, c.o.MaxStreams)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.refused[2]()
		return nil, tooMany(wait, "this caller has as many streams open as it may (%d); close one first", c.o.MaxStreams)
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

// streamID names one open stream's lease (72 random bits).
func streamID() string {
	var b [9]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b[:])
}
