package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// sessions implements cluster.SessionStore.
type sessions backend

var _ cluster.SessionStore = (*sessions)(nil)

// reservedField keeps a session's hash in existence when it has no
// fields; Load hides it.
const reservedField = "\x00"

// holderField begins the name of the field that records a holder of the
// session (cluster.Holders; the scripts' holderFns); Load hides them.
const holderField = "\x01"

// hidden reports whether a field of a session's hash is not one of its
// fields.
func hidden(f string) bool { return f == reservedField || strings.HasPrefix(f, holderField) }

// holders returns the holders a script returned as {name, age ms, ...}
// (nil when v is not a list: not known).
func holders(v any) []cluster.Holder {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]cluster.Holder, 0, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		name, _ := l[i].(string)
		age, _ := l[i+1].(int64)
		out = append(out, cluster.Holder{Name: name, Age: time.Duration(age) * time.Millisecond})
	}
	return out
}

func notFound(id string) error {
	return fmt.Errorf("session %q: %w", id, cluster.ErrNotFound)
}

// Create costs one round trip on a single server, the lease included;
// on Cluster two: the cap is checked on the live-sessions index first,
// in one pipeline with the lease, and a refusal of either gives back
// what the other took.
func (m *sessions) Create(ctx context.Context, id string, fields map[string]string, ttl time.Duration, max int, opts cluster.CreateOptions) error {
	b := (*backend)(m)
	if ttl <= 0 {
		return fmt.Errorf("session %q: ttl must be positive", id)
	}
	lease := opts.Lease
	if lease != nil && lease.TTL <= 0 {
		return fmt.Errorf("session %q: lease ttl must be positive", id)
	}
	k := b.keys
	var leaseTTL, leaseMax int64
	if lease != nil {
		leaseTTL, leaseMax = ms(lease.TTL), int64(lease.Max)
	}
	args := make([]any, 0, 6+2*len(fields))
	args = append(args, id, ms(ttl), max, b.token(), leaseTTL, leaseMax)
	for f, v := range fields {
		if !hidden(f) {
			args = append(args, f, v)
		}
	}
	if opts.Holder != "" {
		args = append(args, holderField+opts.Holder, "1")
	}
	var r []int64
	var err error
	if b.single {
		keys := []string{k.fields(id), k.live()}
		if lease != nil {
			keys = append(keys, k.leaseSet(lease.Key))
		}
		r, err = b.runDurable(ctx, createScript, keys, args...).Int64Slice()
	} else {
		r, err = b.admit(ctx, id, ttl, max, lease)
		if err == nil && r[0] == 1 {
			r, err = b.script(ctx, createScript, []string{k.fields(id)}, args...).Int64Slice()
		}
	}
	if err == nil && len(r) != 2 {
		err = fmt.Errorf("%d answers, want 2", len(r))
	}
	// A lease may be left behind by a call that failed on the way, or,
	// on Cluster, by a create refused at the cap after the lease was
	// taken: give it back (best effort: one the store keeps expires with
	// its TTL). An id that exists keeps its lease.
	if lease != nil && (err != nil || (!b.single && r[0] == -2)) {
		_ = b.client.ZRem(context.WithoutCancel(ctx), k.leaseSet(lease.Key), id).Err()
	}
	if err != nil {
		return b.fail(ctx, "create session", err)
	}
	switch r[0] {
	case -1:
		return fmt.Errorf("session %q already exists", id)
	case -2:
		return fmt.Errorf("live sessions at the cap of %d: %w", max, cluster.ErrLimit)
	case -3:
		return &cluster.LeaseRefused{Wait: time.Duration(r[1]) * time.Millisecond}
	}
	return nil
}

// admit takes, on Cluster, id's place among the live sessions
// (capScript) and its lease, in one pipeline, and answers as createScript
// does to a refusal ({-2, 0}, {-3, wait}) or {1, 0} to go on. A place it
// took for a lease refused is given back (a lease taken past the cap is
// given back by Create).
func (b *backend) admit(ctx context.Context, id string, ttl time.Duration, max int, lease *cluster.SessionLease) ([]int64, error) {
	k := b.keys
	var capped, leased *goredis.Cmd
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if lease != nil {
			leased = acquireScript.Eval(ctx, p, []string{k.leaseSet(lease.Key)}, id, ms(lease.TTL), lease.Max)
		}
		capped = capScript.Eval(ctx, p, []string{k.live()}, id, ms(ttl), max)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c, err := capped.Int64()
	if err != nil {
		return nil, err
	}
	if leased != nil {
		l, err := leased.Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(l) == 2 && l[0] == 0 {
			if c == 1 { // taken here, not held before
				// Best effort: the place expires with the session's TTL.
				_ = b.client.ZRem(context.WithoutCancel(ctx), k.live(), id).Err()
			}
			return []int64{-3, l[1]}, nil
		}
	}
	return []int64{min(c, 1), 0}, nil
}

