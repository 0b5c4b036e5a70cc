package redis

// Sessions: a session's fields and holders, the live index, its
// subscriptions, and its end with everything it holds.

// tombstoneMS is how long endScript remembers the token of the call that
// ended a session: longer than any retry of that call.
const tombstoneMS = 60000

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
// record (see holderFns), which also drops the holders recorded more than
// ttl ago]. Returns nil when not live, else {now ms,
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
if ARGV[5] and ARGV[5] ~= '' then
  if fields and ttl > 0 then -- holders recorded more than a TTL ago hold nothing
    local stale = {}
    for i = 1, #fields, 2 do
      if string.byte(fields[i], 1) == 1 and (tonumber(fields[i + 1]) or 0) < now - ttl then stale[#stale + 1] = fields[i] end
    end
    if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  end
  redis.call('HSET', KEYS[1], '\1' .. ARGV[5], now)
end
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
