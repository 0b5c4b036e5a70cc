package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Flow 7 (docs/ARCHITECTURE.md, "The flows and their files"): notifications/*/list_changed reach every session
// once, on its GET stream wherever that lives, and resources/updated the
// subscribed sessions; listen streams on every node get them through the
// bus.

// fanOutWorkers bounds the appends of one fan-out in flight at once.
const fanOutWorkers = 16

// fanOutTimeout bounds one fan-out.
const fanOutTimeout = time.Minute

// maxWaitingFanOuts bounds the distinct notifications waiting for a
// fan-out slot.
const maxWaitingFanOuts = 1024

// FanOut delivers a notification (data, its encoded message) once to the
// GET stream of every session that should get it, and tells every node's
// listen streams: a list_changed (uri "") goes to all sessions through
// one append to the broadcast log, a resources/updated is appended to
// the GET stream of each subscriber of uri. It runs in
// the background: a registry change must not block on the store. At most
// Config.MaxFanOuts run at once and the same notification waits at most
// once (see fanOutLimiter).
func (n *Node) FanOut(method, uri string, data []byte) {
	start, running := n.fanOuts.enter(method, uri)
	if !start {
		n.fanOutDropped()
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if !running && !n.fanOuts.acquire(n.ctx, method, uri) {
			return
		}
		defer n.fanOuts.release()
		ctx, cancel := context.WithTimeout(n.ctx, fanOutTimeout)
		defer cancel()
		if err := n.Publish(ctx, ListenNotify{Method: method, URI: uri}); err != nil {
			n.log.Warn().Err(err).Str("method", method).Msg("listen fan-out failed")
		}
		if uri == "" {
			// Every session's: one append to the broadcast log, which
			// each node writes to its own GET streams (broadcast.go).
			if err := n.appendBroadcast(ctx, data); err != nil {
				n.log.Warn().Err(err).Str("method", method).Msg("notification not delivered")
			}
			return
		}
		// A bounded pool of appends: one round trip per subscriber, a
		// few in flight at once.
		work := make(chan string)
		var workers sync.WaitGroup
		for range fanOutWorkers {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for sid := range work {
					if err := n.AppendGet(ctx, sid, data); err != nil && !errors.Is(err, cluster.ErrNotFound) {
						n.log.Warn().Err(err).Str("session", telemetry.SessionTag(sid)).Str("method", method).Msg("notification not delivered")
					}
				}
			}()
		}
		defer workers.Wait()
		defer close(work)
		deliver := func(ids []string) {
			for _, sid := range ids {
				select {
				case work <- sid:
				case <-ctx.Done():
					return
				}
			}
		}
		ids, err := n.be.Sessions.Subscribers(ctx, uri)
		if err != nil {
			n.log.Warn().Err(err).Msg("subscribers lookup failed")
			return
		}
		deliver(ids)
	}()
}

// notifyListeners hands a notification to this node's listen streams.
func (n *Node) notifyListeners(m ListenNotify) {
	for _, l := range n.Local.listeners(m.Method, m.URI) {
		l.Notify(m.Method, m.URI)
	}
}

// AppendGet appends a message to a session's GET stream. A session whose
// GET stream was never opened (or that ended) answers ErrNotFound.
func (n *Node) AppendGet(ctx context.Context, sid string, data []byte) error {
	_, err := n.be.Events.Append(ctx, sid, GetStreamID(sid), data, false, n.lim)
	return err
}

// GetStreamID names a session's GET stream: derived from the session id
// by a one-way hash, so any node can address it without a lookup and the
// id reveals nothing of the session id.
func GetStreamID(sid string) string {
	sum := sha256.Sum256([]byte("mcp-get-stream:" + sid))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}

// fanOutLimiter bounds the fan-outs of one node: at most max run at once,
// and one waiting per notification (method and uri): a change arriving
// while the same notification waits for its turn is already covered by
// it, since a fan-out reads the session list when it starts. A fan-out
// that finds a free slot takes it at once and never counts as waiting,
// so changes made one after another while slots are free each get their
// own notification, however late their goroutines are scheduled. At most
// maxWaiting distinct notifications wait; past that, more are dropped
// (and counted).
type fanOutLimiter struct {
	slots      chan struct{}
	maxWaiting int

	mu      sync.Mutex
	waiting map[[2]string]bool
}

func newFanOutLimiter(running, waiting int) *fanOutLimiter {
	return &fanOutLimiter{slots: make(chan struct{}, running), maxWaiting: waiting, waiting: map[[2]string]bool{}}
}

// enter reports whether a fan-out of (method, uri) should be started
// (false when the same one already waits, or too many wait), and whether
// it already holds a slot (running); one that does not must acquire.
func (l *fanOutLimiter) enter(method, uri string) (start, running bool) {
	select {
	case l.slots <- struct{}{}:
		return true, true
	default:
	}
	k := [2]string{method, uri}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting[k] || len(l.waiting) >= l.maxWaiting {
		return false, false
	}
	l.waiting[k] = true
	return true, false
}

// acquire waits for a slot; the fan-out then no longer counts as waiting.
func (l *fanOutLimiter) acquire(ctx context.Context, method, uri string) bool {
	defer func() {
		l.mu.Lock()
		delete(l.waiting, [2]string{method, uri})
		l.mu.Unlock()
	}()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *fanOutLimiter) release() { <-l.slots }
