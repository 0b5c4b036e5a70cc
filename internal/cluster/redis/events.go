package redis

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// events implements cluster.EventLog. Every call is one round trip
// (Open, and AppendBatch that opens, on Cluster: two; an append on
// Cluster: two once per eighth of the stream's TTL, to slide its owner
// key), and an append publishes its events to followers in the same
// script, once a Read marked the stream followed (see readScript).
type events backend

var _ cluster.EventLog = (*events)(nil)

func (m *events) Open(ctx context.Context, x string, meta cluster.StreamMeta, lim cluster.Limits) error {
	b := (*backend)(m)
	lim = lim.WithDefaults()
	k := b.keys
	sess := meta.Session
	keys := []string{k.meta(sess, x), k.lru(sess)}
	if b.single {
		keys = append(keys, k.owner(x))
	} else {
		ok, err := b.script(ctx, ownerScript, []string{k.owner(x)}, sess, ms(ownerTTL(lim.TTL))).Int64()
		if err != nil {
			return b.fail(ctx, "open stream", err)
		}
		if ok == 0 {
			return fmt.Errorf("stream %q: %w", x, cluster.ErrForbidden)
		}
	}
	r, err := b.script(ctx, openScript, keys, sess, x, meta.Owner, meta.Request,
		ms(lim.TTL), lim.MaxStreams, k.session(sess), b.followPrefixOf(sess)).Int64()
	if err != nil {
		return b.fail(ctx, "open stream", err)
	}
	if r == -1 {
		return fmt.Errorf("stream %q: %w", x, cluster.ErrForbidden)
	}
	return nil
}

// ownerTTL is the TTL of a stream's owner key on Cluster, where Append
// slides it only every eighth of the stream's TTL (with a separate
// command): long enough that it outlives the stream's history.
func ownerTTL(ttl time.Duration) time.Duration { return ttl + ttl/4 }

// missing tells ErrForbidden (the stream is another session's) from
// ErrNotFound, at the cost of one more round trip on the error path.
func (b *backend) missing(ctx context.Context, session, x string) error {
	owner, err := b.client.Get(ctx, b.keys.owner(x)).Result()
	if err == nil && owner != session {
		return fmt.Errorf("stream %q: %w", x, cluster.ErrForbidden)
	}
	return fmt.Errorf("stream %q: %w", x, cluster.ErrNotFound)
}

func (m *events) Append(ctx context.Context, session, x string, data []byte, final bool, lim cluster.Limits) (uint64, error) {
	return m.AppendBatch(ctx, session, x, [][]byte{data}, final, cluster.Batch{}, lim)
}

func (m *events) AppendBatch(ctx context.Context, session, x string, data [][]byte, final bool, bt cluster.Batch, lim cluster.Limits) (uint64, error) {
	b := (*backend)(m)
	if len(data) == 0 {
		return 0, fmt.Errorf("stream %q: an empty batch", x)
	}
	lim = lim.WithDefaults()
	k := b.keys
	keys := []string{k.meta(session, x), k.events(session, x), k.lru(session)}
	if b.single {
		keys = append(keys, k.owner(x))
	}
	token := bt.Token
	if token == "" {
		token = b.token()
	}
	args := make([]any, 0, 13+len(data))
	args = append(args, session, x, flag(final), lim.MaxEvents, lim.MaxStreams, ms(lim.TTL),
		k.session(session), b.followPrefixOf(session), token)
	if open := bt.Open; open != nil {
		if !b.single {
			ok, err := b.script(ctx, ownerScript, []string{k.owner(x)}, session, ms(ownerTTL(lim.TTL))).Int64()
			if err != nil {
				return 0, b.fail(ctx, "open stream", err)
			}
			if ok == 0 {
				return 0, fmt.Errorf("stream %q: %w", x, cluster.ErrForbidden)
			}
		}
		args = append(args, "1", open.Owner, open.Request)
	} else {
		args = append(args, "0", "", "")
	}
	args = append(args, strconv.FormatUint(bt.Next, 10))
	for _, d := range data {
		args = append(args, d)
	}
	r, err := b.runAppend(ctx, bt, appendBatchScript, keys, args...).Int64Slice()
	if err == nil && len(r) != 2 {
		err = fmt.Errorf("append answered %v", r)
	}
	if err != nil {
		return 0, b.fail(ctx, "append", err)
	}
	seq := r[0]
	if r[1] == 1 {
		// Cluster: the owner key is in another slot than the stream.
		if err := b.script(ctx, ownerScript, []string{k.owner(x)}, session, ms(ownerTTL(lim.TTL))).Err(); err != nil {
			b.log.Debug().Err(err).Str("stream", x).Msg("owner of a stream not slid")
		}
	}
	switch seq {
	case -1:
		if b.single { // the script read the owner key
			return 0, fmt.Errorf("stream %q: %w", x, cluster.ErrNotFound)
		}
		return 0, b.missing(ctx, session, x)
	case -2:
		return 0, fmt.Errorf("stream %q: %w", x, errDone)
	case -3:
		return 0, fmt.Errorf("stream %q: %w", x, cluster.ErrForbidden)
	case -4:
		return 0, fmt.Errorf("stream %q: the batch was to start at %d: %w", x, bt.Next, cluster.ErrDiverged)
	}
	return uint64(seq), nil
}

