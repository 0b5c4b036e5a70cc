package inproc_test

// Flow 10: durable tasks of the 2026-07-28 extension on three in-process
// nodes, each request pinned to a node: any node answers for a task, a
// cancel reaches the handler wherever it runs, input is answered through
// any node, and a killed node's task fails (or, idempotent, runs again
// elsewhere) within the lease time.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// taskRig is a cluster whose task tools the test steers.
type taskRig struct {
	*inproc.Cluster
	started   chan string // the node whose "work" or "redo" handler started
	cancelled chan string // the node whose "work" handler saw its context end
}

func newTaskRig(t *testing.T) *taskRig {
	r := &taskRig{started: make(chan string, 16), cancelled: make(chan string, 16)}
	quit := make(chan struct{})
	yes := true
	opts := inproc.Options{Setup: func(i int, s *mcp.Server) {
		node := fmt.Sprintf("n%d", i)
		block := func(ctx context.Context) error {
			r.started <- node
			select {
			case <-ctx.Done():
				r.cancelled <- node
				return ctx.Err()
			case <-quit:
				return fmt.Errorf("test over")
			}
		}
		mcp.AddTool(s, mcp.Tool{Name: "work", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			return "", block(ctx)
		})
		mcp.AddTool(s, mcp.Tool{Name: "redo", TaskSupport: mcp.TaskOptional, Annotations: &mcp.ToolAnnotations{IdempotentHint: &yes}},
			func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
				if node == "n0" {
					return "", block(ctx)
				}
				return "redone on " + node, nil
			})
		mcp.AddTool(s, mcp.Tool{Name: "ask", TaskSupport: mcp.TaskRequired}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("hello %v from %s", res.Content["name"], node), nil
		})
	}}
	r.Cluster = inproc.New(t, opts)
	t.Cleanup(func() { close(quit) })
	return r
}

// taskMeta is the _meta of a client that negotiated the tasks extension.
func taskMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{mcp.ExtensionTasks: map[string]any{}}},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "mcptest", "version": "1"},
	}
}

// taskReq sends a 2026-07-28 request to node url; it returns the result
// object, or fails the test on an error unless wantCode names it.
func taskReq(t *testing.T, cl *mcptest.Client, url, method, name string, params map[string]any, wantCode int64) map[string]any {
	t.Helper()
	params["_meta"] = taskMeta()
	_, body := mcptest.Request(t, cl, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), soon)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, body, mcptest.ModernHeaders(method, name), nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	final := resp.Final()
	if final == nil {
		t.Fatalf("%s at %s: no response (%d %s)", method, url, resp.Status, resp.Body)
	}
	if final.Error != nil {
		if final.Error.Code != wantCode {
			t.Fatalf("%s at %s: error %d %q, want code %d", method, url, final.Error.Code, final.Error.Message, wantCode)
		}
		return nil
	}
	if wantCode != 0 {
		t.Fatalf("%s at %s: got a result, want error %d", method, url, wantCode)
	}
	var m map[string]any
	if err := json.Unmarshal(final.Result, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (r *taskRig) start(t *testing.T, cl *mcptest.Client, node int, tool string) string {
	t.Helper()
	res := taskReq(t, cl, r.Nodes[node].URL, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{}}, 0)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call %s: got %v, want a CreateTaskResult", tool, res)
	}
	return id
}

func (r *taskRig) get(t *testing.T, cl *mcptest.Client, node int, id string) map[string]any {
	t.Helper()
	return taskReq(t, cl, r.Nodes[node].URL, "tasks/get", id, map[string]any{"taskId": id}, 0)
}

// waitStatus polls tasks/get on node until the task has status.
func (r *taskRig) waitStatus(t *testing.T, cl *mcptest.Client, node int, id, status string, within time.Duration) map[string]any {
	t.Helper()
	var last map[string]any
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if last = r.get(t, cl, node, id); last["status"] == status {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s on %s: last %v, want status %q within %v", id, r.Nodes[node].ID, last, status, within)
	return nil
}

func expect(t *testing.T, ch chan string, want, what string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	case <-time.After(soon):
		t.Fatalf("%s: nothing within %v", what, soon)
	}
}

