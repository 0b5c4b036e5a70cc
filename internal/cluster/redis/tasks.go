package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// tasks implements cluster.TaskStore. A task is one hash, P:t:{id}, with
// PEXPIRE = the task's TTL from its creation (never slid), so an expired
// task leaves nothing behind; the per-owner bound counts the members of
// P:towner:<owner key>, a zset of task id → expiry (ms) pruned on every
// create, with a TTL at least as long as its newest entry.
//
// Hash fields: the scalar fields below, plus "i:<key>" (pending input
// request), "r:<key>" (response not consumed yet) and "u:<key>" (the key
// was used once: keys are unique over the task's lifetime), and "tok"
// (the token of the last change, so a retried change answers as the
// first run did).
//
// Create costs one round trip on a single server (three on Cluster,
// where the owner index and the run index live in other slots) and
// answers with the record; Get and Update one.
type tasks backend

var _ cluster.TaskStore = (*tasks)(nil)

func (k keys) task(id string) string       { return k.prefix + ":t:{" + tag(id) + "}" }
func (k keys) taskOwner(key string) string { return k.prefix + ":towner:" + key }

// KEYS: task [, owner index, runners, run index [, claim]]. ARGV: id,
// ttl ms, max, token, claim owner, claim ttl ms, field, value, ...
// Returns the record's fields and values (as HGETALL does), -1 when the
// task exists, -2 past the owner's cap. The claim (claimScript's, of a
// key without a session claim index) is taken before the record is
// written.
var taskCreateScript = script(indexRun + `
local ttl, max = tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'tok') == ARGV[4] then return redis.call('HGETALL', KEYS[1]) end
  return -1
end
local now = now_ms()
if KEYS[2] then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
  if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
    if max > 0 and redis.call('ZCARD', KEYS[2]) >= max then return -2 end
    redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  end
  extend(KEYS[2], ttl)
end
if KEYS[5] then redis.call('SET', KEYS[5], ARGV[5], 'PX', ARGV[6]) end
redis.call('HSET', KEYS[1], 'tok', ARGV[4], 'created', now, 'updated', now)
for i = 7, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if string.sub(ARGV[i], 1, 2) == 'i:' then
    redis.call('HSET', KEYS[1], 'u:' .. string.sub(ARGV[i], 3), '1')
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
if KEYS[3] then
  index_run(KEYS[3], KEYS[4], redis.call('HGET', KEYS[1], 'runner'), ARGV[1], now + ttl)
end
return redis.call('HGETALL', KEYS[1])
`)

