package redis

// Events: the history (meta and events) of each stream, the session's
// stream LRU and the stream's owner key.

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

// tokensBytes bounds the appendBatchScript's record of recent append
// tokens per stream (about 40 appends); seqTokensBytes the record of a
// stream whose batches name the seq they start at (cluster.Batch.Next:
// a POST stream's producer), a few batches. Such a batch can be stored
// only right after the one before it (-4 otherwise), so a late copy of
// any but the latest batch is refused whether its token is kept or not:
// the tokens serve the retry of the latest one. Appends that may land
// in any order (GET and broadcast streams, appended by every node) rely
// on the tokens alone. The shorter record saves the script most of its
// string work and a POST stream's meta most of a kilobyte.
const (
	tokensBytes    = "1024"
	seqTokensBytes = "128"
)

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
// opened; with the owner key, only when no other session owns it; a
// batch with next, its producer's, then publishes a re-read hint to
// the stream's followers, which find it gone), -2
// when done, -3 when another session owns the stream, -4
// when the history does not end right before next (cluster.Batch.Next).
// The tokens of the stream's latest batches are kept with their first
// seqs in the meta field 'toks' (";token=seq", at most tokensBytes
// long, seqTokensBytes for a batch with next; only the final's once the
// stream is done), so a retry of a batch that already happened (its
// reply was lost) returns the original seq instead of storing the
// events twice.
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
var appendBatchScript = script(appendBatchBody)

// appendBatchBody is appendBatchScript's source after the prelude.
const appendBatchBody = touchLRU + `
local ttl, maxev = tonumber(ARGV[6]), tonumber(ARGV[4])
local m = redis.call('HMGET', KEYS[1], 'done', 'last', 'toks', 'touched', 'f')
local fields = {}
local opened, owned = false, false
if not m[1] then
  if ARGV[10] ~= '1' then
    if KEYS[4] then
      local o = redis.call('GET', KEYS[4])
      if o and o ~= ARGV[1] then return {-3, 0} end
    end
    -- The stream vanished (expired, evicted): its followers re-read
    -- now and end, instead of waiting for events that will not come.
    if ARGV[13] ~= '0' then follow_publish(ARGV[8], ARGV[2], '0') end
    return {-1, 0}
  end
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
  local bound = ` + tokensBytes + `
  if ARGV[13] ~= '0' then bound = ` + seqTokensBytes + ` end
  while #toks > bound do
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
`

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
