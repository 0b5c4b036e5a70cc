package coordinator

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Flow 3 (docs/ARCHITECTURE.md, "The flows and their files"): a handler on B sends a server→client request on
// its stream; the client's reply arrives on a POST that lands on C. The
// request id names the process that waits (NewID), so C forwards the
// reply over the bus to that process's topic without a lookup, and the
// waiter, keyed by (session, principal, id), wakes only for a reply of
// its session from its session's caller: the reply carries the principal
// id of the caller who posted it.
//
// The bus delivers only to connected subscribers, so a reply the waiting
// process did not receive (its bus connection is down during a failover
// or a network cut, or the process is gone) must not be accepted: the
// handler would wait for it until its timeout while the client believes
// it answered. RouteReply tells the two cases apart.

// Topic is the bus topic on which node receives routed replies.
func Topic(node string) string { return "reply:" + node }

// Start subscribes to this node's reply topic.
func (c *Coordinator) Start(ctx context.Context) (cancel func(), err error) {
	if c.bus == nil {
		return func() {}, nil
	}
	topic := Topic(c.node)
	return c.bus.Subscribe(ctx, topic, func(b []byte) {
		r, err := DecodeReply(b)
		if err != nil {
			if c.undecodable != nil {
				c.undecodable(topic, err)
			}
			return
		}
		if !telemetry.Enabled() {
			c.settle(key{r.Session, r.Principal, r.ID}, r.Result, r.Error)
			return
		}
		_, span := telemetry.Tracer().Start(telemetry.Extract(context.Background(), r.Trace), "mcp reply routed",
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("mcp.node.id", c.display), attribute.String("jsonrpc.request.id", r.ID)))
		settled := c.settle(key{r.Session, r.Principal, r.ID}, r.Result, r.Error)
		span.SetAttributes(attribute.Bool("mcp.reply.settled", settled))
		span.End()
	})
}

// Resolve delivers a reply (a response message) that principal (its id)
// posted on session. A reply to an id this node minted is settled here;
// one minted by another node is forwarded to it. Replies to ids nobody
// minted, to requests of another session, or from another principal than
// the request's, are dropped. It reports whether the reply was settled
// locally or forwarded; ErrUndelivered when it was forwarded but the
// owner's node did not receive it.
func (c *Coordinator) Resolve(ctx context.Context, session, principal string, msg *jsonrpc.Message) (bool, error) {
	owner, ok := Owner(msg.ID)
	if !ok {
		return false, nil
	}
	if owner == c.node || c.bus == nil {
		return c.settle(key{session, principal, msg.ID.Key()}, msg.Result, msg.Error), nil
	}
	b, err := EncodeReply(Reply{Session: session, Principal: principal, ID: msg.ID.Key(), Result: msg.Result, Error: msg.Error, Trace: telemetry.Inject(ctx)})
	if err != nil {
		return false, err
	}
	n, err := c.bus.Publish(ctx, Topic(owner), b)
	if err != nil {
		return false, err
	}
	if n == 0 {
		return false, ErrUndelivered
	}
	return true, nil
}

// ErrOwnerUnreachable is returned by RouteReply when the process waiting
// for the reply holds its membership lease but did not receive it: its
// bus connection is down and comes back (or the lease lapses), so the
// client should send the reply again shortly.
var ErrOwnerUnreachable = jsonrpc.NewError(jsonrpc.CodeUnavailable,
	"the node waiting for this reply cannot be reached right now; send it again shortly", nil)

// ErrOwnerGone is what RouteReply's error wraps when the process that
// sent the request is gone (a node restarted with the same id is another
// process): nothing waits for the reply, and the request's stream ends
// with a node-lost error.
var ErrOwnerGone = errors.New("coordinator: the node that sent this request stopped")

// ownerGone is RouteReply's error for a reply whose owner is gone: the
// JSON-RPC error for the client, matching ErrOwnerGone.
type ownerGone struct{ e *jsonrpc.Error }

func (e ownerGone) Error() string      { return e.e.Error() }
func (ownerGone) Is(target error) bool { return target == ErrOwnerGone }
func (e ownerGone) Unwrap() error      { return e.e }

// RouteReply delivers a reply that principal posted on session (see
// Resolve). It
// returns nil when the reply was settled here or received by its owner,
// or when its id is not one this cluster minted (such replies are
// ignored); ErrOwnerUnreachable or an error matching ErrOwnerGone when
// its owner did not receive it; or the error of the bus or the store.
func (n *Node) RouteReply(ctx context.Context, session, principal string, msg *jsonrpc.Message) error {
	_, err := n.Waiters.Resolve(ctx, session, principal, msg)
	if !errors.Is(err, ErrUndelivered) {
		return err
	}
	owner, _ := Owner(msg.ID)
	alive, err := n.be.Members.Alive(ctx, owner)
	switch {
	case err != nil:
		return err
	case alive:
		n.log.Warn().Str("owner", owner).Msg("reply not received by its node: the client is asked to retry")
		return ErrOwnerUnreachable
	}
	return ownerGone{jsonrpc.NewError(jsonrpc.CodeNodeLost,
		"the node that sent this request stopped; the request is no longer pending",
		map[string]any{"node": NodeOf(owner)})}
}
