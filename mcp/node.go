package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// localState is what only this node holds: live connections and running
// requests, reached from other nodes through the bus.
type localState struct {
	mu       sync.Mutex
	inflight map[[2]string]context.CancelFunc  // (session, id key) → cancel
	conns    map[string]map[*liveConn]struct{} // session → open SSE connections
	listens  map[*listenConn]struct{}
}

// liveConn is an open SSE connection of a session on this node.
type liveConn struct {
	id     string
	cancel context.CancelCauseFunc
	getFor string // session whose GET stream this connection holds
}

func newLocalState() *localState {
	return &localState{
		inflight: map[[2]string]context.CancelFunc{},
		conns:    map[string]map[*liveConn]struct{}{},
		listens:  map[*listenConn]struct{}{},
	}
}

func (l *localState) addInflight(session, id string, cancel context.CancelFunc) func() {
	k := [2]string{session, id}
	l.mu.Lock()
	l.inflight[k] = cancel
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.inflight, k)
		l.mu.Unlock()
	}
}

func (l *localState) addConn(session string, c *liveConn) func() {
	l.mu.Lock()
	m := l.conns[session]
	if m == nil {
		m = map[*liveConn]struct{}{}
		l.conns[session] = m
	}
	m[c] = struct{}{}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.conns[session], c)
		if len(l.conns[session]) == 0 {
			delete(l.conns, session)
		}
		l.mu.Unlock()
	}
}

// errSessionEnded cancels the work of an ended session.
var errSessionEnded = errors.New("mcp: session ended")

// errTakenOver ends a GET stream another connection took over.
var errTakenOver = errors.New("mcp: stream taken over by a newer connection")

// errGetDropped fails a request sent on a GET stream that closed.
var errGetDropped = jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "the stream the request was delivered on closed", nil)

// errDrain ends streams of a draining node.
var errDrain = errors.New("mcp: node draining")

// nodeOf returns the node id of an instance name ("<node>.<incarnation>").
func nodeOf(instance string) string {
	if i := strings.LastIndexByte(instance, '.'); i > 0 {
		return instance[:i]
	}
	return instance
}

// start subscribes to the bus and starts the membership heartbeat.
func (h *HTTPHandler) start() error {
	ctx := h.ctx
	stop, err := h.coord.Start(ctx)
	if err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	stop, err = h.be.Bus.Subscribe(ctx, coordinator.TopicAll, h.onBus)
	if err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	h.be.Bus.OnReconnect(func() {
		h.resync()
		h.reloadFeatures()
	})
	if err := h.be.Members.Heartbeat(ctx, h.instance, h.opts.LeaseTTL); err != nil {
		h.log.Warn().Err(err).Msg("membership heartbeat failed")
	}
	h.loadFeatures(ctx)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(h.opts.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.reload:
				h.loadFeatures(ctx)
			case <-t.C:
				if err := h.be.Members.Heartbeat(ctx, h.instance, h.opts.LeaseTTL); err != nil && ctx.Err() == nil {
					h.log.Warn().Err(err).Msg("membership heartbeat failed")
				}
				h.loadFeatures(ctx)
			}
		}
	}()
	return nil
}

func (h *HTTPHandler) publish(ctx context.Context, m coordinator.Message) error {
	b, err := coordinator.Encode(m)
	if err != nil {
		return err
	}
	h.metrics.BusSent()
	_, err = h.be.Bus.Publish(ctx, coordinator.TopicAll, b)
	return err
}

// undecodable counts and logs a bus payload that is not a message: a
// kind of a newer release (a rolling upgrade) at debug level, anything
// else as a warning.
func (h *HTTPHandler) undecodable(topic string, err error) {
	h.busUndecodable()
	ev := h.log.Warn()
	if errors.Is(err, coordinator.ErrUnknownKind) {
		ev = h.log.Debug()
	}
	ev.Err(err).Str("topic", topic).Msg("bus message skipped")
}

// onBus handles broadcast messages from any node (this one included).
func (h *HTTPHandler) onBus(b []byte) {
	h.metrics.BusReceived()
	msg, err := coordinator.Decode(b)
	if err != nil {
		h.undecodable(coordinator.TopicAll, err)
		return
	}
	l := h.local
	switch m := msg.(type) {
	case coordinator.SessionEnded:
		h.endLocal(m.Session)
	case coordinator.CancelRequest:
		l.mu.Lock()
		cancel := l.inflight[[2]string{m.Session, m.ID}]
		l.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case coordinator.InvalidateSession:
		h.sessions.Invalidate(m.Session)
	case coordinator.GetDropped:
		h.coord.FailTag(m.Session, "get", errGetDropped)
	case coordinator.GetTakeover:
		// Messages may arrive late (a stale take-over by a connection that
		// has since been taken over itself): the claim decides, not the
		// message, so a local GET connection ends only if it lost it.
		l.mu.Lock()
		var others []*liveConn
		for c := range l.conns[m.Session] {
			if c.getFor == m.Session && c.id != m.Conn {
				others = append(others, c)
			}
		}
		l.mu.Unlock()
		if len(others) > 0 {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
				defer cancel()
				holder, err := h.be.Claims.Holder(ctx, getKey(m.Session))
				if err != nil {
					return
				}
				for _, c := range others {
					if c.id != holder {
						c.cancel(errTakenOver)
					}
				}
			}()
		}
	case coordinator.RegistryChanged:
		h.reloadFeatures()
	case coordinator.ListenNotify:
		l.mu.Lock()
		var hit []*listenConn
		for c := range l.listens {
			if c.filter.wants(m.Method, m.URI) {
				hit = append(hit, c)
			}
		}
		l.mu.Unlock()
		for _, c := range hit {
			c.enqueue(listenNotification(c.id, m.Method, m.URI))
		}
	}
}

