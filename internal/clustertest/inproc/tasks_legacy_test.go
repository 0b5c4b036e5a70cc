package inproc_test

// Flow 10 on 2025-11-25 sessions (the experimental tasks, SEP-1686) on
// three in-process nodes, each request pinned to a node: a task created
// on A is polled on B and cancelled on C; tasks/result waits on B while A
// completes; an elicitation inside a task reaches the client through
// tasks/result on another node and is answered through a third;
// tasks/list pages one session's tasks and never another's.

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

// legacyTaskRig is a cluster with the task tools of these tests: "slow"
// waits for the test's go-ahead, "ask" elicits a name.
type legacyTaskRig struct {
	*inproc.Cluster
	gate      chan struct{}
	started   chan string
	cancelled chan string
}

func newLegacyTaskRig(t *testing.T, opts inproc.Options) *legacyTaskRig {
	r := &legacyTaskRig{gate: make(chan struct{}), started: make(chan string, 16), cancelled: make(chan string, 16)}
	opts.Setup = func(i int, s *mcp.Server) {
		node := fmt.Sprintf("n%d", i)
		mcp.AddTool(s, mcp.Tool{Name: "slow", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			r.started <- node
			select {
			case <-r.gate:
				return "done on " + node, nil
			case <-ctx.Done():
				r.cancelled <- node
				return "", ctx.Err()
			}
		})
		mcp.AddTool(s, mcp.Tool{Name: "redo", TaskSupport: mcp.TaskOptional, TaskIdempotent: true}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			if node != "n0" {
				return "redone on " + node, nil
			}
			r.started <- node
			<-ctx.Done()
			return "", ctx.Err()
		})
		mcp.AddTool(s, mcp.Tool{Name: "ask", TaskSupport: mcp.TaskRequired}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("hello %v from %s", res.Content["name"], node), nil
		})
	}
	r.Cluster = inproc.New(t, opts)
	return r
}

// legacyOn sends a request of c's session to node url and returns the
// result, or the error; handler answers requests on the stream.
func legacyOn(t *testing.T, c *mcptest.Client, url, method string, params any, handler func(*jsonrpc.Message) *jsonrpc.Message) (map[string]any, *jsonrpc.Error) {
	t.Helper()
	_, body := mcptest.Request(t, c, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), 2*soon)
	defer cancel()
	resp, err := c.PostRaw(ctx, url, body, nil, handler)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	final := resp.Final()
	if final == nil {
		t.Fatalf("%s at %s: no response (%d %s)", method, url, resp.Status, resp.Body)
	}
	if final.Error != nil {
		return nil, final.Error
	}
	var m map[string]any
	if err := json.Unmarshal(final.Result, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func legacyOK(t *testing.T, c *mcptest.Client, url, method string, params any) map[string]any {
	t.Helper()
	m, e := legacyOn(t, c, url, method, params, nil)
	if e != nil {
		t.Fatalf("%s at %s: error %d %q", method, url, e.Code, e.Message)
	}
	return m
}

// startOn calls tool as a task on node url and returns the task id.
func (r *legacyTaskRig) startOn(t *testing.T, c *mcptest.Client, url, tool string) string {
	t.Helper()
	res := legacyOK(t, c, url, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "working" {
		t.Fatalf("tools/call %s as a task: got %v, want CreateTaskResult", tool, res)
	}
	return id
}

func legacySession(t *testing.T, r *legacyTaskRig) *mcptest.Client {
	c := mcptest.New(t, r.URLs()...)
	c.Initialize(mcp.Version20251125, map[string]any{"elicitation": map[string]any{}})
	return c
}

func TestLegacyTaskCreatedOnAPolledOnBCancelledOnC(t *testing.T) {
	r := newLegacyTaskRig(t, inproc.Options{})
	c := legacySession(t, r)
	a, b, cc := r.Nodes[0].URL, r.Nodes[1].URL, r.Nodes[2].URL
	get := mcptest.OpenGet(t, c, cc, "")

	id := r.startOn(t, c, a, "slow")
	if node := <-r.started; node != "n0" {
		t.Fatalf("the task runs on %s, want n0 (where it was created)", node)
	}
	if got := legacyOK(t, c, b, "tasks/get", map[string]any{"taskId": id}); got["status"] != "working" {
		t.Fatalf("tasks/get on B: %v, want working", got)
	}
	if got := legacyOK(t, c, cc, "tasks/cancel", map[string]any{"taskId": id}); got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel on C: %v, want cancelled", got)
	}
	select {
	case node := <-r.cancelled:
		if node != "n0" {
			t.Fatalf("cancelled on %s, want n0", node)
		}
	case <-time.After(soon):
		t.Fatal("the cancel on C did not reach the handler on A")
	}
	if got := legacyOK(t, c, b, "tasks/get", map[string]any{"taskId": id}); got["status"] != "cancelled" {
		t.Fatalf("tasks/get on B after the cancel: %v, want cancelled", got)
	}
	if _, e := legacyOn(t, c, b, "tasks/cancel", map[string]any{"taskId": id}, nil); e == nil || e.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a second tasks/cancel on B: %v, want -32602", e)
	}
	if !get.WaitFor(soon, statusSeen(id, "cancelled")) {
		t.Fatalf("GET stream on C: %d messages, want notifications/tasks/status cancelled", len(get.Messages()))
	}
}

