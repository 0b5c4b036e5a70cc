package main

import (
	"context"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
)

// The scenarios, in the order they run: each a fault made while the load
// runs (see runScenario).
var scenarios = []scenario{
	{"kill9", "kill -9 of a node every 15 s, restarted 3 s later with the same node id", nil,
		func(ctx context.Context, e *env) {
			for i := 0; sleep(ctx, 12*time.Second); i++ {
				n := e.c.Nodes[i%len(e.c.Nodes)]
				e.fault()
				n.Kill()
				time.Sleep(3 * time.Second)
				n.Restart()
			}
		}},
	{"rolling", "SIGTERM rolling restart (drain delay 1 s), each node restarted with its id; nginx's upstreams follow /readyz as a Kubernetes ingress follows endpoints", nil,
		func(ctx context.Context, e *env) { rolling(ctx, e, true) }},
	{"rolling-static", "the same with nginx's upstreams fixed (docker-compose, scripts/cluster.sh): nothing takes the node out before it closes its listener", nil,
		func(ctx context.Context, e *env) { rolling(ctx, e, false) }},
	{"redis", "Redis down 5 s, restarted without persistence (empty)", nil, redisOutage},
	{"aof", "Redis down 5 s (SIGKILL), restarted from its AOF (appendfsync always)",
		func(e *env, o *clustertest.Options) { o.RedisOptions.Persist = true }, redisOutage},
	{"toxiproxy", "Redis behind toxiproxy: 300±100 ms latency for 10 s, then a 10 s cut (data dropped, connections held)",
		func(e *env, o *clustertest.Options) { withToxics(e, o) },
		func(ctx context.Context, e *env) {
			if !sleep(ctx, 5*time.Second) {
				return
			}
			e.fault()
			e.tox.add(e.h, `{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":300,"jitter":100}}`)
			time.Sleep(10 * time.Second)
			e.tox.remove(e.h, "lat")
			if !sleep(ctx, 10*time.Second) {
				return
			}
			e.fault()
			cut(e, 10*time.Second)
		}},
	{"sentinel", "Sentinel failover: the primary is killed; 3 sentinels promote the replica (nodes on redis-sentinel://)",
		func(e *env, o *clustertest.Options) { withSentinels(e, o) },
		func(ctx context.Context, e *env) {
			if !sleep(ctx, 10*time.Second) {
				return
			}
			e.fault()
			e.sent.primary.Kill()
			if !sleep(ctx, 25*time.Second) {
				return
			}
			// The old primary comes back; the sentinels make it a replica.
			e.sent.primary.Restart()
		}},
	{"blackhole", "Redis behind toxiproxy: 2 ms latency, then for 15 s (longer than the Redis client's four tries of 3 s) every reply held back on every node's connections, held open (the commands still run)",
		func(e *env, o *clustertest.Options) { withToxics(e, o) },
		func(ctx context.Context, e *env) {
			if !sleep(ctx, 5*time.Second) {
				return
			}
			e.tox.add(e.h, `{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":2}}`)
			defer e.tox.remove(e.h, "lat")
			if !sleep(ctx, 25*time.Second) {
				return
			}
			e.fault()
			e.tox.add(e.h, `{"name":"hole","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
			time.Sleep(15 * time.Second)
			e.tox.remove(e.h, "hole")
			sleep(ctx, time.Hour)
		}},
	{"failover", "Sentinel failover ordered by SENTINEL FAILOVER (the primary is demoted while it still takes writes), and back 30 s later",
		func(e *env, o *clustertest.Options) { withSentinels(e, o) },
		func(ctx context.Context, e *env) {
			for _, at := range []time.Duration{10 * time.Second, 30 * time.Second} {
				if !sleep(ctx, at) {
					return
				}
				e.fault()
				e.sent.failover(e.h)
			}
		}},
	{"buscut", "one node cut off from Redis (its bus and store) for 10 s while it still serves HTTP",
		func(e *env, o *clustertest.Options) { withToxics(e, o) },
		func(ctx context.Context, e *env) {
			if !sleep(ctx, 10*time.Second) {
				return
			}
			e.fault()
			cut(e, 10*time.Second, 0)
		}},
	{"redis-evict", "Redis under volatile-lru: maxmemory set 3 MiB above use and keys without a TTL written past it for 25 s (Redis evicts the cluster's keys), then freed", nil, memoryScenario("volatile-lru")},
	{"redis-oom", "Redis under noeviction: the same fill (Redis refuses the writes that need memory), then freed", nil, memoryScenario("noeviction")},
	{"upgrade", "rolling upgrade from the previous release (-previous) to this build under load, each node drained and replaced with its id (nginx following /readyz), then the same downgrade; the second leg of sampling, MRTR, task and session-change exchanges aimed at the other release", upgradeSetup, upgrade},
	{"upgrade-cluster", "the same on a one-node Redis Cluster (nodes on redis-cluster://): the nodes of this build read sharded channels and publish sharded once every node runs this build, classic again as the previous release returns",
		func(e *env, o *clustertest.Options) { upgradeSetup(e, o); onCluster(o) }, upgrade},
	clusterFailover(10*time.Second, 20*time.Second),
}
