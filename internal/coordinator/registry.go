package coordinator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrSessionEnded cancels the work of an ended session.
var ErrSessionEnded = errors.New("mcp: session ended")

// ErrTakenOver ends a GET stream another connection took over.
var ErrTakenOver = errors.New("mcp: stream taken over by a newer connection")

// ErrDrain ends streams of a draining node.
var ErrDrain = errors.New("mcp: node draining")

// Conn is an open SSE connection of a session on this node.
type Conn struct {
	ID     string
	Cancel context.CancelCauseFunc
	// GetFor names the session whose GET stream this connection holds
	// ("" for other streams).
	GetFor string
	// claimed is set once the connection claimed the GET stream
	// (TakeGet): only then can a take-over end it.
	claimed atomic.Bool
}

// Listener is an open subscriptions/listen stream on this node.
type Listener interface {
	// Wants reports whether the stream asked for notification method
	// (with uri for resources/updated).
	Wants(method, uri string) bool
	// Notify queues the notification on the stream; it must not block.
	Notify(method, uri string)
	// End ends the stream: with its result, or abruptly (without it, so
	// the client listens again).
	End(abrupt bool)
}

// Registry is what only this node holds: running requests, open streams
// and listen streams, reached from other nodes through the bus.
type Registry struct {
	mu       sync.Mutex
	inflight map[[2]string]context.CancelFunc // (session, id key) → cancel
	conns    map[string]map[*Conn]struct{}    // session → open SSE connections
	listens  map[Listener]struct{}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		inflight: map[[2]string]context.CancelFunc{},
		conns:    map[string]map[*Conn]struct{}{},
		listens:  map[Listener]struct{}{},
	}
}

// AddInflight lists a running request of session ("" for none) with its
// cancel function; call the returned function when it ends.
func (r *Registry) AddInflight(session, id string, cancel context.CancelFunc) func() {
	k := [2]string{session, id}
	r.mu.Lock()
	r.inflight[k] = cancel
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.inflight, k)
		r.mu.Unlock()
	}
}

// AddConn lists an open connection of session; call the returned
// function when it closes.
func (r *Registry) AddConn(session string, c *Conn) func() {
	r.mu.Lock()
	m := r.conns[session]
	if m == nil {
		m = map[*Conn]struct{}{}
		r.conns[session] = m
	}
	m[c] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.conns[session], c)
		if len(r.conns[session]) == 0 {
			delete(r.conns, session)
		}
		r.mu.Unlock()
	}
}

// AddListener lists a listen stream; call the returned function when it
// closes.
func (r *Registry) AddListener(l Listener) func() {
	r.mu.Lock()
	r.listens[l] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.listens, l)
		r.mu.Unlock()
	}
}

// Running returns the number of running requests.
func (r *Registry) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// cancel cancels running request id of session; it reports whether one
// ran here.
func (r *Registry) cancel(session, id string) bool {
	r.mu.Lock()
	cancel := r.inflight[[2]string{session, id}]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// endSession cancels the running requests and ends the connections of
// session.
func (r *Registry) endSession(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, cancel := range r.inflight {
		if k[0] == session {
			cancel()
		}
	}
	for c := range r.conns[session] {
		c.Cancel(ErrSessionEnded)
	}
}

// getHoldersBut returns the connections holding session's GET stream
// other than conn: those that claimed it. One registered that has yet
// to claim it is left out, so a take-over message older than its claim
// (one that arrives late) cannot end it: its claim comes after that
// take-over's and wins.
func (r *Registry) getHoldersBut(session, conn string) []*Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Conn
	for c := range r.conns[session] {
		if c.GetFor == session && c.ID != conn && c.claimed.Load() {
			out = append(out, c)
		}
	}
	return out
}

// listeners returns the listen streams that want a notification.
func (r *Registry) listeners(method, uri string) []Listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Listener
	for l := range r.listens {
		if l.Wants(method, uri) {
			out = append(out, l)
		}
	}
	return out
}

// endAll ends every connection with cause and every listen stream.
func (r *Registry) endAll(cause error, abrupt bool) {
	r.mu.Lock()
	var ls []Listener
	for _, conns := range r.conns {
		for c := range conns {
			if cause != nil {
				c.Cancel(cause)
			}
		}
	}
	for l := range r.listens {
		ls = append(ls, l)
	}
	r.mu.Unlock()
	for _, l := range ls {
		l.End(abrupt)
	}
}

// held returns the sessions this node runs requests of or holds
// connections of, and the running requests of sessions.
func (r *Registry) held() (sessions map[string]struct{}, requests [][2]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sessions = map[string]struct{}{}
	for k := range r.inflight {
		if k[0] != "" {
			sessions[k[0]] = struct{}{}
			requests = append(requests, k)
		}
	}
	for sid := range r.conns {
		sessions[sid] = struct{}{}
	}
	return sessions, requests
}
