package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// PostStream is a live POST stream of the handshake era, produced on this
// node by the request it answers (OpenPost): its events are recorded in
// group commits (the embedded Producer: Add, Start, Sync, Next) before
// the transport writes them, the stream is held while it is produced (a
// resumer on another node waits for its final, and gets AbandonedError
// if this process stops first), and it is listed among its session's
// live connections, so that a session's end or a drain closes the
// client's connection.
type PostStream struct {
	*Producer
	unhold func()
	unlist func()
}

// OpenPost opens stream, the response stream of request (its id key) of
// session, produced by this process until Close. flush runs after each
// batch's events were delivered (see Produce); detach closes the client's
// connection early, when the session ends or the node drains (the
// request goes on, and its events land in history).
func (n *Node) OpenPost(session, stream, request string, flush, detach func()) *PostStream {
	p := &PostStream{unhold: n.HoldStream(session, stream, request)}
	p.Producer = n.Produce(session, stream, request, flush)
	lctx, cancel := context.WithCancelCause(context.Background())
	remove := n.Local.AddConn(session, &Conn{ID: stream, Cancel: cancel})
	stop := context.AfterFunc(lctx, detach)
	p.unlist = func() { stop(); remove(); cancel(nil) }
	return p
}

// WatchResume fails the request with cause once no connection has
// followed the stream for grace, looking every grace until ctx ends: the
// client left and did not resume the stream on any node.
func (p *PostStream) WatchResume(ctx context.Context, grace time.Duration, fail func(error), cause error) {
	p.n.WatchClaim(ctx, FollowKey(p.session, p.stream), grace, failFunc(fail), cause)
}

// failFunc fails a waiter with a function.
type failFunc func(error)

func (f failFunc) Fail(err error) { f(err) }

// Close ends the stream's production. final is the final message when
// recording it failed (nil when it was recorded) and err that failure: a
// final the store refused while unavailable is recorded later (see
// RecordLater), the stream held meanwhile, so its resumers still get it.
func (p *PostStream) Close(final []byte, err error) {
	p.unlist()
	if final != nil && errors.Is(err, cluster.ErrUnavailable) {
		p.n.RecordLater(p.session, p.stream, final, p.unhold, p.n.recordTimeout)
		return
	}
	if err != nil {
		p.n.log.Warn().Err(err).Str("session", telemetry.SessionTag(p.session)).Msg("final response not recorded")
	}
	p.unhold()
}

// RecordFailure is the error of an event that could not be recorded:
// Err is what the client is told (the cluster's -31000, in its terms),
// Cause the store's error.
type RecordFailure struct {
	Err   *jsonrpc.Error
	Cause error
}

func (f *RecordFailure) Error() string { return f.Err.Error() }

// Unwrap returns both: errors.Is finds the JSON-RPC error and the
// store's.
func (f *RecordFailure) Unwrap() []error { return []error{f.Err, f.Cause} }

// recordFailure describes err, a failure to record an event.
func recordFailure(err error) *RecordFailure {
	var msg string
	switch {
	case errors.Is(err, cluster.ErrUnavailable):
		msg = "shared state is unavailable; retry later"
	case errors.Is(err, cluster.ErrDiverged), errors.Is(err, cluster.ErrNotFound):
		msg = "the shared state lost part of this request's stream (a failover, or the session ended); retry the request"
	default:
		msg = "this request's stream could not be recorded; retry the request"
	}
	return &RecordFailure{Err: jsonrpc.NewError(jsonrpc.CodeUnavailable, msg, nil), Cause: err}
}
