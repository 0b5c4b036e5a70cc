package redis

// Registry: the enabled state of tools, prompts and resources.

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
