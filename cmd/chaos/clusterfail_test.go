package main

import (
	"testing"
	"time"
)

// The cluster-failover scenario in short: three nodes on a Redis Cluster
// of six servers behind nginx, under the chaos load (progress calls with
// their GET streams, sampling, 2026-07-28 echo and MRTR, listen streams,
// the prober); the primary holding the most keys killed (kill -9), then
// CLUSTER FAILOVER on another primary's replica. Every call ends (none
// hung), no event is lost or duplicated, every node serves within
// servedWithin of cluster_state:ok (the scenario's own check), and the
// prober's outage stays under 8 s.
//
// Before the nodes followed a Cluster's failover, one node answered 503
// "the cluster bus is reconnecting" until the load ended (a shard's
// pub/sub connection re-subscribed its channels in one SSUBSCRIBE, which
// the shard refused: CROSSSLOT), the heartbeats and calls of the killed
// primary's slots were refused by its address until go-redis's periodic
// reload of the slot map, and after CLUSTER FAILOVER the old primary
// ended the sharded subscriptions of its slots unseen.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-servers, three nodes and nginx")
	}
	cfg := config{duration: 20 * time.Second, bound: 30 * time.Second, progress: 6, sampling: 3, modern: 3, listeners: 3, logLevel: "warn"}
	r := runScenario(clusterFailover(4*time.Second, 4*time.Second), cfg)
	t.Log(r.row())
	for _, n := range r.st.notes {
		t.Log(n)
	}
	st := r.st
	if st.hung > 0 || st.lost > 0 || st.dup > 0 || st.unclear > 0 {
		t.Errorf("%d hung, %d events lost, %d duplicated, %d unclear errors; want none", st.hung, st.lost, st.dup, st.unclear)
	}
	for _, f := range r.failures {
		t.Errorf("check failed: %s", f)
	}
	if r.faults != 2 {
		t.Errorf("%d faults, want 2 (kill -9, CLUSTER FAILOVER)", r.faults)
	}
	if r.recovery >= 8*time.Second {
		t.Errorf("the prober failed until %v after a fault, want under 8s", r.recovery)
	}
	if st.completed == 0 {
		t.Errorf("no call completed")
	}
}
