package redis

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// TestTakeOverWritesThePreviousLayout: a take-over whose claim is taken
// with the update (cluster.TaskUpdate.Take) leaves the keys the
// previous release's take-over left (Claims.Claim of the run's claim,
// then the conditioned update): the same task hash, the same claim key
// with the same holder and TTL, the same run index. A node of either
// release reads the other's take-over as its own.
func TestTakeOverWritesThePreviousLayout(t *testing.T) {
	key, runner := "produce:task:T1", "node2.inc2"
	update := cluster.TaskUpdate{IfRunner: "node1.inc1", SetRunner: &runner, NextAttempt: true, ClearInputs: true,
		Status: cluster.TaskWorking, Message: "attempt 2, taken over from a lost node"}
	takeOver := func(t *testing.T, take func(ctx context.Context, be *cluster.Backend) error) map[string]keyDump {
		be, c := compatBackend(t)
		ctx := t.Context()
		created := time.Date(2026, 11, 24, 7, 44, 19, 0, time.UTC)
		task := cluster.Task{ID: "T1", OwnerKey: "1.2.3.4", Status: "working", Created: created, Updated: created, TTL: compatTTL, PollInterval: time.Second,
			Method: "tools/call", Params: []byte(`{"name":"echo_task"}`), Meta: []byte(`{"v":"2026-07-28"}`), Runner: "node1.inc1", Attempt: 1, Idempotent: true,
			Inputs: map[string][]byte{"k1": []byte(`{}`)}}
		if _, err := be.Tasks.Create(ctx, task, 100, &cluster.TaskClaim{Key: key, Owner: "node1.inc1/a", TTL: compatTTL}); err != nil {
			t.Fatal(err)
		}
		if err := take(ctx, be); err != nil {
			t.Fatal(err)
		}
		return normalized(dumpState(ctx, t, c))
	}
	previous := takeOver(t, func(ctx context.Context, be *cluster.Backend) error {
		if _, err := be.Claims.Claim(ctx, key, "node2.inc2/b", compatTTL); err != nil {
			return err
		}
		_, err := be.Tasks.Update(ctx, "T1", update)
		return err
	})
	this := takeOver(t, func(ctx context.Context, be *cluster.Backend) error {
		u := update
		u.Take, u.TakeFrom = &cluster.TaskClaim{Key: key, Owner: "node2.inc2/b", TTL: compatTTL}, "node1.inc1/a"
		_, err := be.Tasks.Update(ctx, "T1", u)
		return err
	})
	if !reflect.DeepEqual(this, previous) {
		for k, g := range this {
			if w, ok := previous[k]; !ok || !reflect.DeepEqual(g, w) {
				t.Errorf("key %s:\n this release writes %s\n the previous release wrote %s", k, describe(g), describe(w))
			}
		}
		for k := range previous {
			if _, ok := this[k]; !ok {
				t.Errorf("key %s is not written", k)
			}
		}
	}
	if c := this["mcp:c:"+key]; c.Str == nil || *c.Str != "node2.inc2/b" {
		t.Errorf("the run's claim after the take-over: %s, want held by node2.inc2/b", describe(c))
	}
}