// statusSeen reports whether notifications/tasks/status of task id with
// status arrived.
func statusSeen(id, status string) func([]*jsonrpc.Message) bool {
	return func(ms []*jsonrpc.Message) bool {
		for _, m := range ms {
			var p map[string]any
			if m.Method == "notifications/tasks/status" && json.Unmarshal(m.Params, &p) == nil && p["taskId"] == id && p["status"] == status {
				return true
			}
		}
		return false
	}
}

func TestLegacyTaskResultWaitsOnBWhileACompletes(t *testing.T) {
	r := newLegacyTaskRig(t, inproc.Options{})
	c := legacySession(t, r)
	a, b := r.Nodes[0].URL, r.Nodes[1].URL
	get := mcptest.OpenGet(t, c, r.Nodes[2].URL, "")

	id := r.startOn(t, c, a, "slow")
	<-r.started
	type answer struct {
		res map[string]any
		err *jsonrpc.Error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := legacyOn(t, c, b, "tasks/result", map[string]any{"taskId": id}, nil)
		done <- answer{res, err}
	}()
	select {
	case got := <-done:
		t.Fatalf("tasks/result on B returned %v %v while the task works", got.res, got.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(r.gate)
	var got answer
	select {
	case got = <-done:
	case <-time.After(soon):
		t.Fatal("tasks/result on B did not return after A completed")
	}
	if got.err != nil || fmt.Sprint(got.res["content"]) != "[map[text:done on n0 type:text]]" {
		t.Fatalf("tasks/result on B: %v %v, want done on n0", got.res, got.err)
	}
	meta, _ := got.res["_meta"].(map[string]any)
	if rt, _ := meta[mcp.MetaRelatedTask].(map[string]any); rt["taskId"] != id {
		t.Fatalf("tasks/result on B: _meta %v, want the related task", got.res["_meta"])
	}
	if !get.WaitFor(soon, statusSeen(id, "completed")) {
		t.Fatalf("GET stream on C: %d messages, want notifications/tasks/status completed from A", len(get.Messages()))
	}
}

func TestLegacyTaskInputThroughAnotherNode(t *testing.T) {
	r := newLegacyTaskRig(t, inproc.Options{})
	c := legacySession(t, r)
	a, b, cc := r.Nodes[0].URL, r.Nodes[1].URL, r.Nodes[2].URL
	if _, e := legacyOn(t, c, b, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}, nil); e == nil || e.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("ask (task required) without a task: %v, want -32601", e)
	}
	id := r.startOn(t, c, a, "ask")
	mcptest.Eventually(t, soon, "input_required on B", func() bool {
		return legacyOK(t, c, b, "tasks/get", map[string]any{"taskId": id})["status"] == "input_required"
	})
	// tasks/result on C carries the elicitation; the client's reply lands
	// on B, reaches C's waiter, then the task on A.
	c.URLs = []string{b}
	var asked *jsonrpc.Message
	res, e := legacyOn(t, c, cc, "tasks/result", map[string]any{"taskId": id}, func(m *jsonrpc.Message) *jsonrpc.Message {
		if m.Kind() != jsonrpc.KindRequest {
			return nil
		}
		asked = m
		return &jsonrpc.Message{ID: m.ID, Result: json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
	})
	if e != nil {
		t.Fatalf("tasks/result on C: error %d %q", e.Code, e.Message)
	}
	var p struct {
		Meta map[string]map[string]any `json:"_meta"`
	}
	if asked != nil {
		_ = json.Unmarshal(asked.Params, &p)
	}
	if asked == nil || asked.Method != "elicitation/create" || p.Meta[mcp.MetaRelatedTask]["taskId"] != id {
		t.Fatalf("tasks/result stream on C: request %v, want elicitation/create with the related task", asked)
	}
	if fmt.Sprint(res["content"]) != "[map[text:hello Ada from n0 type:text]]" {
		t.Fatalf("tasks/result on C: %v, want hello Ada from n0", res)
	}
}

func TestLegacyTaskListAcrossNodes(t *testing.T) {
	r := newLegacyTaskRig(t, inproc.Options{Server: mcp.ServerOptions{PageSize: 2}})
	mine, theirs := legacySession(t, r), legacySession(t, r)
	want := map[string]bool{}
	for i := range 5 {
		want[r.startOn(t, mine, r.Nodes[i%3].URL, "ask")] = true
	}
	other := r.startOn(t, theirs, r.Nodes[0].URL, "ask")
	got := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		res := legacyOK(t, mine, r.Nodes[page%3].URL, "tasks/list", p)
		list, _ := res["tasks"].([]any)
		for _, x := range list {
			got[x.(map[string]any)["taskId"].(string)] = true
		}
		if cursor, _ = res["nextCursor"].(string); cursor == "" || page > 5 {
			break
		}
	}
	if len(got) != len(want) || got[other] {
		t.Fatalf("tasks/list of one session over the nodes: got %v, want exactly %v", got, want)
	}
	res := legacyOK(t, theirs, r.Nodes[1].URL, "tasks/list", map[string]any{})
	if list, _ := res["tasks"].([]any); len(list) != 1 {
		t.Fatalf("tasks/list of the other session: %v, want its one task", res)
	}
	for id := range want {
		if _, e := legacyOn(t, theirs, r.Nodes[2].URL, "tasks/get", map[string]any{"taskId": id}, nil); e == nil || e.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("tasks/get of another session's task: %v, want -32602", e)
		}
		break
	}
}

