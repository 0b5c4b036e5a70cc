package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each one touches the keys of one session (one slot);
// keys of other slots are passed as trailing KEYS only when the backend
// runs on a single server, and the script updates them when present.
// Times come from the Redis clock (TIME), so nodes with skewed clocks
// agree on expiry. This file holds what every script shares; the
// scripts are grouped by the table they serve: scripts_sessions.go,
// scripts_events.go (stream histories), scripts_leases.go (single-use
// keys, membership, claims) and scripts_registry.go; the limiter's, the
// pub/sub mode's and the task store's are beside their code (limiter.go,
// sharded.go, tasks.go, taskindex.go). Redis knows a script by the SHA1
// of its text, pinned in testdata/scripts.sha1 (TestScriptHashes).

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

func script(src string) *goredis.Script { return goredis.NewScript(prelude + followPublish + src) }

// Retries. go-redis sends a command again when its reply does not arrive
// in time (a read timeout, a connection cut after the write), although
// Redis may have run it already. Every script must therefore be safe to
// run twice: most are idempotent; those that are not (create, end,
// append, once) take a token unique to the call (backend.token) and
// answer a second run of the same call as they answered the first.

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
