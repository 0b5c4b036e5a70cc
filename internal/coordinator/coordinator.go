// The waiter table: server→client requests and the client's replies,
// which arrive on separate HTTP requests that may land on any node. The
// id of every outbound request encodes the node that waits for it, so
// the node receiving a reply forwards it to the owner over the bus
// without a lookup (reply.go). Waiters are keyed by (session, principal,
// id): a reply arriving on one session, or from another caller than the
// session's, can never resolve another's waiter, even when both use the
// same id, on whichever node the reply lands.

package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/cluster"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// ErrTooMany is returned by Register when the waiter table is full.
var ErrTooMany = errors.New("coordinator: too many pending requests")

// ErrSessionShare is returned by Register when the session already holds
// its share of the waiter table.
var ErrSessionShare = errors.New("coordinator: too many pending requests for this session")

// ErrUndelivered is returned by Resolve when no node received a reply
// it forwarded: the owner's bus connection is down, or the owner is gone.
// The reply is lost unless the client sends it again, so the caller must
// tell the client instead of accepting it.
var ErrUndelivered = errors.New("coordinator: the node waiting for this reply did not receive it")

// idPrefix marks ids minted here: "c.<node>.<incarnation>.<random>".
const idPrefix = "c."

// Coordinator holds this node's waiters.
type Coordinator struct {
	node       string // instance: "<node id>.<incarnation>"
	display    string // node id, for telemetry
	bus        cluster.Bus
	max        int
	perSession int

	// undecodable is told of every payload on the reply topic that is
	// not a reply (see OnUndecodable).
	undecodable func(topic string, err error)

	mu        sync.Mutex
	waiters   map[key]*Waiter
	bySession map[string]int // pending waiters per session
}

// key names a waiter: the session and the principal id of its caller
// ("" without authentication) the request was sent to, and its id.
type key struct{ session, principal, id string }

// Waiter is one pending server→client request.
type Waiter struct {
	c  *Coordinator
	k  key
	ID jsonrpc.ID
	// Tag groups waiters for bulk failure (e.g. the stream a request was
	// delivered on).
	Tag  string
	done chan struct{}
	once sync.Once
	res  json.RawMessage
	err  error
}

// DefaultMaxWaiters is the waiter bound New uses when limit is not
// positive (mcp.HTTPOptions.MaxWaiters takes it from here).
const DefaultMaxWaiters = 10000

// New returns a coordinator for one process of node: incarnation (drawn
// at start) tells it from earlier processes with the same node id. Its
// ids and reply topic name both, so a reply to a request of a previous
// process is never routed to, nor settles a waiter of, this one. Foreign
// replies are routed over bus (nil for a single process); limit bounds
// the number of pending waiters, of which one session may hold half (see
// SetSessionShare).
func New(node, incarnation string, bus cluster.Bus, limit int) *Coordinator {
	if limit <= 0 {
		limit = DefaultMaxWaiters
	}
	name := node
	if incarnation != "" {
		name += "." + incarnation
	}
	return &Coordinator{node: name, display: node, bus: bus, max: limit, perSession: max(1, limit/2),
		waiters: map[key]*Waiter{}, bySession: map[string]int{}}
}

// SetSessionShare bounds the waiters one session may hold at once, so one
// session with many unanswered requests cannot use up the table for the
// others: n, but never more than half the table (and at least one). Call
// it before Register is used.
func (c *Coordinator) SetSessionShare(n int) {
	c.perSession = max(1, min(n, c.max/2))
}

// OnUndecodable sets the function told of every payload on this
// process's reply topic that Decode rejects, to count and log it. Call it
// before Start.
func (c *Coordinator) OnUndecodable(f func(topic string, err error)) { c.undecodable = f }

// Instance names this coordinator's process: "<node>.<incarnation>".
func (c *Coordinator) Instance() string { return c.node }

// Incarnation is the part of Instance after the node id: it tells this
// process from earlier ones of the same node id.
func (c *Coordinator) Incarnation() string {
	if len(c.node) > len(c.display) {
		return c.node[len(c.display)+1:]
	}
	return ""
}