// KEYS: task [, claim]. ARGV: token, if runner, status, message, result,
// error, set runner (0/1), runner, next attempt (0/1), clear inputs
// (0/1), then n adds, n pairs, n responds, n pairs, n consumes, n keys,
// then (optional) the claim's owner, a channel and a message, and
// (optional) the claim's ttl ms and the holder it may replace. Returns
// the hash as a flat list, or -1 (not found), -2 (terminal), -3
// (runner, or the claim to take held by another), -4 (key used). With a
// ttl the claim (of a key without a session claim index) is taken with
// the update, which applies only while nobody holds it, or its owner or
// the holder it may replace does (cluster.TaskUpdate.Take); without one
// it is released once the update applied, when the owner holds it
// (releaseScript). The message is published on the channel when one is
// given; a retry that finds its change applied does none of it again.
var taskUpdateScript = script(`
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 then return -1 end
if redis.call('HGET', k, 'tok') == ARGV[1] then return redis.call('HGETALL', k) end
local status = redis.call('HGET', k, 'status')
local function terminal(s) return s == 'completed' or s == 'failed' or s == 'cancelled' end
local final = terminal(status)
if ARGV[2] ~= '' and redis.call('HGET', k, 'runner') ~= ARGV[2] then return -3 end
local to = ARGV[3]
if to ~= '' and final then return -2 end
local i = 11
local nadd = tonumber(ARGV[i]); i = i + 1
local adds = {}
for j = 1, nadd do adds[j] = {ARGV[i], ARGV[i + 1]}; i = i + 2 end
local nresp = tonumber(ARGV[i]); i = i + 1
local resps = {}
for j = 1, nresp do resps[j] = {ARGV[i], ARGV[i + 1]}; i = i + 2 end
local ncons = tonumber(ARGV[i]); i = i + 1
local cons = {}
for j = 1, ncons do cons[j] = ARGV[i]; i = i + 1 end
local take = KEYS[2] and (ARGV[i + 3] or '') ~= ''
if take then
  local h = redis.call('GET', KEYS[2])
  if h and h ~= ARGV[i] and h ~= ARGV[i + 4] then return -3 end
end
if nadd > 0 then
  if final then return -2 end
  for _, a in ipairs(adds) do
    if redis.call('HEXISTS', k, 'u:' .. a[1]) == 1 then return -4 end
  end
end
if (ARGV[7] == '1' or ARGV[9] == '1' or ARGV[10] == '1') and final then return -2 end
if ARGV[10] == '1' then
  for _, f in ipairs(redis.call('HKEYS', k)) do
    local p = string.sub(f, 1, 2)
    if p == 'i:' or p == 'r:' then redis.call('HDEL', k, f) end
  end
end
if ARGV[7] == '1' then redis.call('HSET', k, 'runner', ARGV[8]) end
if ARGV[9] == '1' then redis.call('HINCRBY', k, 'attempt', 1) end
for _, a in ipairs(adds) do
  redis.call('HSET', k, 'i:' .. a[1], a[2], 'u:' .. a[1], '1')
end
if not final then
  for _, r in ipairs(resps) do
    if redis.call('HEXISTS', k, 'i:' .. r[1]) == 1 then
      redis.call('HDEL', k, 'i:' .. r[1])
      redis.call('HSET', k, 'r:' .. r[1], r[2])
    end
  end
end
for _, c in ipairs(cons) do redis.call('HDEL', k, 'r:' .. c) end
local function pending()
  for _, f in ipairs(redis.call('HKEYS', k)) do
    if string.sub(f, 1, 2) == 'i:' then return true end
  end
  return false
end
if to ~= '' then
  redis.call('HSET', k, 'status', to, 'msg', ARGV[4])
  if to == 'completed' then redis.call('HSET', k, 'result', ARGV[5]) end
  if to == 'failed' then
    redis.call('HSET', k, 'error', ARGV[6])
    if ARGV[5] ~= '' then redis.call('HSET', k, 'result', ARGV[5]) end
  end
  if terminal(to) then
    for _, f in ipairs(redis.call('HKEYS', k)) do
      local p = string.sub(f, 1, 2)
      if p == 'i:' or p == 'r:' then redis.call('HDEL', k, f) end
    end
  end
  status = to
end
if not terminal(status) then
  if nadd > 0 then
    redis.call('HSET', k, 'status', 'input_required')
  elseif to == '' and status == 'input_required' and not pending() then
    redis.call('HSET', k, 'status', 'working')
  end
end
redis.call('HSET', k, 'tok', ARGV[1], 'updated', now_ms())
if take then
  redis.call('SET', KEYS[2], ARGV[i], 'PX', ARGV[i + 3])
elseif KEYS[2] and redis.call('GET', KEYS[2]) == ARGV[i] then
  redis.call('DEL', KEYS[2])
end
if ARGV[i + 1] and ARGV[i + 1] ~= '' then redis.call('PUBLISH', ARGV[i + 1], ARGV[i + 2]) end
return redis.call('HGETALL', k)
`)

