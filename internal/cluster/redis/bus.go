package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// bus implements cluster.Bus on the backend's pub/sub hub.
type bus backend

var _ cluster.Bus = (*bus)(nil)

// Publish is one round trip. PUBLISH answers how many connections
// received the message; a node has one pub/sub connection, so that is
// the number of nodes. On Redis Cluster (or a Ring) PUBLISH counts only
// the subscribers of the shard it reached, so the count is unknown
// there. It is sent to the shard owning the channel's slot (go-redis
// would send the keyless command to any node), so the messages of one
// topic are relayed by one shard, in the order they were published.
// Once the deployment publishes sharded (see the package doc), it is an
// SPUBLISH instead, answered by the shard where every subscriber of the
// channel is: the count is exact on Cluster too.
func (m *bus) Publish(ctx context.Context, topic string, msg []byte) (int, error) {
	b := (*backend)(m)
	sharded := b.pubSharded.Load()
	verb := "publish"
	if sharded {
		verb = "spublish"
	}
	cmd := publishCmd(ctx, verb, b.keys.busChannel(topic), msg)
	_ = b.client.Process(ctx, cmd)
	n, err := cmd.Result()
	if err != nil {
		return 0, b.fail(ctx, verb, err)
	}
	if !b.single && !sharded {
		return cluster.ReceiversUnknown, nil
	}
	return int(n), nil
}

// publishCmd is a PUBLISH or SPUBLISH (verb) routed to the shard that
// owns the channel's slot.
func publishCmd(ctx context.Context, verb, channel string, msg []byte) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx, verb, channel, msg)
	cmd.SetFirstKeyPos(1)
	return cmd
}

// Subscribe returns once the subscription is active; ctx bounds only
// that wait. fn runs on a pub/sub receive goroutine, shared by every
// subscription of the backend (of a shard, for sharded channels): it
// must not block, nor call Subscribe or Follow itself (start a
// goroutine for that). A message is published either classic or
// sharded, never both, so a node that reads both gets it once.
func (m *bus) Subscribe(ctx context.Context, topic string, fn func([]byte)) (func(), error) {
	b := (*backend)(m)
	return b.subscribe(ctx, b.keys.busChannel(topic), b.keys.busChannel(topic), func(p string) { fn([]byte(p)) }, nil)
}

// OnReconnect registers fn to run, on its own goroutine, each time a
// pub/sub connection (the classic one or a shard's) is re-established
// after a loss.
func (m *bus) OnReconnect(fn func()) {
	h := (*backend)(m).hub
	h.mu.Lock()
	h.reconnect = append(h.reconnect, fn)
	h.mu.Unlock()
}

// hub multiplexes every Bus subscription and every Follow of a backend
// over ONE Redis pub/sub connection, so a node's connection count does
// not grow with its subscriptions. go-redis re-dials and re-subscribes
// after a network error; the hub notices the loss, tells followers to
// re-read (a Seq 0 event) and runs the OnReconnect callbacks once
// messages flow again. A subscription is active once a PING sent after
// its SUBSCRIBE on the same connection has been answered.
type hub struct {
	b *backend
	// sharded: the hub SSUBSCRIBEs on a connection to one shard of a
	// Cluster (see shards); root is the backend's classic hub, which
	// holds the OnReconnect callbacks (itself for the classic hub).
	sharded bool
	root    *hub
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	// subMu serializes SUBSCRIBE/UNSUBSCRIBE decisions with the commands
	// themselves, so the server sees them in the order they were decided.
	subMu sync.Mutex
	ps    *goredis.PubSub
	sent  map[string]bool // channels SUBSCRIBEd on ps
	// unsent counts the SUNSUBSCRIBEs of a shard's hub sent on ps and
	// not answered yet, by channel: an unsubscription answered beyond
	// them is the server's own (dropped).
	unsent map[string]int

	mu        sync.Mutex
	closed    bool
	broken    bool
	chans     map[string]*channel
	waiters   map[uint64]chan struct{} // barrier token → waiter
	token     uint64
	reconnect []func()
	scratch   []*handler // receive goroutine only

	// Currency (current.go): the socket of the pub/sub connection, how
	// many were dialed, and the send time (since start) of the newest
	// tick PING answered on it (0: none yet).
	start    time.Time
	sock     net.Conn
	raw      syscall.RawConn // sock's socket (nil: none to peek)
	dials    uint64
	fresh    time.Duration
	answered chan struct{} // closed when fresh moves
	wanted   atomic.Bool   // current was asked since the last tick
	kick     chan struct{} // current found the last answer too old
	ticking  chan struct{} // closed when tick returns
}