// NewID mints an outbound request id that names this process, followed
// by 96 random bits: ids cannot be guessed from earlier ones.
func (c *Coordinator) NewID() jsonrpc.ID {
	var b [12]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return jsonrpc.StringID(idPrefix + c.node + "." + base64.RawURLEncoding.EncodeToString(b[:]))
}

// Owner returns the process ("<node>.<incarnation>", the name of its
// membership lease) encoded in an id minted by NewID.
func Owner(id jsonrpc.ID) (string, bool) {
	if !id.IsString() || !strings.HasPrefix(id.Str(), idPrefix) {
		return "", false
	}
	rest := id.Str()[len(idPrefix):]
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// Register starts tracking a request with id to session, whose caller is
// principal (its id, "" without authentication): only a reply from that
// principal on that session settles it. Register before sending the
// request so a fast reply is not lost.
func (c *Coordinator) Register(session, principal string, id jsonrpc.ID, tag string) (*Waiter, error) {
	k := key{session, principal, id.Key()}
	w := &Waiter{c: c, k: k, ID: id, Tag: tag, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) >= c.max {
		return nil, ErrTooMany
	}
	if c.bySession[session] >= c.perSession {
		return nil, ErrSessionShare
	}
	if _, dup := c.waiters[k]; dup {
		return nil, fmt.Errorf("coordinator: id %s already pending", id)
	}
	c.waiters[k] = w
	c.bySession[session]++
	return w, nil
}

// take removes and returns the waiter of k (nil when none).
func (c *Coordinator) take(k key) *Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waiters[k]
	if w == nil {
		return nil
	}
	delete(c.waiters, k)
	if c.bySession[k.session]--; c.bySession[k.session] <= 0 {
		delete(c.bySession, k.session)
	}
	return w
}

// Wait blocks until the reply arrives, the waiter is failed, or ctx ends
// (then the waiter is removed and a late reply is ignored).
func (w *Waiter) Wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		w.Cancel()
		<-w.done
		return w.res, w.err
	}
}

// Cancel drops the waiter; idempotent.
func (w *Waiter) Cancel() {
	w.c.settle(w.k, nil, jsonrpc.NewError(jsonrpc.CodeRequestTimeout, "no reply from the client in time", nil))
}

// Fail releases the waiter with err.
func (w *Waiter) Fail(err error) { w.c.fail(w.k, err) }

func (c *Coordinator) fail(k key, err error) {
	if w := c.take(k); w != nil {
		w.once.Do(func() { w.err = err; close(w.done) })
	}
}

func (c *Coordinator) settle(k key, res json.RawMessage, e *jsonrpc.Error) bool {
	w := c.take(k)
	if w == nil {
		return false
	}
	w.once.Do(func() {
		if e != nil {
			w.err = e
		} else {
			w.res = res
		}
		close(w.done)
	})
	return true
}

// FailSession fails every waiter of session (it ended).
func (c *Coordinator) FailSession(session string, err error) {
	c.failWhere(func(w *Waiter) bool { return w.k.session == session }, err)
}

// FailTag fails every waiter of session with tag.
func (c *Coordinator) FailTag(session, tag string, err error) {
	c.failWhere(func(w *Waiter) bool { return w.k.session == session && w.Tag == tag }, err)
}

// FailAll fails every waiter (shutdown).
func (c *Coordinator) FailAll(err error) { c.failWhere(func(*Waiter) bool { return true }, err) }

func (c *Coordinator) failWhere(match func(*Waiter) bool, err error) {
	c.mu.Lock()
	var hit []key
	for k, w := range c.waiters {
		if match(w) {
			hit = append(hit, k)
		}
	}
	c.mu.Unlock()
	for _, k := range hit {
		c.fail(k, err)
	}
}

// Sessions returns the sessions with pending waiters.
func (c *Coordinator) Sessions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.bySession))
	for s := range c.bySession {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Pending returns the number of pending waiters.
func (c *Coordinator) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
