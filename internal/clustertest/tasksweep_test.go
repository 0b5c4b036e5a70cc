package clustertest_test

// Flow 10 with nobody polling: a node killed with SIGKILL leaves tasks
// that a live node's sweep ends (failed, or run again when idempotent)
// within about the lease time, in both eras.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// updatedAt reads a task's lastUpdatedAt.
func updatedAt(t *testing.T, task map[string]any) time.Time {
	t.Helper()
	s, _ := task["lastUpdatedAt"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("lastUpdatedAt %q: %v", s, err)
	}
	return at
}

// After SIGKILL of the running node nobody reads the tasks; read once
// after the lease, the non-idempotent task failed back when the lease
// ended (not at the read) and the idempotent one already ran again.
func TestTaskSweptWithoutReadersOnRedis(t *testing.T) {
	t.Parallel()
	c := startTaskCluster(t)
	a, b := c.Nodes[0], c.Nodes[1]
	cl := mcptest.New(t)
	lost := startTask(t, cl, a.URL, "confirm_delete", map[string]any{"filename": "z.txt"})
	waitTask(t, cl, b.URL, lost, soon, status("input_required"))
	redo := startTask(t, cl, a.URL, "slow_compute", map[string]any{"seconds": 1, "label": "swept"})
	a.Kill()
	killed := time.Now()
	time.Sleep(3*leaseTTL + 2*time.Second)
	read := time.Now()
	failed := getTask(t, cl, b.URL, lost)
	if failed["status"] != "failed" {
		t.Fatalf("the lost task, read %v after the kill: %v, want failed", read.Sub(killed), failed)
	}
	if e, _ := failed["error"].(map[string]any); e["code"] != float64(jsonrpc.CodeNodeLost) {
		t.Fatalf("error %v, want the node-lost code", failed["error"])
	}
	if d := updatedAt(t, failed).Sub(killed); d > 2*leaseTTL+500*time.Millisecond {
		t.Fatalf("the lost task failed %v after the kill (read at %v); lease %v", d, read.Sub(killed), leaseTTL)
	}
	done := getTask(t, cl, b.URL, redo)
	if done["status"] != "completed" {
		t.Fatalf("the idempotent task, read %v after the kill: %v, want completed", read.Sub(killed), done)
	}
	if msg, _ := done["statusMessage"].(string); !strings.Contains(msg, "attempt 2") {
		t.Fatalf("statusMessage %q, want attempt 2", msg)
	}
}

// A 2025-11-25 task whose node is killed with SIGKILL: a tool that is
// not idempotent fails within the lease time; an idempotent one runs
// again on another node, and tasks/result on a third node returns that
// run's result.
func TestLegacyTaskOfKilledNodeOnRedis(t *testing.T) {
	t.Parallel()
	c := startTaskCluster(t)
	a, b, cc := c.Nodes[0].URL, c.Nodes[1].URL, c.Nodes[2].URL
	cl := mcptest.New(t, a, b, cc)
	cl.Initialize(mcp.Version20251125, map[string]any{"elicitation": map[string]any{}})
	lost := legacyStart(t, cl, a, "confirm_delete", map[string]any{"filename": "y.txt"})
	legacyWait(t, cl, b, lost, "input_required")
	redo := legacyStart(t, cl, a, "slow_compute", map[string]any{"seconds": 1, "label": "again"})
	c.Nodes[0].Kill()
	killed := time.Now()
	cl.URLs = []string{b, cc}
	legacyWait(t, cl, b, lost, "failed")
	if d := time.Since(killed); d > 3*leaseTTL {
		t.Fatalf("the lost task failed %v after the kill; lease %v", d, leaseTTL)
	}
	got := taskResult(t, legacyCall(t, cl, b, "tasks/get", map[string]any{"taskId": lost}, nil))
	if d := updatedAt(t, got).Sub(killed); d > 2*leaseTTL+500*time.Millisecond {
		t.Fatalf("the lost task's record changed %v after the kill; lease %v", d, leaseTTL)
	}
	res := legacyCall(t, cl, cc, "tasks/result", map[string]any{"taskId": redo}, nil)
	if res.Error != nil {
		t.Fatalf("tasks/result on C: error %d %q", res.Error.Code, res.Error.Message)
	}
	if b, _ := json.Marshal(res.Result); !strings.Contains(string(b), "computed again") || !strings.Contains(string(b), redo) {
		t.Fatalf("tasks/result on C: %s, want the new run's result with the related task", b)
	}
	final := taskResult(t, legacyCall(t, cl, b, "tasks/get", map[string]any{"taskId": redo}, nil))
	if final["status"] != "completed" || !strings.Contains(final["statusMessage"].(string), "attempt 2") {
		t.Fatalf("the idempotent task after the result: %v, want completed by attempt 2", final)
	}
}