// flag is a boolean argument of a script.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (m *events) Read(ctx context.Context, session, x string, after uint64) ([]cluster.Event, cluster.StreamInfo, error) {
	b := (*backend)(m)
	k := b.keys
	res, err := b.script(ctx, readScript, []string{k.meta(session, x), k.events(session, x)},
		strconv.FormatUint(after, 10)).Result()
	if err != nil {
		return nil, cluster.StreamInfo{}, b.fail(ctx, "read", err)
	}
	row, ok := res.([]any)
	if !ok || len(row) != 6 {
		return nil, cluster.StreamInfo{}, b.missing(ctx, session, x)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	last, _ := row[2].(int64)
	first, _ := row[4].(int64)
	info := cluster.StreamInfo{
		StreamMeta: cluster.StreamMeta{Session: session, Owner: str(row[0]), Request: str(row[1])},
		Last:       uint64(last),
		Done:       str(row[3]) == "1",
	}
	if after >= info.Last {
		return nil, info, nil
	}
	if after+1 < uint64(first) {
		return nil, info, fmt.Errorf("stream %q: events %d..%d trimmed: %w", x, after+1, first-1, cluster.ErrEvicted)
	}
	raw, _ := row[5].([]any)
	evs := make([]cluster.Event, len(raw))
	for i, d := range raw {
		seq := after + 1 + uint64(i)
		s := str(d)
		evs[i] = cluster.Event{Seq: seq, Final: info.Done && seq == info.Last}
		if s != "" {
			evs[i].Data = []byte(s)
		}
	}
	return evs, info, nil
}

// SlideMany runs one script per manyBatch streams on a single server,
// all sent in one pipeline; on Cluster, one per stream (its meta and
// events share the session's slot), with a PEXPIRE of its owner key,
// which lives in a slot of its own.
func (m *events) SlideMany(ctx context.Context, streams []cluster.StreamRef, ttl time.Duration) error {
	b := (*backend)(m)
	if ttl <= 0 {
		return fmt.Errorf("slide streams: ttl must be positive")
	}
	if len(streams) == 0 {
		return nil
	}
	size, step := manyBatch, "3"
	if !b.single {
		size, step = 1, "2"
	}
	k := b.keys
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for batch := range slices.Chunk(streams, size) {
			keys := make([]string, 0, 3*len(batch))
			for _, s := range batch {
				keys = append(keys, k.meta(s.Session, s.Stream), k.events(s.Session, s.Stream))
				if b.single {
					keys = append(keys, k.owner(s.Stream))
				} else {
					p.PExpire(ctx, k.owner(s.Stream), ownerTTL(ttl))
				}
			}
			slideStreamsScript.Eval(ctx, p, keys, ms(ttl), ms(ownerTTL(ttl)), step)
		}
		return nil
	})
	if err != nil {
		return b.fail(ctx, "slide streams", err)
	}
	return nil
}

// Follow subscribes to the stream's channel on the backend's classic
// pub/sub connection and, when the backend reads sharded channels, to
// its sharded channel (P:{S}:f:<stream>, in the session's slot) on the
// connection to the shard owning that slot, and returns once the
// subscriptions are active. fn runs on a connection's receive
// goroutine. It gets an Event with Seq 0 when the stream was removed
// and after a connection was re-established (events in between may be
// lost): re-read then (cluster.Tail does). Follow does not check that
// the stream exists: authorize with Read.
func (m *events) Follow(ctx context.Context, session, x string, fn func(cluster.Event)) (func(), error) {
	b := (*backend)(m)
	deliver := func(payload string) {
		ev, ok := parseFollow(payload)
		if !ok {
			b.log.Warn().Str("stream", x).Msg("malformed follow message dropped")
			return
		}
		fn(ev)
	}
	sharded := b.keys.session(session) + "f:" + x
	cancel, err := b.subscribe(ctx, b.keys.followChannel(x), sharded, deliver, func() { fn(cluster.Event{}) })
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, cancel)
	return func() { stop(); cancel() }, nil
}

// parseFollow decodes "<seq>:<final>:<data>"; "0" is a re-read hint.
func parseFollow(p string) (cluster.Event, bool) {
	if p == "0" {
		return cluster.Event{}, true
	}
	raw := []byte(p)
	i := bytes.IndexByte(raw, ':')
	if i < 0 || len(raw) < i+3 || raw[i+2] != ':' {
		return cluster.Event{}, false
	}
	seq, err := strconv.ParseUint(p[:i], 10, 64)
	if err != nil || seq == 0 {
		return cluster.Event{}, false
	}
	ev := cluster.Event{Seq: seq, Final: raw[i+1] == '1'}
	if data := raw[i+3:]; len(data) > 0 {
		ev.Data = data
	}
	return ev, true
}
