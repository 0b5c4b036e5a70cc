package redis

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Current (cluster.Backend.Current) is asked on every answer a node
// gives from a copy that bus messages invalidate (the session cache), so
// it does no round trip. It holds when, at the call:
//
//   - the hub knows of no loss (ready);
//   - a tick PING sent on the pub/sub connection at most
//     cluster.BusFresh ago has been answered on it and dispatched: Redis
//     answers it after every message published before it reached the
//     server, and the hub dispatches in the order it reads, so every
//     message published before that PING has been handed to its
//     subscribers. A connection cut silently (no FIN, no RST) stops the
//     answers, so Current turns false within BusFresh, long before the
//     health probe of run (2 × PingInterval) notices;
//   - a peek at the connection's socket (peek: recv with MSG_PEEK |
//     MSG_DONTWAIT, which neither waits nor takes the descriptor's read
//     lock that the blocked reader holds) finds it open and empty: an
//     EOF (Redis died or closed it) or a closed socket turns Current
//     false at once, before the reader goroutine is scheduled to notice;
//     unread bytes (messages not dispatched yet) turn it false too.
//
// Ticks run only while Current is asked (a node that answers nothing
// from copies pings nothing): every cluster.BusTick, and at once when a
// call finds the last answer too old; that call waits a little for the
// answer (tickWait), and reads the store when it is late.
// Their cost is one PING per BusTick per node in use, whatever its
// sessions and streams.
//
// On Cluster the classic connection's PING proves less: a classic
// message is published on the shard owning its channel and relayed to
// the shard of the hub's connection over the cluster bus, so the answer
// vouches for the messages that reached that shard; the relay's lag
// (normally well under a millisecond) must stay below
// coordinator.EchoWait - BusFresh. A sharded message is not relayed: the
// hub of its shard (shards) ticks on its own connection, and the
// backend is current when every hub is.
//
// The socket is the one the client dialed for the hub's pub/sub
// connection, seen through a dial hook (pubSubDial marks the hub's calls
// on it). On a client the hook cannot reach (a Ring) or a socket that
// cannot be peeked (an OS other than Linux), Current is false: copies
// are never used there.

// tickPrefix starts the payload of a tick PING:
// "<prefix><dial>:<sent>", dial the connection it was meant for, sent
// its send time since hub.start.
const tickPrefix = "mcp-tick:"

// pubSubDial marks the contexts of the hub's calls on its PubSub: a
// connection dialed under one is the hub's.
type pubSubDial struct{}

// dialHook records the pub/sub connections the hub's client dials.
type dialHook struct{ h *hub }

func (d dialHook) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil && ctx.Value(pubSubDial{}) == d.h {
			d.h.dialed(c)
		}
		return c, err
	}
}

func (dialHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// hook installs the dial hook on the client (on Cluster on each node's,
// present and future).
func (h *hub) hook(ctx context.Context) {
	d := dialHook{h}
	switch c := h.b.client.(type) {
	case *goredis.Client:
		c.AddHook(d)
	case *goredis.ClusterClient:
		c.OnNewNode(func(n *goredis.Client) { n.AddHook(d) })
		_ = c.ForEachShard(ctx, func(_ context.Context, n *goredis.Client) error {
			n.AddHook(d)
			return nil
		})
	}
}

// dialed records a new pub/sub connection. Any but the first replaces
// one that was lost: messages may have been missed in between, even
// when the reader did not see the error (go-redis re-dials on a failed
// write too).
func (h *hub) dialed(c net.Conn) {
	h.mu.Lock()
	if h.sock == c { // the hook installed twice on one node client
		h.mu.Unlock()
		return
	}
	again := h.dials > 0
	h.dials++
	h.sock = c
	h.raw = rawConn(c)
	h.fresh = 0
	h.mu.Unlock()
	if again {
		h.lost(errors.New("pub/sub connection dialed again"))
	}
}

// ticked records the answer to a tick PING.
func (h *hub) ticked(payload string) {
	d, s, ok := strings.Cut(payload, ":")
	if !ok {
		return
	}
	dial, err1 := strconv.ParseUint(d, 10, 64)
	sent, err2 := strconv.ParseInt(s, 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	h.mu.Lock()
	if dial == h.dials && time.Duration(sent) > h.fresh {
		h.fresh = time.Duration(sent)
		close(h.answered)
		h.answered = make(chan struct{})
	}
	h.mu.Unlock()
}

// current implements cluster.Backend.Current. When the last answer is
// too old it sends a tick at once and waits up to tickWait for its
// answer (instead of a read of the store, which would cost as much).
func (h *hub) current() bool {
	if !h.wanted.Load() {
		h.wanted.Store(true)
	}
	for wait := true; ; wait = false {
		h.mu.Lock()
		if h.unused() {
			h.mu.Unlock()
			return !h.closed
		}
		up := !h.broken && !h.closed
		fresh := h.fresh > 0 && time.Since(h.start)-h.fresh < cluster.BusFresh
		rc := h.raw
		answered := h.answered
		h.mu.Unlock()
		if !up {
			return false
		}
		if fresh {
			return rc != nil && peek(rc)
		}
		select {
		case h.kick <- struct{}{}:
		default:
		}
		if !wait {
			return false
		}
		t := time.NewTimer(tickWait)
		select {
		case <-answered:
			t.Stop()
		case <-t.C:
			return false
		}
	}
}

// tickWait bounds how long current waits for the answer to a tick it
// asked for.
const tickWait = 10 * time.Millisecond

// tick sends the tick PINGs while current is asked.
func (h *hub) tick() {
	defer close(h.ticking)
	t := time.NewTicker(cluster.BusTick)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			if !h.wanted.Swap(false) {
				continue
			}
		case <-h.kick:
			if time.Since(last) < cluster.BusTick/4 {
				continue // one is on its way
			}
		}
		last = time.Now()
		h.mu.Lock()
		dial := h.dials
		h.mu.Unlock()
		h.subMu.Lock()
		ps := h.ps
		h.subMu.Unlock()
		payload := tickPrefix + strconv.FormatUint(dial, 10) + ":" + strconv.FormatInt(int64(time.Since(h.start)), 10)
		_ = ps.Ping(h.ctx, payload)
	}
}