// endLocal ends what this node holds of an ended session: its cached
// state, its waiters, its running requests and its open streams.
func (h *HTTPHandler) endLocal(sid string) {
	h.sessions.Invalidate(sid)
	h.coord.FailSession(sid, jsonrpc.NewError(jsonrpc.CodeConnectionClosed, "session ended", nil))
	l := h.local
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, cancel := range l.inflight {
		if k[0] == sid {
			cancel()
		}
	}
	for c := range l.conns[sid] {
		c.cancel(errSessionEnded)
	}
}

// hub: unsolicited notifications across the cluster.

func (h *HTTPHandler) listChanged(_ context.Context, method string) {
	h.fanOut(method, "")
}

func (h *HTTPHandler) resourceUpdated(_ context.Context, uri string) {
	h.fanOut("notifications/resources/updated", uri)
}

// fanOut appends a notification once to the GET stream of every session
// that should get it (all sessions, or the subscribers of uri), and tells
// every node's listen streams. It runs in the background: a registry
// change must not block on the store. At most MaxFanOuts run at once and
// the same notification waits at most once (see fanOutLimiter).
func (h *HTTPHandler) fanOut(method, uri string) {
	if !h.fanOuts.enter(method, uri) {
		h.fanOutDropped()
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if !h.fanOuts.acquire(h.ctx, method, uri) {
			return
		}
		defer h.fanOuts.release()
		ctx, cancel := context.WithTimeout(h.ctx, fanOutTimeout)
		defer cancel()
		if err := h.publish(ctx, coordinator.ListenNotify{Method: method, URI: uri}); err != nil {
			h.log.Warn().Err(err).Str("method", method).Msg("listen fan-out failed")
		}
		data, _ := jsonrpc.Encode(plainNotification(method, uri))
		// A bounded pool of appends: one round trip per session, a few
		// in flight at once.
		work := make(chan string)
		var workers sync.WaitGroup
		for range fanOutWorkers {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for sid := range work {
					if err := h.appendGet(ctx, sid, data); err != nil && !errors.Is(err, cluster.ErrNotFound) {
						h.log.Warn().Err(err).Str("session", telemetry.SessionTag(sid)).Str("method", method).Msg("notification not delivered")
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
		if uri != "" {
			ids, err := h.be.Sessions.Subscribers(ctx, uri)
			if err != nil {
				h.log.Warn().Err(err).Msg("subscribers lookup failed")
				return
			}
			deliver(ids)
			return
		}
		cursor := ""
		for {
			ids, next, err := h.be.Sessions.Scan(ctx, cursor, 500)
			if err != nil {
				h.log.Warn().Err(err).Msg("session scan failed")
				return
			}
			deliver(ids)
			if next == "" {
				return
			}
			cursor = next
		}
	}()
}

// fanOutWorkers bounds the appends of one fan-out in flight at once.
const fanOutWorkers = 16

// appendGet appends a message to a session's GET stream. A session whose
// GET stream was never opened (or that ended) answers ErrNotFound.
func (h *HTTPHandler) appendGet(ctx context.Context, sid string, data []byte) error {
	_, err := h.be.Events.Append(ctx, sid, getStreamID(sid), data, false, h.lim)
	return err
}

// getStreamID names a session's GET stream: derived from the session id
// by a one-way hash, so any node can address it without a lookup and the
// id reveals nothing of the session id.
func getStreamID(sid string) string {
	sum := sha256.Sum256([]byte("mcp-get-stream:" + sid))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}

// busReady reports whether messages between nodes flow (always true on
// the memory backend).
func (h *HTTPHandler) busReady() bool {
	return h.be.Ready == nil || h.be.Ready()
}

// errBusDown answers work that needs the bus while it reconnects.
var errBusDown = jsonrpc.NewError(jsonrpc.CodeUnavailable, "the cluster bus is reconnecting; retry shortly", nil)

// Ready reports whether the node should receive traffic: not draining,
// the bus up, and the shared store answering.
func (h *HTTPHandler) Ready(ctx context.Context) error {
	switch {
	case h.draining.Load():
		return errors.New("draining")
	case !h.busReady():
		return errors.New("cluster bus reconnecting")
	}
	if h.be.Ping != nil {
		if err := h.be.Ping(ctx); err != nil {
			return fmt.Errorf("backend: %w", err)
		}
	}
	return nil
}