func (m *tasks) Create(ctx context.Context, t cluster.Task, max int, claim *cluster.TaskClaim) (cluster.Task, error) {
	b := (*backend)(m)
	if t.TTL <= 0 {
		return cluster.Task{}, fmt.Errorf("task %q: ttl must be positive", t.ID)
	}
	if claim != nil && claim.TTL <= 0 {
		return cluster.Task{}, fmt.Errorf("claim %q: ttl must be positive", claim.Key)
	}
	if t.Status != cluster.TaskWorking && t.Status != cluster.TaskInputRequired {
		return cluster.Task{}, fmt.Errorf("task %q: created with status %q", t.ID, t.Status)
	}
	k := b.keys
	ttl := ms(t.TTL)
	// The claim goes in the script where its key may: on a single
	// server, unless it has a session claim index; else it is taken
	// first, on its own.
	claimKey, claimOwner, claimTTL := b.foldClaim(claim)
	if claim != nil && claimKey == "" {
		if _, err := (*claims)(b).Claim(ctx, claim.Key, claim.Owner, claim.TTL); err != nil {
			return cluster.Task{}, err
		}
	}
	args := []any{t.ID, ttl, max, b.token(), claimOwner, claimTTL,
		"status", t.Status, "msg", t.Message, "ttl", ttl, "poll", t.PollInterval.Milliseconds(),
		"owner", t.Owner, "okey", t.OwnerKey, "method", t.Method, "params", t.Params, "meta", t.Meta,
		"runner", t.Runner, "attempt", t.Attempt, "idem", boolField(t.Idempotent)}
	for key, v := range t.Inputs {
		args = append(args, "i:"+key, v)
	}
	var res any
	var err error
	if b.single {
		keys := []string{k.task(t.ID), k.taskOwner(t.OwnerKey), k.taskRunners(), k.taskRunner(t.Runner)}
		if claimKey != "" {
			keys = append(keys, claimKey)
		}
		res, err = b.runDurable(ctx, taskCreateScript, keys, args...).Result()
	} else {
		var r int64
		r, err = b.script(ctx, capScript, []string{k.taskOwner(t.OwnerKey)}, t.ID, ttl, max).Int64()
		res = r
		if err == nil && r > 0 {
			// Indexed first: a created task is always in its runner's index.
			err = m.index(ctx, t.Runner, t.ID, time.Now().Add(t.TTL))
		}
		if err == nil && r > 0 {
			res, err = b.script(ctx, taskCreateScript, []string{k.task(t.ID)}, args...).Result()
		}
	}
	if err != nil {
		return cluster.Task{}, b.fail(ctx, "create task", err)
	}
	if r, refused := res.(int64); refused && claim != nil && claimKey == "" {
		// Taken on its own before the refusal: let go of it.
		if err := (*claims)(b).Release(ctx, claim.Key, claim.Owner); err != nil {
			b.log.Debug().Err(err).Int64("answer", r).Str("task", t.ID).Msg("claim of a refused task not released")
		}
	}
	switch res {
	case int64(-1):
		return cluster.Task{}, fmt.Errorf("task %q already exists", t.ID)
	case int64(-2):
		return cluster.Task{}, fmt.Errorf("live tasks of this owner at the cap of %d: %w", max, cluster.ErrLimit)
	}
	return taskReply(t.ID, "create", res)
}

// taskReply reads a script's answer that holds a record's fields and
// values (as HGETALL returns them).
func taskReply(id, op string, res any) (cluster.Task, error) {
	list, ok := res.([]any)
	if !ok {
		return cluster.Task{}, fmt.Errorf("%s task %q: unexpected reply %T", op, id, res)
	}
	h := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		f, _ := list[i].(string)
		v, _ := list[i+1].(string)
		h[f] = v
	}
	return parseTask(id, h), nil
}

