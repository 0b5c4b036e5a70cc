package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The experimental tasks of 2025-11-25 (SEP-1686) on a session: the
// tasks capability in initialize, execution.taskSupport in tools/list,
// a tools/call with params.task answered at once with CreateTaskResult
// {task}, tasks/get, tasks/list, tasks/cancel and tasks/result (which
// blocks until the task ends, and meanwhile carries the task's requests
// to the client), and notifications/tasks/status on the session's GET
// stream. The task itself is the node's (tasks_run.go): the same record,
// runner and handler as the 2026-07-28 extension.

// ToolExecution is a tool's execution properties on 2025-11-25: the
// server fills it from Tool.TaskSupport.
type ToolExecution struct {
	TaskSupport string `json:"taskSupport,omitempty"`
}

// legacyTasksOn reports whether req may use 2025-11-25 tasks: a session
// of that revision on a transport that runs tasks.
func (r *Request) legacyTasksOn() bool {
	return !r.modern && r.version == Version20251125 && r.tasks != nil
}

// tasksCapability is the server's tasks capability on 2025-11-25.
func tasksCapability() map[string]any {
	return map[string]any{
		"list":     map[string]any{},
		"cancel":   map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
	}
}

// executionFor is a tool's execution member on revision v (nil unless
// 2025-11-25 and the tool runs as a task).
func executionFor(t Tool, v string) *ToolExecution {
	if v != Version20251125 || t.TaskSupport == TaskForbidden {
		return nil
	}
	return &ToolExecution{TaskSupport: string(t.TaskSupport)}
}

// taskOwner is who a task belongs to: the principal, or without
// authentication the session that created it.
func (r *Request) taskOwner() string {
	if id := r.principal.ID(); id != "" || r.modern || r.sessionID == "" {
		return id
	}
	return "session " + r.sessionID
}

// legacyToolTask decides whether a 2025-11-25 tools/call of t runs as a
// task: ok reports that it did (res is the CreateTaskResult) or that it
// cannot be served (err). A task asked of a tool that forbids it, and a
// call without one of a tool that requires it, get -32601.
func (s *Server) legacyToolTask(ctx context.Context, req *Request, t Tool) (res any, ok bool, err error) {
	if !req.legacyTasksOn() || req.run != nil {
		return nil, false, nil
	}
	var p struct {
		Task json.RawMessage `json:"task"`
	}
	_ = json.Unmarshal(req.Params, &p) // decoded before
	asked := len(p.Task) > 0 && string(p.Task) != "null"
	switch {
	case asked && t.TaskSupport == TaskForbidden:
		return nil, true, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("tool %q does not run as a task (execution.taskSupport is forbidden): call it without params.task", t.Name), nil)
	case !asked && t.TaskSupport == TaskRequired:
		return nil, true, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("tool %q runs only as a task (execution.taskSupport is required): call it with params.task", t.Name), nil)
	case !asked:
		return nil, false, nil
	}
	if p.Task[0] != '{' {
		return nil, true, invalidParam("task", "must be an object")
	}
	task, err := s.startTask(ctx, req, toolIdempotent(t))
	if err != nil {
		return nil, true, err
	}
	return map[string]any{"task": legacyTask(task)}, true, nil
}

// legacyTask is a Task on the wire of 2025-11-25: the extension's fields
// (taskFields) under their 2025-11-25 names.
func legacyTask(t coordinator.Task) map[string]any {
	m := taskFields(t)
	for ext, legacy := range map[string]string{"ttlMs": "ttl", "pollIntervalMs": "pollInterval"} {
		if v, ok := m[ext]; ok {
			m[legacy] = v
			delete(m, ext)
		}
	}
	return m
}

