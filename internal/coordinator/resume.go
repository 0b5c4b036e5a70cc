package coordinator

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Flow 4 (docs/ARCHITECTURE.md, "The flows and their files"): the client's connection to B drops; it GETs with
// Last-Event-ID and lands on C. C checks the stream belongs to the
// session (the event log refuses another session's stream), replays the
// missed events from history, and follows the stream live while B keeps
// producing, until the final response ends it (or B is lost: see
// nodeloss.go). A session's GET stream is resumed the same way, and held
// by one connection at a time (getstream.go).

// FollowKey names the claim of a connection following a stream.
func FollowKey(session, stream string) string {
	return "session:" + session + ":follow:" + stream
}

// OpenGet opens (if need be) the GET stream of session and returns the
// cursor to follow it from: after when resuming (ErrEvicted when the
// history after it is gone, ErrNotFound past the stream's end), its last
// events otherwise; the broadcast position likewise when resumeBroadcast
// (see broadcastFrom), the log's last event otherwise. It also returns
// the stream's last own event.
func (n *Node) OpenGet(ctx context.Context, session string, after GetCursor, resume, resumeBroadcast bool) (from GetCursor, last uint64, err error) {
	stream := GetStreamID(session)
	if err := n.be.Events.Open(ctx, stream, cluster.StreamMeta{Session: session}, n.lim); err != nil {
		return GetCursor{}, 0, err
	}
	at := ^uint64(0)
	if resume {
		at = after.Own // a history trimmed past the cursor answers ErrEvicted
	}
	_, info, err := n.be.Events.Read(ctx, session, stream, at)
	if err != nil {
		return GetCursor{}, 0, err
	}
	switch {
	case !resume:
		after.Own = info.Last
	case after.Own > info.Last:
		return GetCursor{}, 0, cluster.ErrNotFound
	}
	if after.Broadcast, err = n.broadcastFrom(ctx, after.Broadcast, resume && resumeBroadcast); err != nil {
		return GetCursor{}, 0, err
	}
	return after, info.Last, nil
}

// takeGet makes conn the holder of session's GET stream and tells the
// other nodes, so a connection holding it elsewhere ends. The returned
// function gives the stream up when conn closes (unless it was taken
// over): it releases the claim and fails the requests sent on it.
func (n *Node) takeGet(ctx context.Context, session string, conn *Conn) (func(), error) {
	key := GetKey(session)
	if _, err := n.be.Claims.Claim(ctx, key, conn.ID, n.claimTTL()); err != nil {
		return nil, err
	}
	// From here a take-over ends conn if the claim is another's (see
	// takeover). A take-over handled between the Claim and this line
	// misses it; the upkeep's renewal of the claim ends it then.
	conn.claimed.Store(true)
	if err := n.Publish(ctx, GetTakeover{Session: session, Conn: conn.ID}); err != nil {
		n.log.Warn().Err(err).Msg("take-over not broadcast")
	}
	return func() {
		if context.Cause(ctx) == ErrTakenOver {
			return
		}
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		n.release(bg, key, conn.ID)
		_ = n.Publish(bg, GetDropped{Session: session})
	}, nil
}

// readResume checks that stream is session's and that its history after
// seq is kept, and returns that history, to pass to Tail: ErrNotFound
// or ErrForbidden when it is not session's (callers answer both alike,
// so streams of other sessions cannot be probed), ErrEvicted when the
// history is gone.
func (n *Node) readResume(ctx context.Context, session, stream string, seq uint64) (cluster.History, error) {
	evs, info, err := n.be.Events.Read(ctx, session, stream, seq)
	if err != nil {
		return cluster.History{}, err
	}
	if seq > info.Last {
		return cluster.History{}, cluster.ErrNotFound
	}
	return cluster.History{Events: evs, Info: info}, nil
}

// Follow claims that conn follows stream (a POST stream's producer
// keeps its request running while some connection follows it); the
// returned function releases the claim.
func (n *Node) Follow(ctx context.Context, session, stream string, conn *Conn) (func(), error) {
	key := FollowKey(session, stream)
	if _, err := n.be.Claims.Claim(ctx, key, conn.ID, n.claimTTL()); err != nil {
		return nil, err
	}
	return func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		n.release(bg, key, conn.ID)
	}, nil
}

// Tail replays stream after seq and follows it live, calling fn for each
// event, until its final event, ctx ends or fn fails (see cluster.Tail).
// head is the history after seq that OpenGet or readResume returned: it
// is replayed before the stream is followed. flush, when not nil, is
// called after each round of events (see cluster.TailOptions.Flush). It
// returns the stream's info as last read (see cluster.TailWith).
func (n *Node) Tail(ctx context.Context, session, stream string, after uint64, head cluster.History, fn func(cluster.Event) error, flush func() error) (cluster.StreamInfo, error) {
	return cluster.TailWith(ctx, n.be.Events, session, stream, after, cluster.TailOptions{Poll: n.be.FollowPoll, Head: &head, Flush: flush}, fn)
}