// A 2025-11-25 task of an idempotent tool whose node is killed runs again
// on another node: tasks/result waiting on B returns that run's result,
// and the session hears of it on its GET stream.
func TestLegacyTaskTakenOverFromKilledNode(t *testing.T) {
	r := newLegacyTaskRig(t, inproc.Options{})
	c := legacySession(t, r)
	b := r.Nodes[1].URL
	get := mcptest.OpenGet(t, c, r.Nodes[2].URL, "")
	id := r.startOn(t, c, r.Nodes[0].URL, "redo")
	if node := <-r.started; node != "n0" {
		t.Fatalf("the task runs on %s, want n0", node)
	}
	r.Nodes[0].Kill()
	res, e := legacyOn(t, c, b, "tasks/result", map[string]any{"taskId": id}, nil)
	if e != nil {
		t.Fatalf("tasks/result on B: error %d %q", e.Code, e.Message)
	}
	if text := fmt.Sprint(res["content"]); text != "[map[text:redone on n1 type:text]]" && text != "[map[text:redone on n2 type:text]]" {
		t.Fatalf("tasks/result on B after the kill: %v, want the result of a run on n1 or n2", res)
	}
	got := legacyOK(t, c, b, "tasks/get", map[string]any{"taskId": id})
	if msg, _ := got["statusMessage"].(string); got["status"] != "completed" || !strings.Contains(msg, "attempt 2") {
		t.Fatalf("tasks/get after the take-over: %v, want completed at attempt 2", got)
	}
	if !get.WaitFor(soon, statusSeen(id, "completed")) {
		t.Fatalf("GET stream on C: %d messages, want notifications/tasks/status completed from the node that took over", len(get.Messages()))
	}
}
