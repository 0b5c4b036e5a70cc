package coordinator

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// A change to a session (its end, its log level) is told to every node
// over the bus, and each drops its cached copy (session.Store). The node
// that made the change answers its client only once every other live
// node that may hold a copy has acknowledged the message (Invalidated),
// or after EchoWait: so
// a client that hears of the change and sends its next request to
// another node finds the change there, although that node answers from
// its cache without reading the store. Waiting for the message to come
// back to the sender is not enough: a node whose process was not
// scheduled meanwhile handles the request and the message in either
// order once it runs.
//
// Only the nodes that may hold a copy need acknowledge: the store
// returns the session's holders with the change (cluster.Holders), and
// the sender narrows its wait to them (Echo.Among), and to the members of
// format 1 (see Format). A node holds a copy only after it served a
// request of the session since its previous change, so a change waits
// for at most one acknowledgement per such request, however many nodes
// the cluster has.
//
// An acknowledgement costs the acknowledging node one publish, off the
// request path, to the sender's own topic (AckTopic).
//
// A node that does not acknowledge within EchoWait (cut off the bus, or
// stalled, or gone) does not keep the change from its client either:
// a node answers from its cache only while its bus is current
// (Node.BusCurrent: it has received every bus message published up to
// cluster.BusFresh before the answer), and BusFresh < EchoWait. The
// sender published the invalidation before it started waiting, so at
// least EchoWait before its client heard the answer, and so more than
// BusFresh before any later request reaches another node. That node
// answers from its copy only if it holds the answer to a tick PING sent
// on its pub/sub connection less than BusFresh before, hence after the
// invalidation was published; Redis answers the PING on that connection
// after every message published before it, and the node's hub
// dispatches them in the order it reads them, so the invalidation was
// dispatched (the copy dropped) before the PING's answer was recorded.
// A node that lacks such an answer reads the store. What remains: an
// instance that joined but is not yet in the sender's view of the
// members when it starts waiting and that answers a request within
// EchoWait from a copy read before the change (MemberJoined narrows that
// to the bus's delivery); a copy made before an outage of the node's bus
// and used between the bus's return and the Flush of the node's resync.

// EchoWait bounds how long a node waits for the acknowledgements of a
// session's invalidation before it answers anyway. It must exceed
// cluster.BusFresh (see above).
const EchoWait = 500 * time.Millisecond

// A compile-time check that EchoWait > cluster.BusFresh: a negative
// constant does not convert to uint64.
const _ = uint64(EchoWait - cluster.BusFresh - 1)

// echoes are the Echo waits of a node, by token.
type echoes struct {
	mu   sync.Mutex
	seq  uint64
	wait map[string]*Echo
}

// Echo collects the acknowledgements of one invalidation. A nil Echo
// asks for none and waits for nothing.
type Echo struct {
	n     *Node
	token string
	from  map[string]bool // guarded by n.echoes.mu
	among map[string]bool // guarded by n.echoes.mu; nil: every member
	more  chan struct{}   // an acknowledgement arrived
	once  sync.Once
}

// expectInvalidation starts collecting the acknowledgements of an
// invalidation: send Token with it (InvalidateSession.Ack, or
// sessionEndNotice), then Wait, or Stop when it was not sent.
func (n *Node) expectInvalidation() *Echo {
	es := &n.echoes
	es.mu.Lock()
	defer es.mu.Unlock()
	es.seq++
	e := &Echo{n: n, token: n.instance + "|" + strconv.FormatUint(es.seq, 36), from: map[string]bool{}, more: make(chan struct{}, 1)}
	if es.wait == nil {
		es.wait = map[string]*Echo{}
	}
	es.wait[e.token] = e
	return e
}

// Token is the acknowledgement token of e ("" for a nil Echo: no
// acknowledgements asked).
func (e *Echo) Token() string {
	if e == nil {
		return ""
	}
	return e.token
}

// Among narrows the acknowledgements e waits for to those of holders
// (the nodes the store returned with the change: cluster.Holders) and of
// the members of format 1, which record no holdings. nil holders (not
// known) keep every live member.
func (e *Echo) Among(holders []string) {
	if e == nil || holders == nil {
		return
	}
	among := make(map[string]bool, len(holders))
	for _, h := range holders {
		among[h] = true
	}
	e.n.echoes.mu.Lock()
	e.among = among
	e.n.echoes.mu.Unlock()
}

// Wait returns once every other live member it waits for (Among) has
// acknowledged, after
// EchoWait, when ctx ends, or at once while the bus is down (the other
// nodes bypass their caches until they resync then). It reports whether
// every acknowledgement came, and stops the collection.
func (e *Echo) Wait(ctx context.Context) bool {
	if e == nil {
		return true
	}
	defer e.Stop()
	if !e.n.BusReady() {
		return false
	}
	t := time.NewTimer(EchoWait)
	defer t.Stop()
	for {
		missing := e.missing()
		if missing == "" {
			return true
		}
		select {
		case <-e.more:
		case <-t.C:
			e.n.log.Warn().Str("instance", missing).Float64("waited_ms", telemetry.Ms(EchoWait)).Msg("session invalidation not acknowledged in time; answering anyway")
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// missing names a live member that has not acknowledged yet ("" when
// none).
func (e *Echo) missing() string {
	others := e.n.members.others(e.n.instance)
	e.n.echoes.mu.Lock()
	defer e.n.echoes.mu.Unlock()
	for _, o := range others {
		if e.among != nil && !e.among[o] && FormatOf(o) >= 2 {
			continue
		}
		if !e.from[o] {
			return o
		}
	}
	return ""
}

// Stop ends the collection.
func (e *Echo) Stop() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		e.n.echoes.mu.Lock()
		delete(e.n.echoes.wait, e.token)
		e.n.echoes.mu.Unlock()
	})
}

// acknowledge tells the sender of an invalidation carrying token that
// this node has dropped its copy (nothing when no token, or when this
// node sent it): on the sender's own topic, or on TopicAll for a sender
// of format 1. A sender of format 2 waits only for the holders the store
// named, so this node acknowledges only when it held the session lately
// (held: session.Store.Invalidate); one of format 1 waits for every
// node. It runs on the bus goroutine, so the publish runs on its own.
func (n *Node) acknowledge(session, token string, held bool) {
	sender, _, ok := strings.Cut(token, "|")
	if !ok || sender == n.instance {
		return
	}
	topic := TopicAll
	if FormatOf(sender) >= 2 {
		if !held {
			return
		}
		topic = AckTopic(sender)
	}
	n.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, EchoWait)
		defer cancel()
		if err := n.publishTo(ctx, topic, Invalidated{Session: session, Ack: token, From: n.instance}); err != nil {
			n.log.Debug().Err(err).Msg("session invalidation not acknowledged")
		}
	})
}

// onAck handles a message on this node's AckTopic.
func (n *Node) onAck(b []byte) {
	n.metrics.BusReceived()
	msg, err := Decode(b)
	if err != nil {
		n.skip(AckTopic(n.instance), err)
		return
	}
	if m, ok := msg.(Invalidated); ok {
		n.acknowledged(m.Ack, m.From)
	}
}

// acknowledged records an acknowledgement of an invalidation this node
// sent.
func (n *Node) acknowledged(token, from string) {
	if !strings.HasPrefix(token, n.instance+"|") {
		return
	}
	n.members.add(from)
	es := &n.echoes
	es.mu.Lock()
	e := es.wait[token]
	if e != nil {
		e.from[from] = true
	}
	es.mu.Unlock()
	if e != nil {
		select {
		case e.more <- struct{}{}:
		default:
		}
	}
}
