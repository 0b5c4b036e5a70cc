package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Flow 2 (docs/ARCHITECTURE.md, "The flows and their files"): a call's response upgrades to a stream, and each
// of its events is appended to the stream's shared history before it is
// written, under an id unique in the cluster, so the client can resume
// it on any node (resume.go); the appends are group commits, the
// stream's open folded into the first (produce.go). The producer holds
// the stream while it runs (nodeloss.go), and a final response the
// store refused is recorded once it answers again (RecordLater).

// openStream opens the history of stream, a response stream of request
// (its id key) of session produced by this process, and holds it until
// the returned function is called (see HoldStream).
func (n *Node) openStream(ctx context.Context, session, stream, request string) (unhold func(), err error) {
	meta := cluster.StreamMeta{Session: session, Owner: n.instance, Request: request}
	if err := n.be.Events.Open(ctx, stream, meta, n.lim); err != nil {
		return nil, err
	}
	return n.HoldStream(session, stream, request), nil
}

// Record appends an event (data nil for a priming event) to the history
// of stream and returns its sequence number; final ends the stream.
func (n *Node) Record(ctx context.Context, session, stream string, data []byte, final bool) (uint64, error) {
	seq, err := n.be.Events.Append(ctx, session, stream, data, final, n.lim)
	if err == nil && final {
		n.producing.ended(stream)
	}
	return seq, err
}

// RecordLater appends a final message the store refused, retrying with
// backoff for up to timeout (and while the node runs); unhold is called
// at the end, so the stream ends with AbandonedError if the final never
// made it. A
// store that answers with anything but ErrUnavailable (the stream ended,
// expired or its session is gone) ends the attempts. A drain waits for
// it like for a running request; the session's end stops it.
func (n *Node) RecordLater(session, stream string, data []byte, unhold func(), timeout time.Duration) {
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	removeInflight := n.Local.AddInflight(session, "record:"+stream, cancel)
	n.Go(func(context.Context) {
		defer unhold()
		defer removeInflight()
		defer cancel()
		wait := 50 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				n.log.Warn().Str("session", telemetry.SessionTag(session)).Str("stream", stream).Msg("final response not recorded: gave up; resumers get an error")
				return
			case <-time.After(wait):
			}
			_, err := n.Record(ctx, session, stream, data, true)
			if err == nil {
				n.log.Info().Str("session", telemetry.SessionTag(session)).Str("stream", stream).Msg("final response recorded after a store outage")
				return
			}
			if !errors.Is(err, cluster.ErrUnavailable) {
				if ctx.Err() == nil {
					n.log.Warn().Err(err).Str("stream", stream).Msg("final response not recorded")
				}
				return
			}
			wait = min(2*wait, time.Second)
		}
	})
}
