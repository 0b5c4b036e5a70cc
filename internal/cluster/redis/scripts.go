package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each one touches the keys of one session (one slot);
// keys of other slots are passed as trailing KEYS only when the backend
// runs on a single server, and the script updates them when present.
// Times come from the Redis clock (TIME), so nodes with skewed clocks
// agree on expiry.

// prelude is prepended to every script. An index entry scored with an
// expiry E is live while E >= now, as a key whose PEXPIRE deadline is E:
// Redis expires a key only once its deadline has passed.
const prelude = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- extend sets a key's TTL to at least ttl ms.
local function extend(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
-- hold is how long the subscription sets live past a refresh: a session's
-- idle TTL plus an eighth, so refreshing them every eighth of the TTL
-- keeps them alive as long as any subscribed session.
local function hold(ttl)
  return ttl + math.floor(ttl / 8)
end
`

// touchLRU is the per-session stream LRU: it marks stream used at now
// (µs, Redis clock) and, when the session has more than max streams,
// forgets streams idle past their TTL and removes the history of the
// least recently used ended streams beyond max (publishing a re-read
// hint to their followers, if any: see readScript). A stream that has
// not ended (a GET stream, a POST stream before its final) is never
// removed for the bound: it may have a live connection, which must
// receive every event. The LRU's TTL is set to 9/8 of the streams' TTL
// when it has less than their TTL left, so it outlives every stream it
// lists without a PEXPIRE on each touch.
const touchLRU = `
local function touch_lru(lru, stream, ttl, max, pfx, chan_pfx, now)
  redis.call('ZADD', lru, string.format('%.0f', now), stream)
  local card = redis.call('ZCARD', lru)
  if card > max then
    card = card - redis.call('ZREMRANGEBYSCORE', lru, '-inf', '(' .. string.format('%.0f', now - ttl * 1000))
    local excess, from = card - max, 0
    while excess > 0 do
      local page = redis.call('ZRANGE', lru, from, from + excess + 7)
      if #page == 0 then break end
      local gone = {}
      for _, s in ipairs(page) do
        if s ~= stream then
          local m = redis.call('HMGET', pfx .. 'm:' .. s, 'done', 'f')
          if m[1] ~= '0' then
            redis.call('DEL', pfx .. 'm:' .. s, pfx .. 'e:' .. s)
            if m[2] then follow_publish(chan_pfx, s, '0') end
            gone[#gone + 1] = s
            excess = excess - 1
            if excess == 0 then break end
          end
        end
      end
      if #gone > 0 then redis.call('ZREM', lru, unpack(gone)) end
      from = from + #page - #gone
    end
  end
  if redis.call('PTTL', lru) < ttl then redis.call('PEXPIRE', lru, hold(ttl)) end
end
`

func script(src string) *goredis.Script { return goredis.NewScript(prelude + followPublish + src) }

// Retries. go-redis sends a command again when its reply does not arrive
// in time (a read timeout, a connection cut after the write), although
// Redis may have run it already. Every script must therefore be safe to
// run twice: most are idempotent; those that are not (create, end,
// append, once) take a token unique to the call (backend.token) and
// answer a second run of the same call as they answered the first.

// tokensBytes bounds the appendBatchScript's record of recent append
// tokens per stream (about 40 appends).
const tokensBytes = "1024"

// tombstoneMS is how long endScript remembers the token of the call that
// ended a session: longer than any retry of that call.
const tombstoneMS = 60000

// Sessions.

// leaseFns are the lease sets of the limiter (a sorted set of member →
// expiry ms): lease_wait prunes the expired leases of key and returns nil
// when member may take one (it holds one already, or the set has room
// below max, 0 for no cap), else the ms until the earliest one expires;
// lease_take leases member for ttl ms from now.
const leaseFns = `
local function lease_wait(key, member, max, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. now)
  if max > 0 and not redis.call('ZSCORE', key, member) and redis.call('ZCARD', key) >= max then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return math.max(tonumber(first[2]) - now, 0)
  end
  return nil
end
local function lease_take(key, member, ttl, now)
  redis.call('ZADD', key, now + ttl, member)
  extend(key, ttl)
end
`

// KEYS: fields [, live [, lease set]]. ARGV: id, ttl ms, max, token,
// lease ttl ms, lease max, field, value, ... Returns {1, 0}, or {-1, 0}
// when the session exists, {-2, 0} past the cap, {-3, wait ms} when the
// lease set is full (nothing is written then). The token is kept in the
// reserved field, so a retry of a call that already created the session
// (the reply was lost) answers 1 again. On Cluster (fields alone) the
// cap and the lease are taken before, by capScript and acquireScript.
var createScript = script(leaseFns + `
local ttl, max = tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], '\0') == ARGV[4] then return {1, 0} end
  return {-1, 0}