// load runs loadScript; on Cluster it then slides the live-sessions index
// (a second round trip).
func (b *backend) load(ctx context.Context, id string, ttl time.Duration, fields bool, holder string) ([]any, error) {
	k := b.keys
	keys := []string{k.fields(id), k.subs(id)}
	if b.single {
		keys = append(keys, k.live(), k.subIndex())
	}
	var ttlMS int64
	if ttl > 0 {
		ttlMS = ms(ttl)
	}
	want := "0"
	if fields {
		want = "1"
	}
	res, err := b.script(ctx, loadScript, keys, id, ttlMS, want, k.subPrefix(), holder).Slice()
	if errors.Is(err, goredis.Nil) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, b.fail(ctx, "load session", err)
	}
	if !b.single && ttlMS > 0 {
		now, _ := res[0].(int64)
		var uris []any
		if len(res) > 2 {
			uris, _ = res[2].([]any)
		}
		_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			b.slideIndexes(ctx, p, id, now, uris, ttlMS)
			extendScript.Eval(ctx, p, []string{k.live()}, ttlMS)
			return nil
		})
		if err != nil {
			return nil, b.fail(ctx, "slide session", err)
		}
	}
	return res, nil
}

// slideIndexes queues on p, on Cluster, what loadScript does on a single
// server to keys of other slots: the session's entry in the live index
// (whose own TTL the caller extends) and the TTL of the subscriber sets
// of uris.
func (b *backend) slideIndexes(ctx context.Context, p goredis.Pipeliner, id string, now int64, uris []any, ttlMS int64) {
	k := b.keys
	p.ZAddXX(ctx, k.live(), goredis.Z{Score: float64(now + ttlMS), Member: id})
	if len(uris) > 0 {
		h := ttlMS + ttlMS/8 // as hold() in the scripts
		for _, u := range uris {
			if s, ok := u.(string); ok {
				extendScript.Eval(ctx, p, []string{k.subscribers(s)}, h)
			}
		}
		extendScript.Eval(ctx, p, []string{k.subIndex()}, h)
	}
}

// TouchMany slides the sessions with one script call per manyBatch
// sessions on a single server, all in one pipeline; on Cluster it runs
// loadScript per session in one pipeline and the index updates in a
// second.
func (m *sessions) TouchMany(ctx context.Context, ids []string, ttl time.Duration) ([]bool, error) {
	b := (*backend)(m)
	if ttl <= 0 {
		return nil, fmt.Errorf("touch sessions: ttl must be positive")
	}
	k, ttlMS := b.keys, ms(ttl)
	if b.single {
		return b.batched(ctx, "touch sessions", len(ids), func(p goredis.Pipeliner) (cmds []*goredis.Cmd) {
			for batch := range slices.Chunk(ids, manyBatch) {
				keys := make([]string, 2, 2+2*len(batch))
				keys[0], keys[1] = k.live(), k.subIndex()
				args := make([]any, 2, 2+len(batch))
				args[0], args[1] = ttlMS, k.subPrefix()
				for _, id := range batch {
					keys = append(keys, k.fields(id), k.subs(id))
					args = append(args, id)
				}
				cmds = append(cmds, touchManyScript.Eval(ctx, p, keys, args...))
			}
			return cmds
		})
	}
	cmds := make([]*goredis.Cmd, len(ids))
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = loadScript.Eval(ctx, p, []string{k.fields(id), k.subs(id)}, id, ttlMS, "0", k.subPrefix())
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, b.fail(ctx, "touch sessions", err)
	}
	live := make([]bool, len(ids))
	_, err = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, c := range cmds {
			res, err := c.Slice()
			if errors.Is(err, goredis.Nil) {
				continue
			}
			if err != nil {
				return err
			}
			live[i] = true
			now, _ := res[0].(int64)
			var uris []any
			if len(res) > 2 {
				uris, _ = res[2].([]any)
			}
			b.slideIndexes(ctx, p, ids[i], now, uris, ttlMS)
		}
		extendScript.Eval(ctx, p, []string{k.live()}, ttlMS)
		return nil
	})
	if err != nil {
		return nil, b.fail(ctx, "touch sessions", err)
	}
	return live, nil
}

func (m *sessions) Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error) {
	res, err := (*backend)(m).load(ctx, id, ttl, true, holder)
	if err != nil {
		return nil, err
	}
	var flat []any
	if len(res) > 1 {
		flat, _ = res[1].([]any)
	}
	out := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		f, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		if !hidden(f) {
			out[f] = v
		}
	}
	return out, nil
}

