package main

// redisNeedsDoc is the section of docs/CONFIGURATION.md after the
// settings table: what the deployment asks of its Redis.
const redisNeedsDoc = `
## What Redis needs

**` + "`maxmemory-policy noeviction`" + `.** Every key of the deployment has a time to live
(sessions ` + "`--session-ttl`" + ` after their last use, a stream's history ` + "`--history-ttl`" + ` after
its last event, tasks ` + "`--task-ttl`" + `, leases and claims a few seconds to minutes), so
once Redis holds ` + "`maxmemory`" + `, ` + "`volatile-lru`" + ` (the default of ElastiCache, Memorystore and
Azure Cache for Redis), the other ` + "`volatile-*`" + ` policies and every ` + "`allkeys-*`" + ` policy evict
ours first, also when other services' keys without a TTL filled the memory. What Redis
evicts is gone: a session's client gets 404 and starts again; a call waiting for the
client's reply on an evicted session fails at its node's next heartbeat (-31000); a
stream whose history was evicted ends with -31000 on the node following it; an evicted
task record answers as unknown. Nothing waits, but work is lost. Under ` + "`noeviction`" + ` a full
Redis refuses the writes that need memory instead: calls end with ` + "`-31000 \"shared state is\n" +
	"unavailable; retry later\"`" + `, nothing is lost, and calls succeed again as soon as memory
is freed (` + "`redis-oom`" + ` and ` + "`redis-evict`" + ` in docs/RELIABILITY.md). A ` + "`maxmemory`" + ` of 0 (no limit, the
default of a self-run redis-server) never evicts; then keep Redis's memory below what its
host or container allows.

A node reads ` + "`maxmemory_policy`" + ` and ` + "`maxmemory`" + ` of every primary (each shard of a Redis
Cluster) with ` + "`INFO memory`" + `, which managed services allow where ` + "`CONFIG GET`" + ` is refused, at
start and every ` + "`--redis-eviction-check`" + ` (15 s). A policy that may evict is, under the
default ` + "`--redis-eviction unready`" + ` (from the ` + "`redis-evict`" + ` run of docs/RELIABILITY.md, the log
line's time left out):

` + "```" + `
{"level":"error","node":"node1","component":"cluster.redis","maxmemory_policy":"volatile-lru","maxmemory":5897592,"servers":["127.0.0.1:34531"],"eviction":"unready","message":"Redis may evict this deployment's keys: every key has a TTL, so under memory pressure sessions, streams, claims and tasks vanish (calls fail, sessions end); set maxmemory-policy noeviction"}
$ curl -s 127.0.0.1:7979/readyz
not ready: the store may evict this deployment's keys (Redis maxmemory-policy volatile-lru, maxmemory 5897592): set maxmemory-policy noeviction, or accept evictions (--redis-eviction accept)
$ curl -s 127.0.0.1:7979/metrics | grep mcp_redis_
mcp_redis_evicted_keys{node="node1"} 1749
mcp_redis_evicting{node="node1"} 1
` + "```" + `

The node keeps serving what it is sent; its readiness failing takes it out of a
Kubernetes Service and stops a rollout there. ` + "`--redis-eviction refuse`" + ` stops the node at
start-up instead (a policy changed later then fails readiness), and ` + "`accept`" + ` logs the
same at warn and stays ready. Keys Redis evicted (` + "`evicted_keys`" + ` of INFO stats, summed over
the primaries) are exported as ` + "`mcp_redis_evicted_keys`" + ` and, when they grew since the last
check, logged at warn at most once a minute (` + "`\"Redis evicted keys: sessions, streams and tasks\n" +
	"of this deployment may be gone\"`" + `, with ` + "`evicted_since_last_warning`" + `). A Redis that refuses ` + "`INFO`" + `
(an ACL user without it) is told of once at warn, and the node runs without the check.
ACL users of the deployment need ` + "`+info`" + ` for it.

**Memory.** What each item costs Redis, measured on Redis 7.0 (jemalloc) as the growth
of ` + "`INFO memory`" + `'s ` + "`used_memory`" + ` over a batch of items made by one node (the keys' own
` + "`MEMORY USAGE`" + `, by kind, is printed beside it):
` + "`MCP_MEASURE_REDIS=1 go test -run TestRedisMemoryPerItem -v ./mcp/`" + `.

| item | bytes | lives |
| --- | --- | --- |
| a legacy session (initialize; its record, its entry in the live set) | 1,314 | ` + "`--session-ttl`" + ` after its last request |
| a session's open GET stream (its claim, meta, place in the session's stream LRU, owner key) | 2,678 | while open, then ` + "`--history-ttl`" + ` |
| a streamed call's history (meta, LRU entry, owner key: one progress event and the result) | 1,082 | ` + "`--history-ttl`" + ` after its last event |
| a recorded event (a progress notification of about 130 bytes of JSON) | 213 | with its stream; at most ` + "`--max-events`" + ` per stream |
| a task (2025-11-25, ended, its short result kept; the owner's and the run index's entries) | 3,465 | ` + "`--task-ttl`" + ` (or the client's) |

A deployment needs about sessions × 1.3 KB + open GET and listen streams × 2.7 KB +
streamed calls per ` + "`--history-ttl`" + ` × (1.1 KB + 0.2 KB per event and the size of the
events' JSON beyond 130 bytes) + live tasks × 3.5 KB and their results. For example,
10,000 sessions each holding a GET stream, and 50 streamed calls a second of 10 events
each: 13 MB + 27 MB + 50 × 600 s × 3.1 KB = 93 MB, about 135 MB; set ` + "`maxmemory`" + ` with room
above it (Redis's own buffers, replication and AOF rewrites), and watch ` + "`used_memory`" + `.
`
