package clustertest_test

// Flow 10 on 2025-11-25 sessions (the experimental tasks) on real
// processes and a real Redis: created on A, polled on B, cancelled on C;
// tasks/result waiting on B while A completes; an elicitation inside a
// task carried by tasks/result on C and answered through B;
// tasks/list of the session on any node.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// legacyCall sends a request of cl's session to url; handler answers the
// requests on its stream. It returns the final message.
func legacyCall(t *testing.T, cl *mcptest.Client, url, method string, params any, handler func(*jsonrpc.Message) *jsonrpc.Message) *jsonrpc.Message {
	t.Helper()
	_, body := mcptest.Request(t, cl, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), 2*soon)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, body, nil, handler)
	if err != nil || resp.Final() == nil {
		t.Fatalf("%s at %s: %v %+v", method, url, err, resp)
	}
	return resp.Final()
}

func legacyStart(t *testing.T, cl *mcptest.Client, url, tool string, args map[string]any) string {
	t.Helper()
	r := taskResult(t, legacyCall(t, cl, url, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}}, nil))
	task, _ := r["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "working" {
		t.Fatalf("tools/call %s as a task: %v, want CreateTaskResult", tool, r)
	}
	return id
}

func legacyWait(t *testing.T, cl *mcptest.Client, url, id, status string) {
	t.Helper()
	clustertest.WaitFor(t, soon, "task "+id+" "+status, func() bool {
		return taskResult(t, legacyCall(t, cl, url, "tasks/get", map[string]any{"taskId": id}, nil))["status"] == status
	})
}

func TestLegacyTaskAcrossNodesOnRedis(t *testing.T) {
	t.Parallel()
	c := startTaskCluster(t)
	a, b, cc := c.Nodes[0].URL, c.Nodes[1].URL, c.Nodes[2].URL
	cl := mcptest.New(t, a, b, cc)
	cl.Initialize(mcp.Version20251125, map[string]any{"elicitation": map[string]any{}})

	// Created on A, polled on B, cancelled on C.
	slow := legacyStart(t, cl, a, "slow_compute", map[string]any{"seconds": 60})
	legacyWait(t, cl, b, slow, "working")
	if got := taskResult(t, legacyCall(t, cl, cc, "tasks/cancel", map[string]any{"taskId": slow}, nil)); got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel on C: %v", got)
	}
	legacyWait(t, cl, b, slow, "cancelled")

	// tasks/result waits on B while A completes.
	quick := legacyStart(t, cl, a, "slow_compute", map[string]any{"seconds": 0.5, "label": "pi"})
	res := taskResult(t, legacyCall(t, cl, b, "tasks/result", map[string]any{"taskId": quick}, nil))
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "computed pi") || !strings.Contains(string(b), quick) {
		t.Fatalf("tasks/result on B: %s, want the result with the related task", b)
	}

	// Input asked on A, carried by tasks/result on C, answered through B.
	ask := legacyStart(t, cl, a, "confirm_delete", map[string]any{"filename": "x.txt"})
	legacyWait(t, cl, b, ask, "input_required")
	cl.URLs = []string{b}
	res = taskResult(t, legacyCall(t, cl, cc, "tasks/result", map[string]any{"taskId": ask}, func(m *jsonrpc.Message) *jsonrpc.Message {
		if m.Kind() != jsonrpc.KindRequest || m.Method != "elicitation/create" {
			return nil
		}
		return &jsonrpc.Message{ID: m.ID, Result: json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
	}))
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "deleted x.txt") {
		t.Fatalf("tasks/result on C: %s, want deleted x.txt", b)
	}

	// The session's three tasks, listed on any node.
	list := taskResult(t, legacyCall(t, cl, cc, "tasks/list", map[string]any{}, nil))
	if tasks, _ := list["tasks"].([]any); len(tasks) != 3 {
		t.Fatalf("tasks/list on C: %v, want the session's 3 tasks", list)
	}
}