type channel struct {
	handlers map[*handler]struct{}
	active   bool
}

type handler struct {
	fn   func(payload string)
	hint func() // on reconnect; may be nil
}

const (
	barrierPrefix = "mcp-barrier:"
	healthPayload = "mcp-health"
)

// newHub starts a hub: the classic one (root nil), or a shard's, whose
// connection is dialed to the shard owning first's slot and subscribed
// to it.
func newHub(b *backend, root *hub, first ...string) *hub {
	h := &hub{
		b: b, root: root, sharded: root != nil, done: make(chan struct{}),
		sent:     make(map[string]bool),
		unsent:   make(map[string]int),
		chans:    make(map[string]*channel),
		waiters:  make(map[uint64]chan struct{}),
		start:    time.Now(),
		kick:     make(chan struct{}, 1),
		answered: make(chan struct{}),
		ticking:  make(chan struct{}),
	}
	if root == nil {
		h.root = h
	}
	h.ctx, h.cancel = context.WithCancel(h.mark(context.Background()))
	h.hook(h.ctx)
	h.ps, _ = h.open(first...) // a failure shows in the receive loop
	for _, name := range first {
		h.sent[name] = true
	}
	go h.run()
	go h.tick()
	return h
}

var errClosed = fmt.Errorf("redis backend closed: %w", cluster.ErrUnavailable)

// subscribe adds a handler to a channel and returns once the channel is
// active.
func (h *hub) subscribe(ctx context.Context, name string, fn func(string), hint func()) (func(), error) {
	hd := &handler{fn: fn, hint: hint}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errClosed
	}
	c := h.chans[name]
	if c == nil {
		c = &channel{handlers: make(map[*handler]struct{})}
		h.chans[name] = c
	}
	c.handlers[hd] = struct{}{}
	active := c.active
	h.mu.Unlock()

	var once sync.Once
	cancel := func() { once.Do(func() { h.remove(name, hd) }) }
	if active {
		return cancel, nil
	}
	h.subMu.Lock()
	if !h.sent[name] {
		// On error go-redis keeps the channel and subscribes it when it
		// reconnects; the barrier below tells whether that happened.
		if h.sharded {
			_ = h.ps.SSubscribe(h.mark(ctx), name)
		} else {
			_ = h.ps.Subscribe(h.mark(ctx), name)
		}
		h.sent[name] = true
	}
	h.subMu.Unlock()
	if err := h.barrier(ctx); err != nil {
		cancel()
		return nil, err
	}
	h.mu.Lock()
	if h.chans[name] == c && !h.broken {
		c.active = true
	}
	h.mu.Unlock()
	return cancel, nil
}

// remove drops a handler and unsubscribes the channel with the last one.
func (h *hub) remove(name string, hd *handler) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	c := h.chans[name]
	if c == nil {
		h.mu.Unlock()
		return
	}
	delete(c.handlers, hd)
	empty := len(c.handlers) == 0
	if empty {
		delete(h.chans, name)
	}
	closed := h.closed
	h.mu.Unlock()
	if empty && h.sent[name] && !closed {
		delete(h.sent, name)
		if h.sharded {
			h.unsent[name]++
			_ = h.ps.SUnsubscribe(h.ctx, name)
		} else {
			_ = h.ps.Unsubscribe(h.ctx, name)
		}
	}
}

// barrier waits until a PING sent now on the pub/sub connection is
// answered: every SUBSCRIBE sent before it is then in effect.
func (h *hub) barrier(ctx context.Context) error {
	deadline := time.Now().Add(h.b.opts.SubscribeTimeout)
	for {
		h.mu.Lock()
		h.token++
		tok := h.token
		w := make(chan struct{})
		h.waiters[tok] = w
		h.mu.Unlock()

		h.subMu.Lock()
		ps := h.ps
		h.subMu.Unlock()
		err := ps.Ping(h.mark(ctx), barrierPrefix+strconv.FormatUint(tok, 10))
		wait := 500 * time.Millisecond
		if err != nil {
			wait = 50 * time.Millisecond
		}
		wait = min(wait, time.Until(deadline))
		t := time.NewTimer(max(wait, 0))
		select {
		case <-w:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			h.dropWaiter(tok)
			return fmt.Errorf("redis subscribe: %w", ctx.Err())
		case <-h.done:
			t.Stop()
			return errClosed
		case <-t.C:
		}
		h.dropWaiter(tok)
		if !time.Now().Before(deadline) {
			if err == nil {
				err = errors.New("no answer on the pub/sub connection")
			}
			return fmt.Errorf("redis subscribe: %w: %w", cluster.ErrUnavailable, err)
		}
	}
}

