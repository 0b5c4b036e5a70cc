package coordinator

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// A list_changed notification goes to every session, so it is written
// once, to the deployment's broadcast log (an event stream of its own),
// instead of once per session: the append publishes it to every node,
// and each node writes it to its own live GET streams. A GET stream's
// position is therefore a pair, GetCursor: its own events (requests on
// the GET stream, resources/updated) and the broadcast log's; a stream
// resumed after a cursor replays both sources after it, each exactly
// once and in its order.

// The broadcast log is a stream of a reserved pseudo-session that no
// session id can equal (session ids are never empty and hold no '/'),
// named by an id that GetStreamID and sse.NewStreamID never produce.
const (
	broadcastSession = "/broadcast"
	broadcastStream  = "list-changed"
)

// broadcastTTL is how long the broadcast log lives after its last
// append. Its history is bounded by Limits.MaxEvents like any stream's;
// the TTL only decides when a deployment whose lists never change forgets
// it (a GET stream resumed past a restarted log replays it from the
// start: a redundant list_changed is harmless).
const broadcastTTL = 30 * 24 * time.Hour

// GetCursor is a position in a session's GET stream.
type GetCursor struct {
	Own       uint64 // the last of the stream's own events delivered
	Broadcast uint64 // the last of the broadcast log's events delivered
}

func (n *Node) broadcastLimits() cluster.Limits {
	lim := n.lim
	lim.TTL = broadcastTTL
	return lim
}

// appendBroadcast appends a notification to the broadcast log, creating
// the log when it is missing: one round trip when it exists.
func (n *Node) appendBroadcast(ctx context.Context, data []byte) error {
	lim := n.broadcastLimits()
	_, err := n.be.Events.Append(ctx, broadcastSession, broadcastStream, data, false, lim)
	if !errors.Is(err, cluster.ErrNotFound) {
		return err
	}
	if err := n.openBroadcast(ctx); err != nil {
		return err
	}
	_, err = n.be.Events.Append(ctx, broadcastSession, broadcastStream, data, false, lim)
	return err
}

func (n *Node) openBroadcast(ctx context.Context) error {
	return n.be.Events.Open(ctx, broadcastStream, cluster.StreamMeta{Session: broadcastSession}, n.broadcastLimits())
}

// broadcastFrom returns where a GET stream follows the broadcast log
// from: after when resuming (ErrEvicted when the log's history after it
// is gone; 0 when the log restarted since), its last event otherwise.
func (n *Node) broadcastFrom(ctx context.Context, after uint64, resume bool) (uint64, error) {
	at := ^uint64(0)
	if resume {
		at = after
	}
	_, info, err := n.be.Events.Read(ctx, broadcastSession, broadcastStream, at)
	if errors.Is(err, cluster.ErrNotFound) {
		return 0, n.openBroadcast(ctx)
	}
	switch {
	case err != nil:
		return 0, err
	case !resume:
		return info.Last, nil
	case after > info.Last:
		return 0, nil
	}
	return after, nil
}

// tailGet replays session's GET stream after from and follows it live
// until ctx ends or fn fails: its own events and the broadcast log's,
// each exactly once and in its order, the two interleaved as they come,
// on the caller's goroutine (see cluster.TailMerged). fn gets each event
// with the cursor that includes it, and whether it came from the
// broadcast log. flush, when not nil, is called after each round of
// events (see cluster.TailOptions.Flush).
func (n *Node) tailGet(ctx context.Context, session string, from GetCursor, fn func(ev cluster.Event, cur GetCursor, broadcast bool) error, flush func() error) error {
	srcs, opts, deliver := n.getTail(session, from, fn, flush)
	return cluster.TailMerged(ctx, n.be.Events, srcs, opts, deliver)
}

// tailGetFunc is TailGet without a goroutine waiting for events (see
// cluster.TailMergedFunc): it returns once the history is delivered, and
// end gets what TailGet would have returned.
func (n *Node) tailGetFunc(ctx context.Context, session string, from GetCursor, fn func(ev cluster.Event, cur GetCursor, broadcast bool) error, flush func() error, end func(error)) {
	srcs, opts, deliver := n.getTail(session, from, fn, flush)
	cluster.TailMergedFunc(ctx, n.be.Events, srcs, opts, deliver, end)
}

// getTail is the sources, options and delivery of TailGet.
func (n *Node) getTail(session string, from GetCursor, fn func(ev cluster.Event, cur GetCursor, broadcast bool) error, flush func() error) ([]cluster.TailSource, cluster.TailOptions, func(int, cluster.Event) error) {
	cur := from
	srcs := []cluster.TailSource{
		{Session: session, Stream: GetStreamID(session), After: from.Own},
		// Where Follow loses no event without a re-read hint, the
		// broadcast log, followed by every GET stream, is not polled
		// by each (an idle stream's cost stays one poll).
		{Session: broadcastSession, Stream: broadcastStream, After: from.Broadcast,
			NoPoll: n.be.FollowPoll >= cluster.LosslessFollowPoll},
	}
	return srcs, cluster.TailOptions{Poll: n.be.FollowPoll, Flush: flush}, func(i int, ev cluster.Event) error {
		next := cur
		if i == 1 {
			next.Broadcast = ev.Seq
		} else {
			next.Own = ev.Seq
		}
		if err := fn(ev, next, i == 1); err != nil {
			return err
		}
		cur = next
		return nil
	}
}

// GetEventStream is the stream part of the ids of a GET stream's events
// at broadcast position b: the stream id, '-', b.
func GetEventStream(session string, b uint64) string {
	return GetStreamID(session) + "-" + strconv.FormatUint(b, 10)
}

// ParseGetEventStream reports whether s (the stream part of an event id)
// names session's GET stream, and the broadcast position it carries
// (hasB false for an id without one, written before the broadcast log).
func ParseGetEventStream(session, s string) (b uint64, hasB, ok bool) {
	rest, ok := strings.CutPrefix(s, GetStreamID(session))
	if !ok {
		return 0, false, false
	}
	if rest == "" {
		return 0, false, true
	}
	digits, ok := strings.CutPrefix(rest, "-")
	if !ok || digits == "" || (digits[0] == '0' && len(digits) > 1) {
		return 0, false, false
	}
	b, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false, false
	}
	return b, true, true
}
