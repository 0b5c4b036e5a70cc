package redis

// Leases: single-use keys, membership and claims.

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

// KEYS: claim [, session claim index]. ARGV: owner, ttl ms, index
// member, the holder it may replace. Takes the claim as claimScript
// does, only while nobody holds it, or owner (a retry) or the holder
// named does. Returns 1 when it took the claim, else 0.
var claimIfScript = script(`
local prev = redis.call('GET', KEYS[1])
if prev and prev ~= ARGV[1] and prev ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if KEYS[2] then
  redis.call('SADD', KEYS[2], ARGV[3])
  extend(KEYS[2], tonumber(ARGV[2]))
end
return 1
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