// mark marks ctx as the hub's, for a call on its PubSub: a connection
// dialed under it is the hub's (dialHook).
func (h *hub) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, pubSubDial{}, h)
}

func (h *hub) dropWaiter(tok uint64) {
	h.mu.Lock()
	delete(h.waiters, tok)
	h.mu.Unlock()
}

// pong wakes the barriers up to the answered token: the connection
// answers in order, so every earlier PING has been processed too.
func (h *hub) pong(payload string) {
	if t, ok := strings.CutPrefix(payload, tickPrefix); ok {
		h.ticked(t)
		return
	}
	n, ok := strings.CutPrefix(payload, barrierPrefix)
	if !ok {
		return
	}
	tok, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	for t, w := range h.waiters {
		if t <= tok {
			close(w)
			delete(h.waiters, t)
		}
	}
	h.mu.Unlock()
}

// run is the receive loop: the only reader of the pub/sub connection.
func (h *hub) run() {
	defer close(h.done)
	backoff := 50 * time.Millisecond
	probing := false // a health PING is unanswered
	for {
		h.subMu.Lock()
		ps := h.ps
		h.subMu.Unlock()
		msg, err := ps.ReceiveTimeout(h.ctx, h.b.opts.PingInterval)
		if h.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if probing { // silent past two intervals: a half-open connection
					h.lost(errors.New("pub/sub connection stopped answering"))
					h.replace()
					probing = false
					continue
				}
				probing = true
				_ = ps.Ping(h.ctx, healthPayload)
				continue
			}
			h.lost(err)
			h.b.reloadSlots(h.ctx, err)
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 250*time.Millisecond)
			var refused goredis.Error
			if h.sharded || errors.As(err, &refused) {
				// The server refused a command on a connection that still
				// works (a SUBSCRIBE sent on reconnecting, refused by a
				// server still loading after a failover or by an ACL):
				// go-redis would keep the connection without those
				// subscriptions, and the next PONG would pass for a
				// recovery. Start over on a fresh connection that
				// subscribes every channel again. A shard's hub always
				// does: go-redis would SSUBSCRIBE every channel in one
				// command, which a shard refuses (CROSSSLOT) when they
				// are of several slots, as a shard's channels are.
				h.replace()
				continue
			}
			_ = ps.Ping(h.ctx, healthPayload) // re-dials and re-subscribes
			continue
		}
		probing = false
		backoff = 50 * time.Millisecond
		h.restored()
		switch m := msg.(type) {
		case *goredis.Message:
			h.dispatch(m.Channel, m.Payload)
		case *goredis.Pong:
			h.pong(m.Payload)
		case *goredis.Subscription:
			if h.dropped(m) {
				// The shard no longer serves the channel's slot (its
				// primary handed it to a replica, CLUSTER FAILOVER, or
				// the slot moved) and ended the subscription itself:
				// subscribe everything again where the slots are now.
				h.lost(errors.New("the shard ended a subscription: " + m.Channel))
				h.b.reloadMap()
				h.replace()
			}
		}
	}
}

// lost records a broken connection: nothing is active until a barrier
// passes again.
func (h *hub) lost(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.broken {
		h.b.log.Warn().Err(err).Bool("sharded", h.sharded).Msg("pub/sub connection lost")
	}
	h.broken = true
	for _, c := range h.chans {
		c.active = false
	}
}

// restored runs after the first message following a loss: followers are
// told to re-read and the OnReconnect callbacks run.
func (h *hub) restored() {
	h.mu.Lock()
	if !h.broken {
		h.mu.Unlock()
		return
	}
	h.broken = false
	var hints []func()
	for _, c := range h.chans {
		for hd := range c.handlers {
			if hd.hint != nil {
				hints = append(hints, hd.hint)
			}
		}
	}
	h.mu.Unlock()
	h.root.mu.Lock()
	callbacks := append([]func(){}, h.root.reconnect...)
	h.root.mu.Unlock()
	h.b.log.Info().Bool("sharded", h.sharded).Msg("pub/sub connection restored")
	for _, hint := range hints {
		hint()
	}
	for _, fn := range callbacks {
		go fn()
	}
}

