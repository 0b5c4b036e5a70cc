package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// A live stream (a session's GET stream, or a POST stream resumed on
// this node) is served by the node, from its set-up to its end
// (serve.go), onto a Sink that the transport provides: the node takes
// the claims, follows the stream's history and keeps the stream's
// chores, and the Sink only writes.

// Sink is what a live stream writes to: its events, queued and then
// flushed in rounds, the retry hint, and its end. The node calls Open
// first and End last, each once, and the others in between, one call at
// a time.
type Sink interface {
	// Open starts the stream, of kind. stop ends it with a cause: the
	// sink calls it, from any goroutine, when it can write no more (a
	// write failed or stalled) or its client left.
	Open(kind StreamKind, stop func(cause error))
	// Queue queues the event seq of stream (the two parts of its id),
	// with data, for the next Flush.
	Queue(stream string, seq uint64, data []byte) error
	// Flush writes the events queued.
	Flush() error
	// Retry sends the retry hint: alone when stream is "", else as an
	// event without data whose id is (stream, seq), a cursor the client
	// can resume from (a priming event).
	Retry(stream string, seq uint64) error
	// End ends the stream: nothing is written to it afterwards.
	End()
}

// A Detacher is a Sink that can go on after the call serving it has
// returned. The node then follows the stream with no goroutine waiting
// for its events (cluster.TailMergedFunc: an idle stream costs the node
// no goroutine), and ends it (End) from the goroutine that delivers its
// last events.
type Detacher interface {
	Sink
	// Detach reports whether the sink goes on once the call serving it
	// returns; from then on the sink itself watches for its client
	// leaving (and calls Open's stop then).
	Detach() bool
}

// StreamKind tells a Sink what it carries.
type StreamKind string

const (
	// KindGet is a session's GET stream, new or resumed; ServeGet and
	// Resume offer it to be detached (see Detacher).
	KindGet StreamKind = "get"
	// KindResumed is a POST stream resumed after Last-Event-ID.
	KindResumed StreamKind = "resume"
)

// StreamOpen is the caller's side of a stream to serve.
type StreamOpen struct {
	// Session is the stream's session, whose caller asks for it.
	Session string
	// Prime starts a GET stream with a priming event that carries its
	// cursor (Sink.Retry with an id); without, with the retry hint
	// alone.
	Prime bool
	// Lifetime bounds a GET stream's life (0: unbounded); a stream that
	// reaches it ends with the retry hint, so its client resumes it.
	Lifetime time.Duration
	// Admit takes the caller's place for one more stream, or returns why
	// not (returned as is); release gives the place back at the stream's
	// end. A resumed stream takes it beside the first read of its
	// history when the store's calls are round trips. Nil admits every
	// stream.
	Admit func() (release func(), err error)
}

// admit runs o.Admit, if any.
func (o *StreamOpen) admit() (func(), error) {
	if o.Admit == nil {
		return func() {}, nil
	}
	return o.Admit()
}

// Errors of ServeGet and Resume about the stream asked for; the others
// are the store's, StreamOpen.Admit's, ErrBusDown and
// jsonrpc.ErrDraining.
var (
	// ErrNoStream: the stream is not one of the session's, or has no
	// event at the cursor (the same error for both, so that streams of
	// other sessions cannot be probed).
	ErrNoStream = errors.New("coordinator: no such stream in the session")
	// ErrHistoryGone: the stream's history after the cursor is no
	// longer kept.
	ErrHistoryGone = errors.New("coordinator: the stream's history after the cursor is no longer kept")
)

// errLifetime ends a GET stream open for StreamOpen.Lifetime.
var errLifetime = errors.New("coordinator: the stream was open for its lifetime")

// streamErr returns the error of ServeGet or Resume for err, a store
// error of the stream's set-up.
func streamErr(err error) error {
	switch {
	case errors.Is(err, cluster.ErrNotFound), errors.Is(err, cluster.ErrForbidden):
		return fmt.Errorf("%w: %w", ErrNoStream, err)
	case errors.Is(err, cluster.ErrEvicted):
		return fmt.Errorf("%w: %w", ErrHistoryGone, err)
	}
	return err
}

// Refusal returns why the node takes no request that needs the bus, nil
// when it does: the bus is down (replies, cancellations, take-overs and
// session ends between nodes would be lost; ErrBusDown), or the node
// drains (jsonrpc.ErrDraining).
// When both hold, the error matches both (the drain first).
func (n *Node) Refusal() error {
	switch down, draining := !n.BusReady(), n.Draining(); {
	case down && draining:
		return errors.Join(jsonrpc.ErrDraining, ErrBusDown)
	case down:
		return ErrBusDown
	case draining:
		return jsonrpc.ErrDraining
	}
	return nil
}

// liveConn lists a connection of session on this node (holding its GET
// stream when getFor names it), which session-wide events (end,
// take-over, drain) cancel. Its context ends with ctx's until unlink is
// called (a detached stream outlives the call serving it); remove
// takes it off the list.
func (n *Node) liveConn(ctx context.Context, session, getFor string) (lctx context.Context, c *Conn, unlink func() bool, remove func()) {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unlink = context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	c = &Conn{ID: n.newConnID(), Cancel: cancel, GetFor: getFor}
	return lctx, c, unlink, n.Local.AddConn(session, c)
}

// endStream ends a stream's delivery, which ended with err: a stream
// ended by a drain, or at its lifetime, first tells the client when to
// come back.
func (n *Node) endStream(sink Sink, ctx context.Context, err error) {
	if cause := context.Cause(ctx); errors.Is(cause, ErrDrain) || errors.Is(cause, jsonrpc.ErrDraining) || errors.Is(cause, errLifetime) {
		_ = sink.Retry("", 0)
	}
	if err != nil && ctx.Err() == nil {
		n.log.Debug().Err(err).Msg("stream ended")
	}
}
