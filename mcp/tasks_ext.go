package mcp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663): negotiated per request through the client capabilities'
// extensions, advertised in server/discover; the server decides per call
// whether a tools/call becomes a task (the tool's TaskSupport); the flat
// CreateTaskResult; tasks/get, tasks/update and tasks/cancel.

// ExtensionTasks names the tasks extension.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// The statuses of a task that the protocol's answers tell apart.
const (
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// tasksNegotiated reports whether the client of a 2026-07-28 request
// declared the tasks extension.
func (r *Request) tasksNegotiated() bool {
	if !r.modern {
		return false
	}
	_, ok := r.caps.Extensions[ExtensionTasks]
	return ok
}

// tasksRequired is the error of a request that needs the extension.
func tasksRequired(what string) error {
	return jsonrpc.NewError(jsonrpc.CodeMissingClientCapability,
		"missing required client capability: the "+ExtensionTasks+" extension ("+what+")",
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
}

// toolTask decides whether a 2026-07-28 tools/call of t becomes a task:
// ok reports that it did (res is the CreateTaskResult) or that it cannot
// be served (err).
func (s *Server) toolTask(ctx context.Context, req *Request, t Tool) (res any, ok bool, err error) {
	if !req.modern || req.run != nil || t.TaskSupport == TaskForbidden {
		return nil, false, nil
	}
	if !req.tasksNegotiated() {
		if t.TaskSupport == TaskRequired {
			return nil, true, tasksRequired("tool " + t.Name + " runs only as a task")
		}
		return nil, false, nil
	}
	if req.tasks == nil {
		return nil, false, nil // no task engine (stdio): answered at once
	}
	task, err := s.startTask(ctx, req, toolIdempotent(t))
	if err != nil {
		return nil, true, err
	}
	return createTaskResult(task), true, nil
}

// taskFields are the members of a Task on the wire.
func taskFields(t coordinator.Task) map[string]any {
	m := map[string]any{
		"taskId":        t.ID,
		"status":        t.Status,
		"createdAt":     t.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": t.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":         t.TTL.Milliseconds(),
	}
	if t.Message != "" {
		m["statusMessage"] = t.Message
	}
	if t.PollInterval > 0 {
		m["pollIntervalMs"] = t.PollInterval.Milliseconds()
	}
	return m
}

// createTaskResult is the flat CreateTaskResult (Result & Task).
func createTaskResult(t coordinator.Task) map[string]any {
	m := taskFields(t)
	m["resultType"] = "task"
	return m
}

// detailedTask is the answer of tasks/get: the task with, by status, its
// pending input requests, its result or its error.
func detailedTask(t coordinator.Task) map[string]any {
	m := taskFields(t)
	switch t.Status {
	case taskInputRequired:
		reqs := make(map[string]json.RawMessage, len(t.Inputs))
		for k, v := range t.Inputs {
			reqs[k] = v
		}
		m["inputRequests"] = reqs
	case taskCompleted:
		m["result"] = json.RawMessage(t.Result)
	case taskFailed:
		if len(t.Error) > 0 {
			m["error"] = json.RawMessage(t.Error)
		} else {
			m["error"] = jsonrpc.NewError(jsonrpc.CodeInternalError, "the task failed", nil)
		}
	}
	return m
}

// tasksMethod answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) tasksMethod(ctx context.Context, req *Request) (any, error) {
	if !req.tasksNegotiated() {
		return nil, tasksRequired(req.Method)
	}
	var p struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	t, err := req.visibleTask(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "tasks/get":
		return detailedTask(t), nil
	case "tasks/update":
		if p.InputResponses == nil {
			return nil, invalidParam("inputResponses", "must be an object")
		}
		responses := make(map[string][]byte, len(p.InputResponses))
		for k, v := range p.InputResponses {
			responses[k] = v
		}
		if _, err := req.tasks.node.Tasks.Respond(ctx, t.ID, responses); err != nil {
			return nil, err
		}
	case "tasks/cancel":
		if _, err := req.tasks.node.Tasks.Cancel(ctx, t.ID); err != nil {
			return nil, err
		}
	}
	return struct{}{}, nil
}

// taskNotification carries a task's full state to listen streams that
// asked for it (notifications.taskIds of subscriptions/listen).
const taskNotification = "notifications/tasks"

// taskNotice turns the change notice of a task queued on a listen stream
// into notifications/tasks with the task's state: nil when the task is
// gone or not the listener's to see.
func (h *HTTPHandler) taskNotice(ctx context.Context, req *Request, notice *jsonrpc.Message) *jsonrpc.Message {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(notice.Params, &p) != nil {
		return nil
	}
	t, err := h.node.Tasks.Get(ctx, p.URI)
	if err != nil || t.Owner != req.principal.ID() {
		return nil
	}
	params := detailedTask(t)
	params["_meta"] = map[string]any{MetaSubscriptionID: req.id}
	msg, err := jsonrpc.Notification(taskNotification, params)
	if err != nil {
		return nil
	}
	return msg
}