end
if KEYS[2] then
  local now = now_ms()
  if KEYS[3] then
    local wait = lease_wait(KEYS[3], ARGV[1], tonumber(ARGV[6]), now)
    if wait then return {-3, wait} end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
  if max > 0 and redis.call('ZCARD', KEYS[2]) >= max then return {-2, 0} end
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  extend(KEYS[2], ttl)
  if KEYS[3] then lease_take(KEYS[3], ARGV[1], tonumber(ARGV[5]), now) end
end
redis.call('HSET', KEYS[1], '\0', ARGV[4])
for i = 7, #ARGV, 2 do
  local v = ARGV[i + 1]
  if string.byte(ARGV[i], 1) == 1 then v = now_ms() end -- a holder (holderFns)
  redis.call('HSET', KEYS[1], ARGV[i], v)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, 0}
`)

// capScript reserves a place among live sessions (Cluster mode, before
// createScript). KEYS: live. ARGV: id, ttl ms, max. Returns 1, or 2 when
// the id holds a place already (createScript then decides whether the
// session exists, so a retried call is not mistaken for a duplicate id),
// -2 past the cap.
var capScript = script(`
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 2 end
local max = tonumber(ARGV[3])
if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then return -2 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
extend(KEYS[1], tonumber(ARGV[2]))
return 1
`)

// slideSession slides the idle TTL of a live session (fields key fk,
// subscription set sk; live index lk and uri registry ik on a single
// server only, else nil) and returns the uris the caller must refresh.
const slideSession = `
local function slide(fk, sk, lk, ik, id, ttl, subpfx, now)
  local uris = {}
  redis.call('PEXPIRE', fk, ttl)
  if lk then
    redis.call('ZADD', lk, now + ttl, id)
    extend(lk, ttl)
  end
  if redis.call('PTTL', sk) < ttl and redis.call('EXISTS', sk) == 1 then
    local h = hold(ttl)
    redis.call('PEXPIRE', sk, h)
    uris = redis.call('SMEMBERS', sk)
    if ik then
      for _, u in ipairs(uris) do extend(subpfx .. u, h) end
      extend(ik, h)
      uris = {}
    end
  end
  return uris
