package redis

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// The run index (cluster.TaskStore.Runners): P:{trun}:r:<runner> is a zset
// of task id → the task's expiry (ms), and P:{trun}:runners a zset of
// runner → the newest expiry in its index. Both live in one slot, each
// with a TTL at least as long as its newest entry. On a single server
// Create indexes the task in its own script; on Cluster (other slot) and
// for an Update with SetRunner it costs one more round trip.

func (k keys) taskRunners() string             { return k.prefix + ":{trun}:runners" }
func (k keys) taskRunner(runner string) string { return k.prefix + ":{trun}:r:" + runner }

// indexRun is the Lua of one index entry: runner's index gets id with
// expiry exp, and runners gets runner unless it has a later expiry.
const indexRun = `
local function index_run(runners, idx, runner, id, exp)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', '(' .. now)
  redis.call('ZADD', idx, exp, id)
  local s = redis.call('ZSCORE', runners, runner)
  if not s or tonumber(s) < exp then redis.call('ZADD', runners, exp, runner) end
  extend(idx, exp - now)
  extend(runners, exp - now)
end
`

// KEYS: runners, index. ARGV: runner, id, expiry ms.
var taskIndexScript = script(indexRun + `
index_run(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))
return 1
`)

// KEYS: runners, index. ARGV: runner, ids... Drops the ids and the
// expired entries, and runner from runners once its index is empty.
var taskUnindexScript = script(`
local now = now_ms()
for i = 2, #ARGV do redis.call('ZREM', KEYS[2], ARGV[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
`)

func (m *tasks) index(ctx context.Context, runner, id string, expires time.Time) error {
	b := (*backend)(m)
	k := b.keys
	err := b.script(ctx, taskIndexScript, []string{k.taskRunners(), k.taskRunner(runner)}, runner, id, expires.UnixMilli()).Err()
	if err != nil {
		return b.fail(ctx, "index task", err)
	}
	return nil
}

func (m *tasks) Runners(ctx context.Context, limit int) ([]string, error) {
	b := (*backend)(m)
	out, err := b.client.ZRange(ctx, b.keys.taskRunners(), 0, stop(limit)).Result()
	if err != nil {
		return nil, b.fail(ctx, "task runners", err)
	}
	return out, nil
}

func (m *tasks) RunnerTasks(ctx context.Context, runner string, limit int) ([]string, error) {
	b := (*backend)(m)
	out, err := b.client.ZRange(ctx, b.keys.taskRunner(runner), 0, stop(limit)).Result()
	if err != nil {
		return nil, b.fail(ctx, "runner tasks", err)
	}
	return out, nil
}

// stop is the ZRANGE stop index of the first limit entries (all for 0).
func stop(limit int) int64 {
	if limit <= 0 {
		return -1
	}
	return int64(limit - 1)
}

func (m *tasks) Unindex(ctx context.Context, runner string, ids []string) error {
	b := (*backend)(m)
	k := b.keys
	args := make([]any, 0, len(ids)+1)
	args = append(args, runner)
	for _, id := range ids {
		args = append(args, id)
	}
	if err := b.script(ctx, taskUnindexScript, []string{k.taskRunners(), k.taskRunner(runner)}, args...).Err(); err != nil {
		return b.fail(ctx, "unindex tasks", err)
	}
	return nil
}

var _ cluster.TaskStore = (*tasks)(nil)
