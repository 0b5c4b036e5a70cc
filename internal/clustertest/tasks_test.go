package clustertest_test

// Flow 10 on real processes and a real Redis: a task whose node is
// killed with SIGKILL fails within the lease time (a tool that is not
// idempotent) or completes on another node (an idempotent one); tasks
// created on one node are answered and cancelled on others.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// taskCall sends a 2026-07-28 request of a client that negotiated the
// tasks extension to url and returns its final message.
func taskCall(t *testing.T, cl *mcptest.Client, url, method, name string, params map[string]any) *jsonrpc.Message {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{mcp.ExtensionTasks: map[string]any{}}},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "mcptest", "version": "1"},
	}
	_, body := mcptest.Request(t, cl, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), soon)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, body, mcptest.ModernHeaders(method, name), nil)
	if err != nil || resp.Final() == nil {
		t.Fatalf("%s at %s: %v %+v", method, url, err, resp)
	}
	return resp.Final()
}

// taskResult is the result object of a successful task request.
func taskResult(t *testing.T, m *jsonrpc.Message) map[string]any {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d %q", m.Error.Code, m.Error.Message)
	}
	var r map[string]any
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func startTask(t *testing.T, cl *mcptest.Client, url, tool string, args map[string]any) string {
	t.Helper()
	r := taskResult(t, taskCall(t, cl, url, "tools/call", tool, map[string]any{"name": tool, "arguments": args}))
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call %s: %v, want a task", tool, r)
	}
	return id
}

func getTask(t *testing.T, cl *mcptest.Client, url, id string) map[string]any {
	t.Helper()
	return taskResult(t, taskCall(t, cl, url, "tasks/get", id, map[string]any{"taskId": id}))
}

func waitTask(t *testing.T, cl *mcptest.Client, url, id string, within time.Duration, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	clustertest.WaitFor(t, within, "task "+id, func() bool {
		last = getTask(t, cl, url, id)
		return cond(last)
	})
	return last
}

// startTaskCluster starts three nodes with the conformance tool pack (its
// task fixtures) and a short lease.
func startTaskCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, clustertest.Options{Nodes: 3, Tools: "conformance", Args: []string{"--lease-ttl", leaseTTL.String()}})
}

func status(s string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["status"] == s }
}

func TestTaskAcrossNodesOnRedis(t *testing.T) {
	t.Parallel()
	c := startTaskCluster(t)
	a, b, cc := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	cl := mcptest.New(t)

	// Created on A, polled on B, cancelled on C.
	id := startTask(t, cl, a.URL, "slow_compute", map[string]any{"seconds": 60})
	if got := getTask(t, cl, b.URL, id); got["status"] != "working" {
		t.Fatalf("on B: %v", got)
	}
	if ack := taskResult(t, taskCall(t, cl, cc.URL, "tasks/cancel", id, map[string]any{"taskId": id})); ack["resultType"] != "complete" {
		t.Fatalf("cancel on C: %v", ack)
	}
	waitTask(t, cl, b.URL, id, soon, status("cancelled"))

	// Input asked on A, answered through C, result read on B.
	id = startTask(t, cl, a.URL, "confirm_delete", map[string]any{"filename": "x.txt"})
	got := waitTask(t, cl, b.URL, id, soon, status("input_required"))
	responses := map[string]any{}
	for k := range got["inputRequests"].(map[string]any) {
		responses[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	taskResult(t, taskCall(t, cl, cc.URL, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": responses}))
	done := waitTask(t, cl, b.URL, id, soon, status("completed"))
	if b, _ := json.Marshal(done["result"]); !strings.Contains(string(b), "deleted x.txt") {
		t.Fatalf("result %s", b)
	}
}

func TestTaskOfKilledNodeOnRedis(t *testing.T) {
	t.Parallel()
	c := startTaskCluster(t)
	a, b := c.Nodes[0], c.Nodes[1]
	cl := mcptest.New(t)
	// confirm_delete is not idempotent: it waits for input on A.
	lost := startTask(t, cl, a.URL, "confirm_delete", map[string]any{"filename": "y.txt"})
	waitTask(t, cl, b.URL, lost, soon, status("input_required"))
	// slow_compute is idempotent (idempotentHint): it runs again elsewhere.
	redo := startTask(t, cl, a.URL, "slow_compute", map[string]any{"seconds": 2, "label": "redo"})
	a.Kill()
	killed := time.Now()
	failed := waitTask(t, cl, b.URL, lost, soon, status("failed"))
	if d := time.Since(killed); d > 3*leaseTTL {
		t.Fatalf("the lost task failed %v after the kill; lease %v", d, leaseTTL)
	}
	if e, _ := failed["error"].(map[string]any); e["code"] != float64(jsonrpc.CodeNodeLost) {
		t.Fatalf("error %v, want the node-lost code", failed["error"])
	}
	done := waitTask(t, cl, b.URL, redo, soon, func(m map[string]any) bool { return m["status"] != "working" })
	if done["status"] != "completed" {
		t.Fatalf("the idempotent task: %v", done)
	}
	if msg, _ := done["statusMessage"].(string); !strings.Contains(msg, "attempt 2") {
		t.Fatalf("statusMessage %q, want the attempt shown", msg)
	}
}

// SIGTERM on the node running an idempotent task that outlasts the drain
// timeout: the node hands it over as it leaves, and another node runs it
// to completion (attempt 2).
func TestTaskDrainHandsOverOnRedis(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Tools: "conformance",
		Args: []string{"--lease-ttl", leaseTTL.String(), "--drain-timeout", "1s"}})
	a, b := c.Nodes[0], c.Nodes[1]
	cl := mcptest.New(t)
	id := startTask(t, cl, a.URL, "slow_compute", map[string]any{"seconds": 3, "label": "drain"})
	if err := a.Stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	done := waitTask(t, cl, b.URL, id, soon, func(m map[string]any) bool { return m["status"] != "working" })
	if msg, _ := done["statusMessage"].(string); done["status"] != "completed" || !strings.Contains(msg, "attempt 2") {
		t.Fatalf("after the drain: %v", done)
	}
}

// Redis restarts (keeping its data) while a task runs: the task still
// ends, with its result, never lost or stuck.
func TestTaskSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 2, Tools: "conformance",
		Args: []string{"--lease-ttl", leaseTTL.String()}, RedisOptions: redistest.Options{Persist: true}})
	a, b := c.Nodes[0], c.Nodes[1]
	cl := mcptest.New(t)
	id := startTask(t, cl, a.URL, "slow_compute", map[string]any{"seconds": 2, "label": "restart"})
	c.Redis.Restart()
	var last map[string]any
	clustertest.WaitFor(t, 3*soon, "the task to end after the restart", func() bool {
		m := taskCall(t, cl, b.URL, "tasks/get", id, map[string]any{"taskId": id})
		if m.Error != nil {
			return false // the store is back in a moment
		}
		last = taskResult(t, m)
		return last["status"] != "working"
	})
	if b, _ := json.Marshal(last["result"]); last["status"] != "completed" || !strings.Contains(string(b), "computed restart") {
		t.Fatalf("after the restart: %v", last)
	}
}