func (m *sessions) Touch(ctx context.Context, id string, ttl time.Duration) error {
	_, err := (*backend)(m).load(ctx, id, ttl, false, "")
	return err
}

func (m *sessions) Set(ctx context.Context, id string, fields map[string]string) ([]cluster.Holder, error) {
	b := (*backend)(m)
	args := make([]any, 0, 2*len(fields))
	for f, v := range fields {
		if !hidden(f) {
			args = append(args, f, v)
		}
	}
	r, err := b.script(ctx, setScript, []string{b.keys.fields(id)}, args...).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, b.fail(ctx, "set session", err)
	}
	return holders(r), nil
}

// End costs one round trip on a single server, the lease's release
// included; on Cluster a second, pipelined one cleans the global indexes
// and releases the lease.
func (m *sessions) End(ctx context.Context, id string, opts cluster.EndOptions) (bool, error) {
	b := (*backend)(m)
	k := b.keys
	keys := []string{k.fields(id), k.subs(id), k.lru(id), k.claimIndex(id)}
	if b.single {
		keys = append(keys, k.live())
		if opts.Lease != "" {
			keys = append(keys, k.leaseSet(opts.Lease))
		}
	}
	// A sharded announce is published in the Cluster pipeline below.
	channel, notice := b.inScript(opts.Announce)
	announce := opts.Announce
	if channel != "" {
		announce = nil
	}
	args := make([]any, 0, 9+2*len(opts.Match))
	args = append(args, id, k.session(id), b.followPrefixOf(id), k.subPrefix(), k.ownerPrefix(), b.token(), tombstoneMS, channel, notice)
	for f, v := range opts.Match {
		args = append(args, f, v)
	}
	if opts.Holders != nil {
		*opts.Holders = nil
	}
	res, err := b.script(ctx, endScript, keys, args...).Slice()
	if err != nil {
		return false, b.fail(ctx, "end session", err)
	}
	live, _ := res[0].(int64)
	if live < 0 {
		return false, nil // another's: kept
	}
	if opts.Holders != nil && len(res) > 3 {
		*opts.Holders = holders(res[3])
	}
	if !b.single {
		uris, _ := res[1].([]any)
		streams, _ := res[2].([]any)
		_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.ZRem(ctx, k.live(), id)
			if announce != nil && live == 1 {
				_ = p.Process(ctx, publishCmd(ctx, "spublish", k.busChannel(announce.Topic), announce.Msg))
			}
			if opts.Lease != "" && live == 1 {
				p.ZRem(ctx, k.leaseSet(opts.Lease), id)
			}
			for _, u := range uris {
				p.SRem(ctx, k.subscribers(u.(string)), id)
			}
			for _, x := range streams {
				p.Del(ctx, k.owner(x.(string)))
			}
			return nil
		})
		if err != nil {
			return live == 1, b.fail(ctx, "end session", err)
		}
	}
	return live == 1, nil
}

func (m *sessions) Subscribe(ctx context.Context, id, uri string) error {
	b := (*backend)(m)
	k := b.keys
	keys := []string{k.fields(id), k.subs(id)}
	if b.single {
		keys = append(keys, k.subscribers(uri), k.subIndex())
	}
	r, err := b.script(ctx, subscribeScript, keys, uri, b.opts.MaxSubscriptions, id).Int64()
	if err != nil {
		return b.fail(ctx, "subscribe", err)
	}
	switch r {
	case -1:
		return notFound(id)
	case -2:
		return fmt.Errorf("session %q has %d subscriptions: %w", id, b.opts.MaxSubscriptions, cluster.ErrLimit)
	}
	if !b.single {
		_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.SAdd(ctx, k.subscribers(uri), id)
			p.SAdd(ctx, k.subIndex(), uri)
			extendScript.Eval(ctx, p, []string{k.subscribers(uri)}, r)
			extendScript.Eval(ctx, p, []string{k.subIndex()}, r)
			return nil
		})
		if err != nil {
			return b.fail(ctx, "subscribe", err)
		}
	}
	return nil
}

func (m *sessions) Unsubscribe(ctx context.Context, id, uri string) error {
	b := (*backend)(m)
	k := b.keys
	keys := []string{k.fields(id), k.subs(id)}
	if b.single {
		keys = append(keys, k.subscribers(uri))
	}
	r, err := b.script(ctx, unsubscribeScript, keys, uri, id).Int64()
	if err != nil {
		return b.fail(ctx, "unsubscribe", err)
	}
	if r == -1 {
		return notFound(id)
	}
	if !b.single {
		if err := b.client.SRem(ctx, k.subscribers(uri), id).Err(); err != nil {
			return b.fail(ctx, "unsubscribe", err)
		}
	}
	return nil
}

