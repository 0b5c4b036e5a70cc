package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// servedWithin is how soon after a Redis Cluster reports cluster_state:ok
// again every node must serve: a new session and a call on it, asked of
// the node itself.
const servedWithin = 5 * time.Second

// redisCluster is the cluster-failover scenario's Redis: a Cluster of
// three primaries with a replica each (cluster-node-timeout 2 s), the
// nodes on redis-cluster:// the three primaries, as an operator writes
// it.
type redisCluster struct {
	servers []*redistest.Server
	// killAt is when the primary holding the most keys is killed;
	// failoverAfter, how long after the Cluster is whole again a replica
	// of another primary takes its slots over (CLUSTER FAILOVER).
	killAt, failoverAfter time.Duration
}

// clusterFailover is the cluster-failover scenario with its two faults
// at these times.
func clusterFailover(killAt, failoverAfter time.Duration) scenario {
	rc := &redisCluster{killAt: killAt, failoverAfter: failoverAfter}
	return scenario{"cluster-failover", fmt.Sprintf("Redis Cluster, three primaries with a replica each (cluster-node-timeout 2 s), nodes on redis-cluster:// the primaries: kill -9 of the primary holding the most keys at %s, CLUSTER FAILOVER on another primary's replica %s after the Cluster is whole again; every node must serve within %s of cluster_state:ok", killAt, failoverAfter, servedWithin),
		rc.setup, rc.run}
}

// setup starts the Cluster before the first node and points the nodes
// at its primaries.
func (rc *redisCluster) setup(e *env, o *clustertest.Options) {
	o.NodeArgs = func(c *clustertest.Cluster, i int) []string {
		if rc.servers == nil {
			rc.servers = redistest.StartClusterWith(e.h, 3, redistest.Options{Replicas: 1})
		}
		var addrs []string
		for _, s := range rc.servers[:3] {
			addrs = append(addrs, s.Addr())
		}
		return []string{"--redis-url", "redis-cluster://" + strings.Join(addrs, ",")}
	}
}

func (rc *redisCluster) run(ctx context.Context, e *env) {
	if !sleep(ctx, rc.killAt) {
		return
	}
	victim := redistest.MostKeys(rc.servers)
	if victim == nil {
		e.failCheck("no primary answers")
		return
	}
	keys := victim.Keys()
	e.fault()
	promoted, ok, err := redistest.KillPrimary(rc.servers, victim, 30*time.Second)
	if err != nil {
		e.failCheck("kill -9 of %s: %v", victim.Addr(), err)
		return
	}
	rc.served(e, fmt.Sprintf("kill -9 of %s (%d keys)", victim.Addr(), keys), ok)
	if !sleep(ctx, rc.failoverAfter) {
		return
	}
	var replica *redistest.Server
	for _, p := range rc.servers {
		if p != promoted && p.Running() && p.Primary() {
			if rs := p.Replicas(rc.servers); len(rs) > 0 {
				replica = rs[0]
				break
			}
		}
	}
	if replica == nil {
		e.failCheck("no primary with a replica left for CLUSTER FAILOVER")
		return
	}
	e.fault()
	ok, err = replica.Failover(rc.servers, 30*time.Second)
	if err != nil {
		e.failCheck("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
		return
	}
	rc.served(e, "CLUSTER FAILOVER on "+replica.Addr(), ok)
}

// served asks every node, on its own address, for a new session and an
// echo on it until one succeeds, from the moment the Cluster reported
// cluster_state:ok; a node that does not serve within servedWithin fails
// the scenario. Each node's time is logged.
func (rc *redisCluster) served(e *env, what string, ok time.Time) {
	var wg sync.WaitGroup
	took := make([]time.Duration, len(e.c.Nodes))
	for i, n := range e.c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			took[i] = serves(n, ok, 30*time.Second)
		}()
	}
	wg.Wait()
	var parts []string
	for i, d := range took {
		parts = append(parts, fmt.Sprintf("%s %s", e.c.Nodes[i].ID, d.Round(10*time.Millisecond)))
		if d > servedWithin {
			e.failCheck("%s: %s served %s after cluster_state:ok, want within %s", what, e.c.Nodes[i].ID, d.Round(10*time.Millisecond), servedWithin)
		}
	}
	e.h.Logf("%s: %s; nodes serving again after cluster_state:ok: %s", e.h.name, what, strings.Join(parts, ", "))
}

// serves returns how long after from node n first answered a new
// session and an echo on it (limit when it never did).
func serves(n *clustertest.Node, from time.Time, limit time.Duration) time.Duration {
	cl := newClient(n.URL, newStats(), 2*time.Second)
	defer cl.hc.CloseIdleConnections()
	for time.Since(from) < limit {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := cl.initialize(ctx)
		cancel()
		if err == nil {
			if final, _ := cl.call(s, "echo", map[string]any{"text": "served"}, 0); final != nil && final.Error == nil {
				return time.Since(from)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return limit
}

// failCheck records a failed check of the scenario.
func (e *env) failCheck(format string, args ...any) {
	e.mu.Lock()
	e.checks = append(e.checks, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}