func boolField(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func (m *tasks) Get(ctx context.Context, id string) (cluster.Task, error) {
	b := (*backend)(m)
	h, err := b.client.HGetAll(ctx, b.keys.task(id)).Result()
	if err != nil {
		return cluster.Task{}, b.fail(ctx, "get task", err)
	}
	if len(h) == 0 {
		return cluster.Task{}, fmt.Errorf("task %q: %w", id, cluster.ErrNotFound)
	}
	return parseTask(id, h), nil
}

func (m *tasks) Update(ctx context.Context, id string, u cluster.TaskUpdate) (cluster.Task, error) {
	b := (*backend)(m)
	if err := u.CheckClaims(); err != nil {
		return cluster.Task{}, fmt.Errorf("task %q: %w", id, err)
	}
	setRunner, runner := "0", ""
	if u.SetRunner != nil {
		setRunner, runner = "1", *u.SetRunner
	}
	args := []any{b.token(), u.IfRunner, u.Status, u.Message, u.Result, u.Error,
		setRunner, runner, boolField(u.NextAttempt), boolField(u.ClearInputs), len(u.AddInputs)}
	for key, v := range u.AddInputs {
		args = append(args, key, v)
	}
	args = append(args, len(u.Respond))
	for key, v := range u.Respond {
		args = append(args, key, v)
	}
	args = append(args, len(u.Consume))
	for _, key := range u.Consume {
		args = append(args, key)
	}
	keys := []string{b.keys.task(id)}
	claim := u.Release
	if u.Take != nil {
		claim = u.Take
	}
	claimKey, claimOwner, claimTTL := b.foldClaim(claim)
	channel, notice := b.inScript(u.Announce)
	if claimKey != "" {
		keys = append(keys, claimKey)
	}
	if claimKey != "" || channel != "" {
		args = append(args, claimOwner, channel, notice)
	}
	if claimKey != "" && u.Take != nil {
		args = append(args, claimTTL, u.TakeFrom)
	}
	// A take the script cannot hold goes first, on the same condition
	// (claimIfScript), and is let go of when the update is refused.
	alone := u.Take != nil && claimKey == ""
	if alone {
		took, err := (*claims)(b).claimIf(ctx, u.Take, u.TakeFrom)
		if err != nil {
			return cluster.Task{}, err
		}
		if !took {
			return cluster.Task{}, fmt.Errorf("task %q: claim %q held by another: %w", id, u.Take.Key, cluster.ErrTaskRunner)
		}
	}
	res, err := b.runDurable(ctx, taskUpdateScript, keys, args...).Result()
	if err != nil {
		return cluster.Task{}, b.fail(ctx, "update task", err)
	}
	if code, ok := res.(int64); ok {
		err := taskRefusal(id, code)
		if alone {
			if rerr := (*claims)(b).Release(ctx, u.Take.Key, u.Take.Owner); rerr != nil {
				// The claim may stay: not a refusal, so the caller
				// lets go of it.
				return cluster.Task{}, fmt.Errorf("%w (after %v)", rerr, err)
			}
		}
		return cluster.Task{}, err
	}
	t, err := taskReply(id, "update", res)
	if err != nil {
		return t, err
	}
	if u.SetRunner != nil {
		if err := m.index(ctx, t.Runner, id, t.Created.Add(t.TTL)); err != nil {
			return t, err
		}
	}
	// Sent on their own, after the update applied: the update stands
	// whatever they answer. A claim left behind ends with its TTL; a lost
	// announcement is what a lost bus message is elsewhere.
	if c := u.Release; c != nil && claimKey == "" {
		if err := (*claims)(b).Release(ctx, c.Key, c.Owner); err != nil {
			b.log.Debug().Err(err).Str("task", id).Msg("claim of a task not released")
		}
	}
	if a := u.Announce; a != nil && channel == "" {
		if _, err := (*bus)(b).Publish(ctx, a.Topic, a.Msg); err != nil {
			b.log.Debug().Err(err).Str("task", id).Msg("task change not announced")
		}
	}
	return t, nil
}

// taskRefusal is the error of taskUpdateScript's answer code.
func taskRefusal(id string, code int64) error {
	switch code {
	case -1:
		return fmt.Errorf("task %q: %w", id, cluster.ErrNotFound)
	case -2:
		return fmt.Errorf("task %q: %w", id, cluster.ErrTaskFinal)
	case -3:
		return fmt.Errorf("task %q: %w", id, cluster.ErrTaskRunner)
	default:
		return fmt.Errorf("task %q: %w", id, cluster.ErrTaskKey)
	}
}

// inScript returns the channel and message for a script to PUBLISH a
// with its change. A script may PUBLISH to any channel but SPUBLISH only
// to one of its keys' slot: with sharded channels (or no a) the channel
// is "", and the caller publishes a after the script, on its own.
func (b *backend) inScript(a *cluster.Notice) (channel string, msg []byte) {
	if a == nil || b.pubSharded.Load() {
		return "", nil
	}
	return b.keys.busChannel(a.Topic), a.Msg
}

// foldClaim returns the Redis key of claim, its owner and its TTL (ms)
// when a task script may take or release it with the task's change: on
// a single server, for a key without a session claim index. Otherwise
// (or with no claim) the key is "", and the caller sends the claim's
// call on its own.
func (b *backend) foldClaim(claim *cluster.TaskClaim) (key, owner string, ttl int64) {
	if claim == nil || !b.single {
		return "", "", 0
	}
	rk, index, _ := b.keys.claim(claim.Key)
	if index != "" {
		return "", "", 0
	}
	return rk, claim.Owner, ms(claim.TTL)
}

func (m *tasks) Delete(ctx context.Context, id string) error {
	b := (*backend)(m)
	if err := b.client.Del(ctx, b.keys.task(id)).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return b.fail(ctx, "delete task", err)
	}
	return nil
}