// replace swaps in a fresh pub/sub connection subscribed to every
// channel in use. A shard's hub that could not subscribe them all (its primary is gone
// and no replica took over yet) tries again every replaceRetry, with the
// slot map reloaded in between, until it has, or until Close.
func (h *hub) replace() {
	for !h.swap() {
		h.b.reloadMap()
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(replaceRetry):
		}
	}
}

// replaceRetry is how soon a shard's hub tries again to subscribe its
// channels on a fresh connection.
const replaceRetry = 250 * time.Millisecond

// swap puts a fresh PubSub in place of the hub's and reports whether it
// subscribed every channel.
func (h *hub) swap() bool {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	old := h.ps
	names := make([]string, 0, len(h.sent))
	for name := range h.sent {
		names = append(names, name)
	}
	ps, all := h.open(names...)
	h.ps = ps
	clear(h.unsent) // the old connection's answers are not read
	_ = old.Close()
	return all
}

// open returns a new PubSub subscribed to names: SSUBSCRIBEd on a shard
// hub (go-redis dials the shard that owns the first channel's slot), one
// channel per command, since the channels of a shard are of several
// slots. A shard's hub reports whether every one was sent on a working
// connection (a classic hub's PubSub subscribes them all again when it
// reconnects).
func (h *hub) open(names ...string) (*goredis.PubSub, bool) {
	if !h.sharded {
		return h.b.client.Subscribe(h.ctx, names...), true
	}
	ps := h.b.client.(*goredis.ClusterClient).SSubscribe(h.ctx)
	if len(names) == 0 {
		return ps, true
	}
	if err := ps.SSubscribe(h.ctx, names[0]); err != nil {
		// Not connected (the shard's primary is gone, a replica not
		// elected yet). Each further SSUBSCRIBE would dial the dead
		// address again (with go-redis's dial retries, half a second
		// each), holding every subscription of the hub behind them.
		return ps, false
	}
	home, _ := h.b.masterOf(h.ctx, names[0])
	for _, name := range names[1:] {
		if at, _ := h.b.masterOf(h.ctx, name); at != home {
			// Its slot moved to another shard (resharding), which
			// the hub does not follow: subscribed here it would be
			// refused (MOVED) at every try.
			h.b.log.Warn().Str("channel", name).Str("shard", at).Msg("a sharded channel's slot moved to another shard: not followed until the node restarts")
			continue
		}
		if err := ps.SSubscribe(h.ctx, name); err != nil {
			return ps, false // lost meanwhile: as above
		}
	}
	return ps, true
}

// dropped reports whether m is a shard's end of a subscription this hub
// holds, which it did not ask for: the shard no longer serves the
// channel's slot.
func (h *hub) dropped(m *goredis.Subscription) bool {
	if !h.sharded || m.Kind != "sunsubscribe" {
		return false
	}
	h.subMu.Lock()
	defer h.subMu.Unlock()
	if n := h.unsent[m.Channel]; n > 0 { // the answer to the hub's own
		if n == 1 {
			delete(h.unsent, m.Channel)
		} else {
			h.unsent[m.Channel] = n - 1
		}
		return false
	}
	return h.sent[m.Channel]
}

func (h *hub) dispatch(name, payload string) {
	h.mu.Lock()
	c := h.chans[name]
	if c == nil {
		h.mu.Unlock()
		return
	}
	hs := h.scratch[:0]
	for hd := range c.handlers {
		hs = append(hs, hd)
	}
	h.mu.Unlock()
	for _, hd := range hs {
		hd.fn(payload)
	}
	clear(hs)
	h.scratch = hs[:0]
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.subMu.Lock()
	_ = h.ps.Close()
	h.subMu.Unlock()
	<-h.done
	<-h.ticking
}

// ready reports whether the pub/sub connection is up (no loss pending).
func (h *hub) ready() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return (!h.broken || h.unused()) && !h.closed
}

// unused reports whether the hub holds no subscription now: a shard's
// whose subscriptions all ended (it lives on until Close), or the
// classic hub of a node that reads every topic sharded. It can miss
// nothing, and nothing may come on its connection to show that it was
// dialed again: a classic hub whose health PING was refused by a dead
// primary's address, and whose receive loop then dialed a live node,
// would wait out PingInterval for a first answer. The caller holds h.mu.
func (h *hub) unused() bool { return len(h.chans) == 0 }
