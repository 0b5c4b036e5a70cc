package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// taskScenario: tools/call echo_task (echo) as a durable task, then tasks/get until it
// is completed, then its result: on 2025-11-25 the call asks for a task
// (params.task) and the result is fetched with tasks/result; on
// 2026-07-28 the client negotiates the tasks extension, the server
// answers with a task, and the completed tasks/get carries the result.
// Each request goes to the next endpoint, so on a cluster the task is
// created, polled and read on different nodes. Extras: create (the
// CreateTaskResult), done (create to completed seen), polls per task.
type taskScenario struct {
	sessionHooks
	text string
}

// extensionTasks is the tasks extension's id (2026-07-28).
const extensionTasks = "io.modelcontextprotocol/tasks"

// taskState is what the scenario reads of a task on the wire, either era.
type taskState struct {
	ResultType string          `json:"resultType"`
	TaskID     string          `json:"taskId"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result"`
	Task       *taskState      `json:"task"`
}

func (s *taskScenario) request(ctx context.Context, w *worker, method, name string, params map[string]any) (*taskState, *exchange, error) {
	cl := w.r.cl
	id := w.sess.newID()
	ex, err := cl.call(ctx, cl.urls[cl.pick()], w.sess, id, cl.requestBody(id, method, params, nil), method, name, nil)
	if err != nil {
		return nil, nil, err
	}
	if ex.final == nil || ex.final.Error != nil {
		return nil, nil, bench.Errorf("protocol", "%s: no result: %+v", method, ex.final)
	}
	var st taskState
	if err := json.Unmarshal(ex.final.Result, &st); err != nil {
		return nil, nil, bench.Errorf("bad_result", "%s: undecodable result %.200s", method, ex.final.Result)
	}
	if st.Task != nil { // 2025-11-25 CreateTaskResult
		st = *st.Task
	}
	return &st, ex, nil
}

func (s *taskScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl := w.r.cl
	params := map[string]any{"name": "echo_task", "arguments": map[string]any{"text": s.text}}
	if !cl.modern {
		params["task"] = map[string]any{"ttl": 10000}
	}
	start := time.Now()
	created, _, err := s.request(ctx, w, "tools/call", "echo_task", params)
	if err != nil {
		return time.Since(start), err
	}
	if created.TaskID == "" {
		return time.Since(start), bench.Errorf("no_task", "tools/call answered without a task")
	}
	w.r.extra("create", time.Since(start))
	id := created.TaskID
	st := created
	polls := 0
	for st.Status != "completed" {
		switch st.Status {
		case "working", "input_required":
		default:
			return time.Since(start), bench.Errorf("task_"+st.Status, "task %s ended %s", id, st.Status)
		}
		if st, _, err = s.request(ctx, w, "tasks/get", id, map[string]any{"taskId": id}); err != nil {
			return time.Since(start), err
		}
		polls++
	}
	w.r.extra("done", time.Since(start))
	w.r.count("polls", int64(polls), false)
	if cl.modern {
		return time.Since(start), expectText(&exchange{final: &jsonrpc.Message{Result: st.Result}}, s.text)
	}
	_, ex, err := s.request(ctx, w, "tasks/result", id, map[string]any{"taskId": id})
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	return d, expectText(ex, s.text)
}