// parseTask builds a record from the hash's fields.
func parseTask(id string, h map[string]string) cluster.Task {
	num := func(f string) int64 { n, _ := strconv.ParseInt(h[f], 10, 64); return n }
	bytes := func(f string) []byte {
		if v, ok := h[f]; ok && v != "" {
			return []byte(v)
		}
		return nil
	}
	t := cluster.Task{
		ID: id, Owner: h["owner"], OwnerKey: h["okey"], Status: h["status"], Message: h["msg"],
		Created:      time.UnixMilli(num("created")),
		Updated:      time.UnixMilli(num("updated")),
		TTL:          time.Duration(num("ttl")) * time.Millisecond,
		PollInterval: time.Duration(num("poll")) * time.Millisecond,
		Method:       h["method"], Params: bytes("params"), Meta: bytes("meta"),
		Result: bytes("result"), Error: bytes("error"),
		Runner: h["runner"], Attempt: int(num("attempt")), Idempotent: h["idem"] == "1",
	}
	for f, v := range h {
		switch {
		case strings.HasPrefix(f, "i:"):
			if t.Inputs == nil {
				t.Inputs = make(map[string][]byte)
			}
			t.Inputs[f[2:]] = []byte(v)
		case strings.HasPrefix(f, "r:"):
			if t.Responses == nil {
				t.Responses = make(map[string][]byte)
			}
			t.Responses[f[2:]] = []byte(v)
		}
	}
	return t
}

// List reads the owner index (task id → expiry) from cursor on, loads
// the records of a chunk in one pipelined round trip, and keeps those of
// owner: one round trip for the index and one per chunk of records.
func (m *tasks) List(ctx context.Context, ownerKey, owner, cursor string, limit int) ([]cluster.Task, string, error) {
	b := (*backend)(m)
	lower, cms, cid := "-inf", int64(0), ""
	if cursor != "" {
		var err error
		if cms, cid, err = cluster.ParseTaskCursor(cursor); err != nil {
			return nil, "", err
		}
		lower = strconv.FormatInt(cms, 10)
	}
	if limit <= 0 {
		limit = cluster.DefaultMaxTasks
	}
	entries, err := b.client.ZRangeByScoreWithScores(ctx, b.keys.taskOwner(ownerKey), &goredis.ZRangeBy{Min: lower, Max: "+inf"}).Result()
	if err != nil {
		return nil, "", b.fail(ctx, "list tasks", err)
	}
	var out []cluster.Task
	for i := 0; i < len(entries); {
		var chunk []goredis.Z
		for ; i < len(entries) && len(chunk) < limit; i++ {
			z := entries[i]
			id, _ := z.Member.(string)
			if cursor == "" || cluster.TaskAfter(int64(z.Score), id, cms, cid) {
				chunk = append(chunk, z)
			}
		}
		cmds := make([]*goredis.MapStringStringCmd, len(chunk))
		pipe := b.client.Pipeline()
		for j, z := range chunk {
			cmds[j] = pipe.HGetAll(ctx, b.keys.task(z.Member.(string)))
		}
		if len(chunk) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return nil, "", b.fail(ctx, "list tasks", err)
			}
		}
		for j, z := range chunk {
			h := cmds[j].Val()
			if len(h) == 0 || h["owner"] != owner {
				continue
			}
			out = append(out, parseTask(z.Member.(string), h))
			if len(out) == limit {
				if i < len(entries) || j < len(chunk)-1 {
					return out, cluster.TaskCursor(int64(z.Score), z.Member.(string)), nil
				}
				return out, "", nil
			}
		}
	}
	return out, "", nil
}