// A task created on A is polled on B and cancelled on C; the cancel
// reaches the handler on A.
func TestTaskCreatedOnAPolledOnBCancelledOnC(t *testing.T) {
	r := newTaskRig(t)
	cl := mcptest.New(t)
	id := r.start(t, cl, 0, "work")
	expect(t, r.started, "n0", "handler start")
	if got := r.get(t, cl, 1, id); got["status"] != "working" || got["resultType"] != "complete" {
		t.Fatalf("tasks/get on B: %v", got)
	}
	ack := taskReq(t, cl, r.Nodes[2].URL, "tasks/cancel", id, map[string]any{"taskId": id}, 0)
	if ack["resultType"] != "complete" || ack["taskId"] != nil {
		t.Fatalf("tasks/cancel on C: %v, want an empty ack", ack)
	}
	expect(t, r.cancelled, "n0", "handler cancellation")
	r.waitStatus(t, cl, 1, id, "cancelled", soon)
	// Unknown ids, and a client that did not negotiate, are refused.
	taskReq(t, cl, r.Nodes[1].URL, "tasks/get", "nope", map[string]any{"taskId": "nope"}, jsonrpc.CodeInvalidParams)
	_, body := mcptest.Request(t, cl, "tasks/get", map[string]any{"taskId": id, "_meta": mcptest.ModernMeta()})
	resp, err := cl.PostRaw(context.Background(), r.Nodes[1].URL, body, mcptest.ModernHeaders("tasks/get", id), nil)
	if err != nil || resp.Final() == nil || resp.Final().Error == nil || resp.Final().Error.Code != jsonrpc.CodeMissingClientCapability {
		t.Fatalf("tasks/get without the extension: %v %+v", err, resp)
	}
}

// The handler on A asks for input; the task is input_required on B and
// the answer sent through C resumes it.
func TestTaskInputAnsweredThroughAnotherNode(t *testing.T) {
	r := newTaskRig(t)
	cl := mcptest.New(t)
	id := r.start(t, cl, 0, "ask")
	got := r.waitStatus(t, cl, 1, id, "input_required", soon)
	reqs, _ := got["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("inputRequests: %v", got["inputRequests"])
	}
	responses := map[string]any{}
	for k, v := range reqs {
		if m, _ := v.(map[string]any); m["method"] != "elicitation/create" {
			t.Fatalf("input request %v", v)
		}
		responses[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}
	}
	taskReq(t, cl, r.Nodes[2].URL, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": responses}, 0)
	done := r.waitStatus(t, cl, 1, id, "completed", soon)
	b, _ := json.Marshal(done["result"])
	if want := `hello Ada from n0`; !json.Valid(b) || !contains(string(b), want) {
		t.Fatalf("result %s, want %q", b, want)
	}
}

// A killed node's task fails within the lease time; an idempotent one
// runs again on a live node.
func TestTaskNodeKilled(t *testing.T) {
	r := newTaskRig(t)
	cl := mcptest.New(t)
	lost := r.start(t, cl, 0, "work")
	expect(t, r.started, "n0", "work start")
	redo := r.start(t, cl, 0, "redo")
	expect(t, r.started, "n0", "redo start")
	r.Nodes[0].Kill()
	killed := time.Now()
	failed := r.waitStatus(t, cl, 1, lost, "failed", 3*inproc.DefaultLeaseTTL)
	if e, _ := failed["error"].(map[string]any); e["code"] != float64(jsonrpc.CodeNodeLost) {
		t.Fatalf("failed task's error %v, want the node-lost code", failed["error"])
	}
	if d := time.Since(killed); d > 2*inproc.DefaultLeaseTTL+time.Second {
		t.Fatalf("failed after %v, lease %v", d, inproc.DefaultLeaseTTL)
	}
	done := r.waitStatus(t, cl, 2, redo, "completed", soon)
	b, _ := json.Marshal(done["result"])
	if !contains(string(b), "redone on n") {
		t.Fatalf("taken-over result %s", b)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A listen stream on C with the task's id gets notifications/tasks with
// the task's state when it changes on A and B.
func TestTaskNotificationsOnListenStream(t *testing.T) {
	r := newTaskRig(t)
	cl := mcptest.New(t)
	id := r.start(t, cl, 0, "work")
	expect(t, r.started, "n0", "handler start")
	params := map[string]any{"notifications": map[string]any{"taskIds": []string{id}}, "_meta": taskMeta()}
	_, body := mcptest.Request(t, cl, "subscriptions/listen", params)
	st, err := cl.OpenPost(r.Nodes[2].URL, body, mcptest.ModernHeaders("subscriptions/listen", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustWait(t, st, "acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))
	taskReq(t, cl, r.Nodes[1].URL, "tasks/cancel", id, map[string]any{"taskId": id}, 0)
	mustWait(t, st, "notifications/tasks", mcptest.Has("notifications/tasks", 1))
	for _, m := range st.Messages() {
		if m.Method != "notifications/tasks" {
			continue
		}
		var p map[string]any
		_ = json.Unmarshal(m.Params, &p)
		if p["taskId"] != id || p["status"] != "cancelled" {
			t.Fatalf("notification %s", m.Params)
		}
	}
}