// Subscribers returns the live subscribers of uri and forgets dead ones.
func (m *sessions) Subscribers(ctx context.Context, uri string) ([]string, error) {
	return (*backend)(m).subscribers(ctx, uri)
}

func (b *backend) subscribers(ctx context.Context, uri string) ([]string, error) {
	k := b.keys
	if b.single {
		ids, err := b.script(ctx, subscribersScript, []string{k.subscribers(uri), k.live()}).StringSlice()
		if err != nil {
			return nil, b.fail(ctx, "subscribers", err)
		}
		return ids, nil
	}
	ids, err := b.client.SMembers(ctx, k.subscribers(uri)).Result()
	if err != nil {
		return nil, b.fail(ctx, "subscribers", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var now *goredis.TimeCmd
	var scores *goredis.FloatSliceCmd
	_, err = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		now = p.Time(ctx)
		scores = p.ZMScore(ctx, k.live(), ids...)
		return nil
	})
	if err != nil {
		return nil, b.fail(ctx, "subscribers", err)
	}
	nowMS := float64(now.Val().UnixMilli())
	var live []string
	var dead []any
	for i, exp := range scores.Val() {
		if exp >= nowMS {
			live = append(live, ids[i])
		} else {
			dead = append(dead, ids[i])
		}
	}
	if len(dead) > 0 {
		if err := b.client.SRem(ctx, k.subscribers(uri), dead...).Err(); err != nil {
			b.log.Warn().Err(err).Str("uri", uri).Msg("pruning dead subscribers failed")
		}
	}
	return live, nil
}

// Scan walks the live-sessions index with ZSCAN, whose guarantee is the
// contract's: a member present for the whole scan is returned.
func (m *sessions) Scan(ctx context.Context, cursor string, count int) ([]string, string, error) {
	b := (*backend)(m)
	if cursor == "" {
		cursor = "0"
	} else if _, err := strconv.ParseUint(cursor, 10, 64); err != nil || cursor == "0" {
		return nil, "", fmt.Errorf("scan cursor %q: malformed", cursor)
	}
	if count <= 0 {
		count = 100
	}
	res, err := b.script(ctx, scanScript, []string{b.keys.live()}, cursor, count).Slice()
	if err != nil {
		return nil, "", b.fail(ctx, "scan sessions", err)
	}
	next, _ := res[0].(string)
	if next == "0" {
		next = ""
	}
	raw, _ := res[1].([]any)
	ids := make([]string, 0, len(raw))
	for _, id := range raw {
		if s, ok := id.(string); ok {
			ids = append(ids, s)
		}
	}
	return ids, next, nil
}

func (m *sessions) Count(ctx context.Context) (int, error) {
	b := (*backend)(m)
	n, err := b.script(ctx, countScript, []string{b.keys.live()}).Int()
	if err != nil {
		return 0, b.fail(ctx, "count sessions", err)
	}
	return n, nil
}

// janitorLoop bounds the global indexes. Sessions that expire (rather
// than End) leave their ids in P:sessions and in the P:sub:<uri> sets;
// Create, Count, Scan and Subscribers prune them on the way, and the
// janitor prunes what nobody reads: once per interval, on whichever node
// takes the P:janitor lock.
func (b *backend) janitorLoop(every time.Duration) {
	b.periodic(every, nil, func(ctx context.Context) {
		if err := b.sweep(ctx, every); err != nil && ctx.Err() == nil {
			b.log.Warn().Err(err).Msg("janitor failed")
		}
	})
}

// sweep prunes the live-sessions and node indexes and every subscriber
// set, if this node wins the interval's lock.
func (b *backend) sweep(ctx context.Context, every time.Duration) error {
	k := b.keys
	won, err := b.client.SetNX(ctx, k.janitor(), "1", every*9/10).Result()
	if err != nil || !won {
		return err
	}
	if err := b.script(ctx, countScript, []string{k.live()}).Err(); err != nil {
		return err
	}
	if err := b.script(ctx, membersScript, []string{k.nodes()}).Err(); err != nil {
		return err
	}
	var cursor uint64
	for {
		uris, next, err := b.client.SScan(ctx, k.subIndex(), cursor, "", 100).Result()
		if err != nil {
			return err
		}
		for _, uri := range uris {
			live, err := b.subscribers(ctx, uri)
			if err != nil {
				return err
			}
			// A Subscribe racing with this may leave its uri out of the
			// registry; its set is still read (and pruned) by Subscribers,
			// and the next Subscribe to the uri registers it again.
			if len(live) == 0 {
				if err := b.client.SRem(ctx, k.subIndex(), uri).Err(); err != nil {
					return err
				}
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
