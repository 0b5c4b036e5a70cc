package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// The experimental tasks of 2025-11-25 on one node: capability, tool
// execution.taskSupport and its mismatch errors, CreateTaskResult,
// tasks/get, tasks/list, tasks/cancel, tasks/result (blocking, with the
// task's elicitation on its stream), status and progress notifications
// on the GET stream, and tasks bound to their session.

// legacyTaskTools registers the tools of these tests; gate releases "job".
func legacyTaskTools(gate chan struct{}, cancelled chan struct{}) func(*mcp.Server) {
	return func(s *mcp.Server) {
		mcp.AddTool(s, mcp.Tool{Name: "job", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			_ = req.Progress(ctx, 1, 2, "started")
			select {
			case <-gate:
			case <-ctx.Done():
				cancelled <- struct{}{}
				return "", ctx.Err()
			}
			id, _ := req.Task()
			return "job done in task " + id, nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "task_only", TaskSupport: mcp.TaskRequired}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			return "ran as a task", nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "broken", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			return "", errors.New("it broke")
		})
		mcp.AddTool(s, mcp.Tool{Name: "ask_name", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("hello %v", res.Content["name"]), nil
		})
	}
}

// callResult returns the final response's result as a map, or its error.
func callResult(t *testing.T, resp *mcptest.Response) (map[string]any, *jsonrpc.Error) {
	t.Helper()
	f := resp.Final()
	if f == nil {
		t.Fatalf("no response (status %d, body %q)", resp.Status, resp.Body)
	}
	if f.Error != nil {
		return nil, f.Error
	}
	var m map[string]any
	if err := json.Unmarshal(f.Result, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func mustResult(t *testing.T, resp *mcptest.Response, what string) map[string]any {
	t.Helper()
	m, e := callResult(t, resp)
	if e != nil {
		t.Fatalf("%s: error %d %q, want a result", what, e.Code, e.Message)
	}
	return m
}

func mustCode(t *testing.T, resp *mcptest.Response, what string, code int64) {
	t.Helper()
	m, e := callResult(t, resp)
	if e == nil || e.Code != code {
		t.Fatalf("%s: got %v / %v, want error %d", what, m, e, code)
	}
}

// startTask calls tool as a task and returns the task of its CreateTaskResult.
func startLegacyTask(t *testing.T, c *mcptest.Client, tool string, progress bool) map[string]any {
	t.Helper()
	p := toolCall(tool, nil, progress)
	p["task"] = map[string]any{"ttl": 60000}
	res := mustResult(t, c.Call("tools/call", p, nil), "tools/call "+tool)
	task, _ := res["task"].(map[string]any)
	if task == nil || task["taskId"] == "" || task["status"] != "working" || task["ttl"] != float64(60000) ||
		task["createdAt"] == nil || task["lastUpdatedAt"] == nil {
		t.Fatalf("tools/call %s as a task: got %v, want CreateTaskResult {task: working, ttl 60000}", tool, res)
	}
	return task
}

func TestLegacyTasksCapabilityAndTools(t *testing.T) {
	n := newNode(t, &nodeOptions{Setup: legacyTaskTools(make(chan struct{}), make(chan struct{}, 1))})
	for _, v := range []string{mcp.Version20251125, mcp.Version20250618} {
		c := mcptest.New(t, n.url)
		resp := c.Call("initialize", map[string]any{"protocolVersion": v, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "t", "version": "1"}}, nil)
		var res struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		resp.Result(t, &res)
		tasks := string(res.Capabilities["tasks"])
		want := `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`
		if v == mcp.Version20250618 {
			want = ""
		}
		if tasks != want {
			t.Errorf("%s: capabilities.tasks %s, want %q", v, tasks, want)
		}
	}

	c := session(t, n.url, mcp.Version20251125, nil)
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	c.Call("tools/list", nil, nil).Result(t, &list)
	support := map[string]any{}
	for _, tool := range list.Tools {
		if ex, ok := tool["execution"].(map[string]any); ok {
			support[tool["name"].(string)] = ex["taskSupport"]
		}
	}
	if support["job"] != "optional" || support["task_only"] != "required" || support["echo"] != nil {
		t.Errorf("execution.taskSupport: got %v, want job optional, task_only required, echo absent", support)
	}
	old := session(t, n.url, mcp.Version20250618, nil)
	var oldList struct {
		Tools []map[string]any `json:"tools"`
	}
	old.Call("tools/list", nil, nil).Result(t, &oldList)
	for _, tool := range oldList.Tools {
		if tool["execution"] != nil {
			t.Errorf("2025-06-18 tools/list: %v has execution", tool["name"])
		}
	}

	p := toolCall("echo", map[string]any{"text": "x"}, false)
	p["task"] = map[string]any{}
	mustCode(t, c.Call("tools/call", p, nil), "echo (forbidden) with a task", jsonrpc.CodeMethodNotFound)
	mustCode(t, c.Call("tools/call", toolCall("task_only", nil, false), nil), "task_only without a task", jsonrpc.CodeMethodNotFound)
	p = toolCall("job", nil, false)
	p["task"] = map[string]any{"ttl": 1}
	mustCode(t, c.Call("tools/call", p, nil), "a ttl below the range", jsonrpc.CodeInvalidParams)
	mustCode(t, c.Call("tasks/get", map[string]any{"taskId": "nope"}, nil), "tasks/get of an unknown task", jsonrpc.CodeInvalidParams)
	mustCode(t, c.Call("tasks/list", map[string]any{"cursor": "garbage"}, nil), "tasks/list with a bad cursor", jsonrpc.CodeInvalidParams)
	mustCode(t, old.Call("tasks/list", nil, nil), "tasks/list on 2025-06-18", jsonrpc.CodeMethodNotFound)

	task := startLegacyTask(t, c, "task_only", false)
	res := mustResult(t, c.Call("tasks/result", map[string]any{"taskId": task["taskId"]}, nil), "tasks/result")
	if text := fmt.Sprint(res["content"]); text != "[map[text:ran as a task type:text]]" {
		t.Errorf("tasks/result: content %s, want the tool's text", text)
	}
	if meta, _ := res["_meta"].(map[string]any); fmt.Sprint(meta[mcp.MetaRelatedTask]) != fmt.Sprintf("map[taskId:%s]", task["taskId"]) {
		t.Errorf("tasks/result: _meta %v, want the related task", res["_meta"])
	}
	got := mustResult(t, c.Call("tasks/get", map[string]any{"taskId": task["taskId"]}, nil), "tasks/get")
	if got["status"] != "completed" || got["pollInterval"] == nil || got["ttl"] != float64(60000) {
		t.Errorf("tasks/get after the result: %v, want completed with ttl and pollInterval", got)
	}
	mustCode(t, c.Call("tasks/cancel", map[string]any{"taskId": task["taskId"]}, nil), "tasks/cancel of a completed task", jsonrpc.CodeInvalidParams)
}

func TestLegacyTaskLifecycle(t *testing.T) {
	gate, cancelled := make(chan struct{}), make(chan struct{}, 4)
	n := newNode(t, &nodeOptions{Setup: legacyTaskTools(gate, cancelled)})
	c := session(t, n.url, mcp.Version20251125, map[string]any{"elicitation": map[string]any{}})
	get := getStream(t, c, n.url, "")

	task := startLegacyTask(t, c, "job", true)
	id := task["taskId"].(string)
	if got := mustResult(t, c.Call("tasks/get", map[string]any{"taskId": id}, nil), "tasks/get"); got["status"] != "working" {
		t.Fatalf("tasks/get: %v, want working", got)
	}
	done := make(chan map[string]any, 1)
	go func() {
		m, _ := callResult(t, c.Call("tasks/result", map[string]any{"taskId": id}, nil))
		done <- m
	}()
	select {
	case m := <-done:
		t.Fatalf("tasks/result returned %v before the task ended", m)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	var res map[string]any
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("tasks/result did not return once the task completed")
	}
	if fmt.Sprint(res["content"]) != fmt.Sprintf("[map[text:job done in task %s type:text]]", id) {
		t.Errorf("tasks/result: %v, want the job's text", res)
	}
	related := func(m *jsonrpc.Message) bool {
		var p struct {
			Meta map[string]map[string]any `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		return p.Meta[mcp.MetaRelatedTask]["taskId"] == id
	}
	if !get.WaitFor(5*time.Second, func(ms []*jsonrpc.Message) bool {
		var progress, completed bool
		for _, m := range ms {
			switch m.Method {
			case "notifications/progress":
				var p map[string]any
				_ = json.Unmarshal(m.Params, &p)
				progress = progress || related(m) && p["progressToken"] == "tok"
			case "notifications/tasks/status":
				var p map[string]any
				_ = json.Unmarshal(m.Params, &p)
				completed = completed || p["taskId"] == id && p["status"] == "completed"
			}
		}
		return progress && completed
	}) {
		t.Fatalf("GET stream: %d messages, want the task's progress (related-task, token tok) and status completed", len(get.Messages()))
	}

	// isError: the task fails and tasks/result returns the tool result.
	task = startLegacyTask(t, c, "broken", false)
	res = mustResult(t, c.Call("tasks/result", map[string]any{"taskId": task["taskId"]}, nil), "tasks/result of broken")
	if res["isError"] != true {
		t.Errorf("tasks/result of a tool error: %v, want the isError result", res)
	}
	if got := mustResult(t, c.Call("tasks/get", map[string]any{"taskId": task["taskId"]}, nil), "tasks/get"); got["status"] != "failed" ||
		got["statusMessage"] != "the tool reported an error: it broke" {
		t.Errorf("tasks/get of a tool error: %v, want failed with the tool's text", got)
	}

	// Cancel: the handler's context ends; a second cancel is refused.
	gate2 := startLegacyTask(t, c, "ask_name", false)
	mustResult(t, c.Call("tasks/cancel", map[string]any{"taskId": gate2["taskId"]}, nil), "tasks/cancel")
	got := mustResult(t, c.Call("tasks/get", map[string]any{"taskId": gate2["taskId"]}, nil), "tasks/get")
	if got["status"] != "cancelled" {
		t.Errorf("tasks/get after cancel: %v, want cancelled", got)
	}
	mustCode(t, c.Call("tasks/cancel", map[string]any{"taskId": gate2["taskId"]}, nil), "a second tasks/cancel", jsonrpc.CodeInvalidParams)

	// input_required: the elicitation goes out on tasks/result's stream
	// with the related-task _meta; the answer goes back to the task.
	task = startLegacyTask(t, c, "ask_name", false)
	id = task["taskId"].(string)
	mcptest.Eventually(t, 5*time.Second, "input_required", func() bool {
		got, _ := callResult(t, c.Call("tasks/get", map[string]any{"taskId": id}, nil))
		return got["status"] == "input_required"
	})
	var asked *jsonrpc.Message
	resp := c.Call("tasks/result", map[string]any{"taskId": id}, func(m *jsonrpc.Message) *jsonrpc.Message {
		if m.Kind() != jsonrpc.KindRequest {
			return nil
		}
		asked = m
		return &jsonrpc.Message{ID: m.ID, Result: json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
	})
	res = mustResult(t, resp, "tasks/result of ask_name")
	if asked == nil || asked.Method != "elicitation/create" || !related(asked) {
		t.Fatalf("tasks/result stream: request %v, want elicitation/create with the related task", asked)
	}
	if fmt.Sprint(res["content"]) != "[map[text:hello Ada type:text]]" {
		t.Errorf("tasks/result after input: %v, want hello Ada", res)
	}
}

func TestLegacyTasksOwnedBySession(t *testing.T) {
	n := newNode(t, &nodeOptions{Setup: legacyTaskTools(make(chan struct{}), make(chan struct{}, 8)), Server: mcp.ServerOptions{PageSize: 2}})
	a := session(t, n.url, mcp.Version20251125, nil)
	b := session(t, n.url, mcp.Version20251125, nil)
	want := map[string]bool{}
	for range 5 {
		want[startLegacyTask(t, a, "task_only", false)["taskId"].(string)] = true
	}
	other := startLegacyTask(t, b, "task_only", false)["taskId"].(string)
	got := map[string]bool{}
	cursor, pages := "", 0
	for {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		res := mustResult(t, a.Call("tasks/list", p, nil), "tasks/list")
		pages++
		list, _ := res["tasks"].([]any)
		if len(list) > 2 {
			t.Fatalf("tasks/list page of %d, want at most 2", len(list))
		}
		for _, x := range list {
			got[x.(map[string]any)["taskId"].(string)] = true
		}
		cursor, _ = res["nextCursor"].(string)
		if cursor == "" || pages > 5 {
			break
		}
	}
	if len(got) != 5 || got[other] {
		t.Fatalf("tasks/list of a: got %v over %d pages, want its 5 tasks and not b's", got, pages)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("tasks/list of a: %s missing", k)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		mustCode(t, a.Call(m, map[string]any{"taskId": other}, nil), m+" of another session's task", jsonrpc.CodeInvalidParams)
	}
}