// legacyTasksMethod answers tasks/get, tasks/list, tasks/cancel and
// tasks/result on a 2025-11-25 session.
func (s *Server) legacyTasksMethod(ctx context.Context, req *Request) (any, error) {
	if !req.legacyTasksOn() {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not available: tasks need protocol version %s over HTTP", req.Method, Version20251125)
	}
	var p struct {
		TaskID string  `json:"taskId"`
		Cursor *string `json:"cursor"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if req.Method == "tasks/list" {
		return s.listTasks(ctx, req, p.Cursor)
	}
	t, err := req.visibleTask(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "tasks/get":
		return legacyTask(t), nil
	case "tasks/cancel":
		// A terminal task is refused, also when it ends before the
		// cancel lands (the record says which came first).
		if !t.Terminal() {
			if t, err = req.tasks.node.Tasks.Cancel(ctx, t.ID); err != nil {
				return nil, err
			}
			if t.Status == taskCancelled {
				return legacyTask(t), nil
			}
		}
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams,
			fmt.Sprintf("cannot cancel task %q: already in terminal status %q", t.ID, t.Status), map[string]any{"field": "taskId"})
	}
	return s.taskResult(ctx, req, t)
}

// listTasks answers tasks/list: the caller's own tasks, a page at a time.
func (s *Server) listTasks(ctx context.Context, req *Request, cursor *string) (any, error) {
	c := ""
	if cursor != nil {
		if c = *cursor; c == "" {
			return nil, invalidParam("cursor", "is not a cursor of tasks/list")
		}
	}
	recs, next, err := req.tasks.node.Tasks.List(ctx, req.ownerKey(), req.taskOwner(), c, s.opts.pageSize())
	if isBadCursor(err) {
		return nil, invalidParam("cursor", "is not a cursor of tasks/list")
	}
	if err != nil {
		return nil, err
	}
	tasks := make([]map[string]any, 0, len(recs))
	for _, t := range recs {
		tasks = append(tasks, legacyTask(t))
	}
	res := map[string]any{"tasks": tasks}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

// taskResult answers tasks/result: it waits until the task is terminal,
// on whichever node runs it, and returns what its tools/call would have
// returned, with the related-task _meta. Meanwhile the task's requests to
// the client (input_required) go out on this request's stream and their
// answers go back to the task.
func (s *Server) taskResult(ctx context.Context, req *Request, t coordinator.Task) (any, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sent := map[string]bool{}
	fresh := func(t coordinator.Task) bool {
		for k := range t.Inputs {
			if !sent[k] {
				return true
			}
		}
		return false
	}
	var err error
	for !t.Terminal() {
		for k, in := range t.Inputs {
			if !sent[k] {
				sent[k] = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					req.forwardInput(ctx, t.ID, k, in)
				}()
			}
		}
		t, err = req.tasks.node.Tasks.Wait(ctx, t.ID, t.PollInterval, func(t coordinator.Task) bool {
			return t.Terminal() || fresh(t)
		})
		if isGone(err) {
			return nil, unknownTask(t.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	related := map[string]any{"taskId": t.ID}
	switch {
	case len(t.Result) > 0:
		var res map[string]any
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task's result is not an object", nil)
		}
		meta, _ := res["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[MetaRelatedTask] = related
		res["_meta"] = meta
		return res, nil
	case len(t.Error) > 0:
		var je jsonrpc.Error
		if err := json.Unmarshal(t.Error, &je); err != nil || je.Code == 0 {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task failed", map[string]any{MetaRelatedTask: related})
		}
		return nil, &je
	case t.Status == taskCancelled:
		return nil, jsonrpc.NewError(jsonrpc.CodeCancelled, fmt.Sprintf("task %q was cancelled", t.ID), map[string]any{MetaRelatedTask: related})
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task failed", map[string]any{MetaRelatedTask: related})
}

// forwardInput sends one of a task's input requests (key) to the client
// on req's stream, with the related-task _meta, and hands the answer (or
// the client's error) to the task. When req's stream ends first, the
// request stays pending for the next tasks/result.
func (r *Request) forwardInput(ctx context.Context, id, key string, in []byte) {
	var ir struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(in, &ir); err != nil || ir.Method == "" {
		return
	}
	params := withRelatedTask(ir.Params, id)
	rctx, cancel := context.WithTimeout(ctx, r.srv.opts.requestTimeout())
	defer cancel()
	res, err := r.sendRequest(rctx, ir.Method, params)
	var answer legacyInput
	var je *jsonrpc.Error
	switch {
	case err == nil:
		answer.Result = res
	case errors.As(err, &je) && ctx.Err() == nil:
		answer.Error = je // the client's refusal, or silence past the request timeout
	default:
		return
	}
	b, _ := json.Marshal(answer)
	if _, err := r.tasks.node.Tasks.Respond(context.WithoutCancel(ctx), id, map[string][]byte{key: b}); err != nil {
		r.zlog().Warn().Err(err).Str("task", id).Msg("task input not delivered")
	}
}

// legacyInput is a client's answer to a task's request on 2025-11-25, as
// the task's record keeps it.
type legacyInput struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
}

// legacyAnswer reads a legacyInput for the handler that asked: the
// result, or the client's error as a ClientError.
func legacyAnswer(method string, b []byte) (json.RawMessage, error) {
	var a legacyInput
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("mcp: malformed answer to %s: %w", method, err)
	}
	if a.Error != nil {
		return nil, &ClientError{Method: method, Code: a.Error.Code, Message: a.Error.Message, Data: a.Error.Data}
	}
	return a.Result, nil
}

// withRelatedTask returns params with the related-task _meta of task id.
func withRelatedTask(params map[string]any, id string) map[string]any {
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[MetaRelatedTask] = map[string]any{"taskId": id}
	params["_meta"] = meta
	return params
}

// taskOut is the outbound of a 2025-11-25 task's handler: its progress
// and log notifications go to the session's GET stream (wherever it is
// open), tied to the task by the related-task _meta; its requests to the
// client go through the task (input_required, see Request.roundTrip).
type taskOut struct {
	node    *coordinator.Node
	session string
	task    string
}

func (o *taskOut) notify(ctx context.Context, msg *jsonrpc.Message) error {
	var params map[string]any
	if len(msg.Params) > 0 {
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return err
		}
	}
	m, err := jsonrpc.Notification(msg.Method, withRelatedTask(params, o.task))
	if err != nil {
		return err
	}
	data, _ := jsonrpc.Encode(m)
	if err := o.node.AppendGet(ctx, o.session, data); err != nil && !isGone(err) {
		return err
	}
	return nil // no GET stream open: the notification is dropped
}

func (o *taskOut) request(context.Context, string, any) (json.RawMessage, error) {
	return nil, ErrNoChannel
}
func (o *taskOut) streaming() bool     { return false }
func (o *taskOut) nextEventID() string { return "" }
func (o *taskOut) closeStream()        {}

// taskStatus sends notifications/tasks/status to the session of a
// 2025-11-25 task whose record this node changed (TaskOptions.Changed).
func (h *HTTPHandler) taskStatus(ctx context.Context, t coordinator.Task) {
	var m taskMeta
	if json.Unmarshal(t.Meta, &m) != nil || m.Version != Version20251125 || m.Session == "" {
		return
	}
	if err := h.NotifySession(ctx, m.Session, "notifications/tasks/status", legacyTask(t)); err != nil &&
		!isGone(err) {
		h.log.Debug().Err(err).Str("task", t.ID).Msg("task status not delivered")
	}
}

// legacyTaskRun completes the Request a 2025-11-25 task's handler runs
// with: its outbound to the session.
func (e *taskEngine) legacyTaskRun(req *Request) {
	if !req.modern && req.sessionID != "" {
		req.out = &taskOut{node: e.node, session: req.sessionID, task: req.run.Task.ID}
	}
}

// legacyToolError is the error that fails a 2025-11-25 task whose tool
// result has isError (the task keeps the result, which tasks/result
// returns).
func legacyToolError(req *Request, out any) *jsonrpc.Error {
	res, ok := out.(*CallToolResult)
	if req.modern || !ok || !res.IsError {
		return nil
	}
	msg := "the tool reported an error"
	for _, c := range res.Content {
		if c.Type == "text" && c.Text != "" {
			msg += ": " + c.Text
			break
		}
	}
	return jsonrpc.NewError(jsonrpc.CodeInternalError, msg, nil)
}