end
`

// KEYS: fields, subs [, live, uri registry]. ARGV: id, ttl ms (0: no
// slide), 1 to return the fields, subscriber set prefix [, holder to
// record (see holderFns)]. Returns nil when not live, else {now ms,
// fields or false, uris}. Sliding also refreshes,
// once an eighth of the TTL has passed since the last time, the TTL of
// the subscriber sets of the session's uris (here on a single server;
// else uris lists them for the caller).
var loadScript = script(slideSession + `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local ttl = tonumber(ARGV[2])
local now = now_ms()
local uris = {}
if ttl > 0 then uris = slide(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ttl, ARGV[4], now) end
local fields = false
if ARGV[3] == '1' then fields = redis.call('HGETALL', KEYS[1]) end
if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', KEYS[1], '\1' .. ARGV[5], now) end
return {now, fields, uris}
`)

// KEYS: live, uri registry, then fields and subs of each session (single
// server only). ARGV: ttl ms, subscriber set prefix, then the ids.
// Slides every live session as loadScript does; returns 1 or 0 (not
// live) per id.
var touchManyScript = script(slideSession + `
local ttl = tonumber(ARGV[1])
local now = now_ms()
local live = {}
for i = 3, #ARGV do
  local fk, sk = KEYS[2 * i - 3], KEYS[2 * i - 2]
  if redis.call('EXISTS', fk) == 1 then
    slide(fk, sk, KEYS[1], KEYS[2], ARGV[i], ttl, ARGV[2], now)
    live[#live + 1] = 1
  else
    live[#live + 1] = 0
  end
end
return live
`)

// KEYS: a key. ARGV: ttl ms. Sets the key's TTL to at least ttl (Cluster
// mode, for keys of another slot).
var extendScript = script(`
extend(KEYS[1], tonumber(ARGV[1]))
return 1
`)

// holderFns: a node holding a copy of a session is a field of the
// session's hash named "\x01" and the node's instance, holding the time
// (ms, Redis clock) it was recorded (cluster.Holders). take_holders
// returns the holders of a session's hash as {name, age ms, ...} and,
// when drop is true, removes them.
const holderFns = `
local function take_holders(key, drop)
  local held, fields, now = {}, {}, now_ms()
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f = all[i]
    if string.byte(f, 1) == 1 then
      held[#held + 1] = string.sub(f, 2)
      held[#held + 1] = math.max(0, now - (tonumber(all[i + 1]) or 0))
      fields[#fields + 1] = f
    end
  end
  if drop and #fields > 0 then redis.call('HDEL', key, unpack(fields)) end
  return held
end
`

// KEYS: fields. ARGV: field, value, ... Returns false when not live, else
// the holders, which it clears.
var setScript = script(holderFns + `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return take_holders(KEYS[1], true)
`)

// KEYS: fields, subs, lru, claim index [, live [, lease set]]. ARGV: id,
// session key prefix, follow channel prefix, subscriber set prefix, owner
// key prefix, token, tombstone ttl ms, bus channel (empty for none) and
// message to publish when the session is ended here, then field, value,
// ... that a live session must match. The session's lease in the lease
// set, when one is given, is released when the session was live. Returns
// {live 0|1, uris, streams}, the lists empty when the global keys were
// updated here, or {-1} when the live session does not match (it is
// kept); a fourth element lists the holders (holderFns) when this call
// ended the session. Ending a live session leaves a tombstone holding the token for a
// while, so a retry of the call (the reply was lost) still reports the
// session as live (and does not publish again).
var endScript = script(holderFns + `
local held = false
if redis.call('EXISTS', KEYS[1]) == 1 then
  for i = 10, #ARGV, 2 do
    if (redis.call('HGET', KEYS[1], ARGV[i]) or '') ~= ARGV[i + 1] then return {-1} end
  end
  held = take_holders(KEYS[1], false)
end
local live = redis.call('DEL', KEYS[1])
local tomb = ARGV[2] .. 'ended'
if live == 1 then
  redis.call('SET', tomb, ARGV[6], 'PX', ARGV[7])
  if ARGV[8] ~= '' then redis.call('PUBLISH', ARGV[8], ARGV[9]) end
elseif redis.call('GET', tomb) == ARGV[6] then
  live = 1
end
local uris = redis.call('SMEMBERS', KEYS[2])
local streams = redis.call('ZRANGE', KEYS[3], 0, -1)
local claims = redis.call('SMEMBERS', KEYS[4])
for _, s in ipairs(streams) do
  redis.call('DEL', ARGV[2] .. 'm:' .. s, ARGV[2] .. 'e:' .. s)
  follow_publish(ARGV[3], s, '0')
end
for _, c in ipairs(claims) do redis.call('DEL', ARGV[2] .. 'c:' .. c) end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
if KEYS[5] then
  redis.call('ZREM', KEYS[5], ARGV[1])
  if KEYS[6] and live == 1 then redis.call('ZREM', KEYS[6], ARGV[1]) end
  for _, u in ipairs(uris) do redis.call('SREM', ARGV[4] .. u, ARGV[1]) end
  for _, s in ipairs(streams) do redis.call('DEL', ARGV[5] .. s) end
  return {live, {}, {}, held}
end
return {live, uris, streams, held}
`)

// KEYS: fields, subs [, subscribers of uri, uri registry]. ARGV: uri, max,
// id. Returns the TTL (ms) the subscription sets got, -1 when not live,
// -2 past the bound.
var subscribeScript = script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return -2 end
  redis.call('SADD', KEYS[2], ARGV[1])
end
local h = hold(math.max(redis.call('PTTL', KEYS[1]), 1))
extend(KEYS[2], h)
if KEYS[3] then
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('SADD', KEYS[4], ARGV[1])
  extend(KEYS[3], h)
  extend(KEYS[4], h)
end
return h
`)

// KEYS: fields, subs [, subscribers of uri]. ARGV: uri, id. Returns 1, or
// -1 when not live.
var unsubscribeScript = script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('SREM', KEYS[2], ARGV[1])
if KEYS[3] then redis.call('SREM', KEYS[3], ARGV[2]) end
return 1
`)

// KEYS: subscribers of uri, live. Returns the live subscribers and drops
// the dead ones.
var subscribersScript = script(`
local now = now_ms()
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local exp = redis.call('ZSCORE', KEYS[2], id)
  if exp and tonumber(exp) >= now then
    out[#out + 1] = id
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
`)

// KEYS: live. ARGV: cursor, count. Returns {next cursor, ids}.
var scanScript = script(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms())
local r = redis.call('ZSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local ids = {}
for i = 1, #r[2], 2 do ids[#ids + 1] = r[2][i] end
return {r[1], ids}
`)

// KEYS: live. Returns the number of live sessions.
var countScript = script(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms())
return redis.call('ZCARD', KEYS[1])
`)

// Events.

// ownerScript records the owning session of a stream (Cluster mode,
// before openScript). KEYS: owner. ARGV: session, ttl ms. Returns 1, or 0
// when another session owns the stream.
var ownerScript = script(`
local o = redis.call('GET', KEYS[1])
if o and o ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// KEYS: meta, events [, owner] of each stream. ARGV: ttl ms, owner ttl
// ms, keys per stream (2 or 3). Slides the keys of the streams whose meta
// still exists (a missing stream is not brought back).
var slideStreamsScript = script(`
local ttl, ottl, step = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #KEYS, step do
  if redis.call('PEXPIRE', KEYS[i], ttl) == 1 then
    redis.call('PEXPIRE', KEYS[i + 1], ttl)
    if step == 3 then redis.call('PEXPIRE', KEYS[i + 2], ottl) end
  end
end
return 1
`)

// KEYS: meta, lru [, owner]. ARGV: session, stream, owner node, request,
// ttl ms, max streams, session key prefix, follow channel prefix.
// Returns 1 when created, 0 when it existed, -1 when another session owns
// the stream.
var openScript = script(touchLRU + `
local ttl = tonumber(ARGV[5])
if KEYS[3] then
  local o = redis.call('GET', KEYS[3])
  if o and o ~= ARGV[1] then return -1 end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ttl)
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local now = now_us()
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'request', ARGV[4], 'last', 0, 'done', 0, 'touched', math.floor(now / 1000))
redis.call('PEXPIRE', KEYS[1], ttl)
touch_lru(KEYS[2], ARGV[2], ttl, tonumber(ARGV[6]), ARGV[7], ARGV[8], now)
return 1
`)

// appendBatchScript appends events to a stream, opening it first as
// openScript does when asked. KEYS: meta, events, lru [, owner]. ARGV:
// session, stream, final 0|1 (of the last event), max events, max
// streams, ttl ms, session key prefix, follow channel prefix, token,
// open 0|1, owner node, request, next (the seq the first event must
// get; 0: any), data... Returns {first, refresh}: the first event's seq
// (the others follow it), -1 when the stream is unknown (and not to be
// opened), -2 when done, -3 when another session owns the stream, -4
// when the history does not end right before next (cluster.Batch.Next).
// The tokens of the stream's latest batches are kept with their first
// seqs in the meta field 'toks' (";token=seq", at most tokensBytes
// long; only the final's once the stream is done), so a retry of a
// batch that already happened (its reply was lost) returns the original
// seq instead of storing the events twice.
//
// A stream has one producer most of the time, so a batch is kept to a
// handful of commands: one HMGET and one HSET of the meta, the RPUSH,
// and TIME; the open claims the owner key with one SET NX. Its TTLs
// (meta, events, owner) and its place in the session's LRU are
// refreshed only at the open and when an eighth of the TTL passed since
// the last refresh (the meta field 'touched'), the final event
// included: a stream's history lives at least 7/8 of the TTL after its
// last append. The final event makes the stream the most recently used
// in the LRU (which orders ended streams only: one that has not ended
// is never evicted for the bound). The events are published to the
// stream's channel only once a follower marked the stream (the meta
// field 'f', see readScript). Without the owner key (Cluster: it lives
// in another slot) refresh is 1 when the caller must slide the owner
// key, with the history, so that it outlives the history (see
// ownerTTL).
var appendBatchScript = script(touchLRU + `
local ttl, maxev = tonumber(ARGV[6]), tonumber(ARGV[4])
local m = redis.call('HMGET', KEYS[1], 'done', 'last', 'toks', 'touched', 'f')
local fields = {}
local opened, owned = false, false
if not m[1] then
  if ARGV[10] ~= '1' then return {-1, 0} end
  if KEYS[4] then
    if redis.call('SET', KEYS[4], ARGV[1], 'NX', 'PX', ttl) then
      owned = true
    elseif redis.call('GET', KEYS[4]) ~= ARGV[1] then
      return {-3, 0}
    end
  end
  fields = {'owner', ARGV[11], 'request', ARGV[12]}
  m = {'0', '0'}
  opened = true
end
local toks, tok = m[3] or '', ';' .. ARGV[9] .. '='
local at = string.find(toks, tok, 1, true)
if at then
  local from = at + #tok
  local to = string.find(toks, ';', from, true)
  return {tonumber(string.sub(toks, from, (to or 0) - 1)), 0}
end
if m[1] == '1' then return {-2, 0} end
if ARGV[13] ~= '0' and tonumber(ARGV[13]) ~= tonumber(m[2]) + 1 then return {-4, 0} end
local n = #ARGV - 13
local first = tonumber(m[2]) + 1
local last = first + n - 1
if ARGV[3] == '1' then
  toks = tok .. first
else
  toks = toks .. tok .. first
  while #toks > ` + tokensBytes + ` do
    toks = string.sub(toks, (string.find(toks, ';', 2, true)))
  end
end
local now = now_us()
local refresh = opened or math.floor(now / 1000) - tonumber(m[4] or '0') >= ttl / 8
local h = #fields
fields[h + 1], fields[h + 2], fields[h + 3], fields[h + 4], fields[h + 5], fields[h + 6] =
  'last', last, 'toks', toks, 'done', ARGV[3]
if refresh then
  fields[h + 7], fields[h + 8] = 'touched', math.floor(now / 1000)
end
redis.call('HSET', KEYS[1], unpack(fields))
local len = 0
for i = 14, #ARGV, 500 do
  len = redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
if len > maxev then redis.call('LTRIM', KEYS[2], -maxev, -1) end
if refresh then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if KEYS[4] and not owned then redis.call('SET', KEYS[4], ARGV[1], 'PX', ttl) end
  touch_lru(KEYS[3], ARGV[2], ttl, tonumber(ARGV[5]), ARGV[7], ARGV[8], now)
else
  if len == n then
    -- The stream was opened without events: this batch made the list.
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  if ARGV[3] == '1' then
    -- An ended stream is most recently used: the first the LRU bound
    -- takes are those that ended before it.
    redis.call('ZADD', KEYS[3], string.format('%.0f', now), ARGV[2])
  end
end
if m[5] then
  for i = 14, #ARGV do
    local fin = '0'
    if i == #ARGV then fin = ARGV[3] end
    follow_publish(ARGV[8], ARGV[2], (first + i - 14) .. ':' .. fin .. ':' .. ARGV[i])
  end
end
if refresh and not opened and not KEYS[4] then return {first, 1} end
return {first, 0}
`)

// KEYS: meta, events. ARGV: after. Returns -1 when the stream is
// unknown, else {owner, request, last, done, first kept seq, events after}
// where events is empty when the cursor is past last or was trimmed. A
// cursor at or past last (a follower checking an idle stream) reads the
// meta only, and first is then last + 1. Reading a stream that has not
// ended marks it followed (the meta field 'f'): appends publish their
// events only from then on, so a stream nobody reads costs no PUBLISH.
// A follower subscribes before it reads (cluster.Tail), and the mark
// and the read are one step, so every event is either in what it read
// or published after it subscribed.
var readScript = script(`
local m = redis.call('HMGET', KEYS[1], 'owner', 'request', 'last', 'done', 'f')
if not m[3] then return -1 end
if not m[5] and m[4] ~= '1' then redis.call('HSET', KEYS[1], 'f', '1') end
local last = tonumber(m[3])
local after = tonumber(ARGV[1])
if after >= last then return {m[1], m[2], last, m[4], last + 1, {}} end
local first = last - redis.call('LLEN', KEYS[2]) + 1
local evs = {}
if after < last and after + 1 >= first then
  evs = redis.call('LRANGE', KEYS[2], after + 1 - first, -1)
end
return {m[1], m[2], last, m[4], first, evs}
`)

// onceScript sets a single-use key. KEYS: key. ARGV: token, ttl ms.
// Returns 1 the first time, and to a retry of that call (same token);
// 0 after.
var onceScript = script(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
`)

// Membership.

// KEYS: nodes. ARGV: node, ttl ms.
var heartbeatScript = script(`
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
extend(KEYS[1], tonumber(ARGV[2]))
return 1
`)

// KEYS: nodes. ARGV: node. Returns 1 when the lease is live.
var aliveScript = script(`
local exp = redis.call('ZSCORE', KEYS[1], ARGV[1])
if exp and tonumber(exp) >= now_ms() then return 1 end
return 0
`)

// KEYS: nodes. Returns the live nodes.
var membersScript = script(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms())
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// Registry.

// The registry hash maps a feature key to "1" or "0", and "\0" .. key to
// the token of the call that last changed it, so that a retry of that
// call (its reply lost) answers as the first run did instead of applying
// again. All skips the token fields.

// KEYS: registry. ARGV: key, "1"|"0", state when unrecorded, token.
// Returns the state before (1 or 0).
var registrySwapScript = script(`
local tf = '\0' .. ARGV[1]
local was = redis.call('HGET', KEYS[1], ARGV[1])
if was == ARGV[2] and redis.call('HGET', KEYS[1], tf) == ARGV[4] then
  return 1 - tonumber(was)
end
was = was or ARGV[3]
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if was ~= ARGV[2] then redis.call('HSET', KEYS[1], tf, ARGV[4]) end
return tonumber(was)
`)

// KEYS: registry. ARGV: key, state when unrecorded, token. Returns the
// new state (1 or 0).
var registryToggleScript = script(`
local tf = '\0' .. ARGV[1]
local was = redis.call('HGET', KEYS[1], ARGV[1])
if was and redis.call('HGET', KEYS[1], tf) == ARGV[3] then return tonumber(was) end
was = was or ARGV[2]
local now = '1'
if was == '1' then now = '0' end
redis.call('HSET', KEYS[1], ARGV[1], now)
redis.call('HSET', KEYS[1], tf, ARGV[3])
return tonumber(now)
`)

// Claims.

// KEYS: claim [, session claim index]. ARGV: owner, ttl ms, index member.
// Returns the previous holder or "".
var claimScript = script(`
local prev = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if KEYS[2] then
  redis.call('SADD', KEYS[2], ARGV[3])
  extend(KEYS[2], tonumber(ARGV[2]))
end
return prev or ''
`)

// KEYS: claim [, session claim index]. ARGV: owner, ttl ms. Returns 1
// when owner held the claim.
var renewScript = script(renewClaim + `
return renew(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]))
`)

const renewClaim = `
local function renew(key, index, owner, ttl)
  if redis.call('GET', key) ~= owner then return 0 end
  redis.call('PEXPIRE', key, ttl)
  if index then extend(index, ttl) end
  return 1
end
`

// KEYS: each claim, followed by its session claim index when it has one.
// ARGV: ttl ms, then per claim its owner and 1 when it has an index, else
// 0. Returns 1 or 0 per claim, as renewScript.
var renewManyScript = script(renewClaim + `
local ttl = tonumber(ARGV[1])
local k = 1
local held = {}
for i = 2, #ARGV, 2 do
  local key, index = KEYS[k], nil
  k = k + 1
  if ARGV[i + 1] == '1' then
    index = KEYS[k]
    k = k + 1
  end
  held[#held + 1] = renew(key, index, ARGV[i], ttl)
end
return held
`)

// KEYS: claim [, session claim index]. ARGV: owner, index member.
var releaseScript = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then redis.call('SREM', KEYS[2], ARGV[2]) end
end
return 1
`)
