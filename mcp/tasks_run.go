package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// This file runs a tools/call as a durable task on the node, whatever
// the protocol era: the task's record (internal/cluster TaskStore) keeps
// the request, and the node's runner (internal/coordinator/tasks.go)
// runs the tool's ordinary handler, holds it under the node's lease and
// hands it over when the node goes. The wire forms of each era live in
// tasks_*.go files of their own.

// TaskSupport says whether a tool runs as a task.
type TaskSupport string

// Task support of a tool.
const (
	// TaskForbidden (the zero value): the tool always answers at once.
	TaskForbidden TaskSupport = ""
	// TaskOptional: the tool runs as a task when the client can take one
	// (it negotiated tasks), else at once.
	TaskOptional TaskSupport = "optional"
	// TaskRequired: the tool runs only as a task; a client that did not
	// negotiate tasks gets an error (-32021 on 2026-07-28).
	TaskRequired TaskSupport = "required"
)

// taskMeta is what a task's record keeps, besides its request, to run
// the request again on any node: who asked and how.
type taskMeta struct {
	Version    string                     `json:"v"`
	Caps       ClientCapabilities         `json:"caps"`
	ClientInfo *Implementation            `json:"ci,omitempty"`
	Issuer     string                     `json:"iss,omitempty"`
	Subject    string                     `json:"sub,omitempty"`
	ClientID   string                     `json:"cid,omitempty"`
	Scopes     []string                   `json:"scp,omitempty"`
	Inputs     map[string]json.RawMessage `json:"in,omitempty"`
	State      []byte                     `json:"st,omitempty"`
	// The session of a 2025-11-25 task, and the progress token and log
	// level of its tools/call: its notifications go to that session.
	Session  string          `json:"sid,omitempty"`
	Progress json.RawMessage `json:"pt,omitempty"`
	LogLevel LogLevel        `json:"ll,omitempty"`
}

// errTaskCreated carries the task created for a request: a handler that
// continues as a task (ContinueAsTask) returns it, and callTool answers
// with the era's CreateTaskResult.
type errTaskCreated struct{ task coordinator.Task }

func (e *errTaskCreated) Error() string { return "mcp: the call continues as task " + e.task.ID }

// taskEngine is what a transport gives requests that may run as tasks:
// the node and the bounds.
type taskEngine struct {
	node *coordinator.Node
	opts *HTTPOptions
}

// tasksOn reports whether req may become a task: a transport with a
// task engine, not already running as one.
func (r *Request) tasksOn() bool { return r.tasks != nil && r.run == nil }

// ContinueAsTask runs f as a durable task when the client can take one
// (on 2026-07-28, it negotiated the tasks extension): the call answers at
// once with the task, and f's result becomes the task's. Otherwise, or
// inside a task already, f runs now and its result is returned. A tool
// may first gather input (Elicit, Sample) and then continue as a task:
// the task runs the tool's handler again with the answers known, so it
// must reach ContinueAsTask the same way.
func (r *Request) ContinueAsTask(ctx context.Context, f func(ctx context.Context) (*CallToolResult, error)) (*CallToolResult, error) {
	if r.Method != "tools/call" || !r.tasksOn() || !r.tasksNegotiated() {
		return f(ctx)
	}
	t, err := r.srv.startTask(ctx, r, r.idempotentTool())
	if err != nil {
		return nil, err
	}
	return nil, &errTaskCreated{task: t}
}

// Task reports whether the request runs as a task, and its id.
func (r *Request) Task() (string, bool) {
	if r.run == nil {
		return "", false
	}
	return r.run.Task.ID, true
}

// idempotentTool reports whether the called tool may run twice: its
// idempotentHint or its TaskIdempotent option.
func (r *Request) idempotentTool() bool {
	var p callParams
	if decodeParams(r.Params, &p) != nil {
		return false
	}
	r.srv.mu.RLock()
	e := r.srv.tools[p.Name]
	r.srv.mu.RUnlock()
	return e != nil && toolIdempotent(e.tool)
}

func toolIdempotent(t Tool) bool {
	return t.TaskIdempotent || t.Annotations != nil && t.Annotations.IdempotentHint != nil && *t.Annotations.IdempotentHint
}

// ownerKey is what the per-owner bound counts: the principal, or the
// client's address without authentication.
func (r *Request) ownerKey() string {
	if id := r.principal.ID(); id != "" {
		return "p:" + id
	}
	host, _, err := net.SplitHostPort(r.remote)
	if err != nil {
		host = r.remote
	}
	return "a:" + host
}

// startTask records a task for req and starts it on the node.
func (s *Server) startTask(ctx context.Context, req *Request, idempotent bool) (coordinator.Task, error) {
	e := req.tasks
	m := taskMeta{Version: req.version, Caps: req.caps, ClientInfo: req.clientInfo, Inputs: req.inputs, State: req.state,
		Session: req.sessionID, Progress: req.progressToken, LogLevel: req.logLevel}
	if req.principal != nil {
		p := req.principal
		m.Issuer, m.Subject, m.ClientID, m.Scopes = p.Issuer, p.Subject, p.ClientID, p.Scopes
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return coordinator.Task{}, err
	}
	var p struct {
		Task *struct {
			TTL int64 `json:"ttl"`
		} `json:"task"`
	}
	_ = json.Unmarshal(req.Params, &p) // decoded before
	var requested time.Duration
	if p.Task != nil {
		requested = time.Duration(p.Task.TTL) * time.Millisecond
	}
	ttl, err := e.taskTTL(requested)
	if err != nil {
		return coordinator.Task{}, err
	}
	rec := coordinator.Task{
		Owner: req.taskOwner(), OwnerKey: req.ownerKey(),
		TTL: ttl, PollInterval: e.opts.TaskPollInterval,
		Method: req.Method, Params: req.Params, Meta: meta, Idempotent: idempotent,
	}
	t, err := e.node.Tasks.Start(ctx, rec, e.opts.MaxTasksPerOwner, s.taskFunc(req, e))
	if isFull(err) {
		return t, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, fmt.Sprintf("too many live tasks: at most %d per client; wait for some to expire", e.opts.MaxTasksPerOwner), nil)
	}
	return t, err
}

// resolveTask is the node's TaskOptions.Resolve: it runs a task's stored
// tools/call on this node (a take-over).
func (s *Server) resolveTask(e *taskEngine) func(t coordinator.Task) coordinator.TaskFunc {
	return func(t coordinator.Task) coordinator.TaskFunc {
		if t.Method != "tools/call" {
			return nil
		}
		var m taskMeta
		if err := json.Unmarshal(t.Meta, &m); err != nil {
			return nil
		}
		req := &Request{
			Method: t.Method, Params: t.Params, srv: s, id: jsonrpc.StringID(t.ID),
			version: m.Version, modern: IsModernVersion(m.Version), caps: m.Caps, clientInfo: m.ClientInfo,
			inputs: m.Inputs, state: m.State, retry: len(m.Inputs) > 0 || len(m.State) > 0,
			sessionID: m.Session, progressToken: m.Progress, logLevel: m.LogLevel,
		}
		if m.Issuer != "" || m.Subject != "" {
			// The caller as the task was admitted: the access check of
			// the run again sees the same scopes.
			req.principal = &Principal{Issuer: m.Issuer, Subject: m.Subject, ClientID: m.ClientID, Scopes: m.Scopes}
		}
		return s.taskFunc(req, e)
	}
}

// taskFunc returns the run of req's tool as a task: the tool's handler,
// with Elicit and Sample turned into the task's input requests.
func (s *Server) taskFunc(orig *Request, e *taskEngine) coordinator.TaskFunc {
	return func(ctx context.Context, run *coordinator.TaskRun) (res json.RawMessage, rerr *jsonrpc.Error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error().Interface("panic", p).Str("task", run.Task.ID).Msg("task handler panicked")
				res, rerr = nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task's handler failed", nil)
			}
		}()
		req := &Request{
			Method: orig.Method, Params: orig.Params, id: orig.id, srv: s,
			version: orig.version, modern: orig.modern, caps: orig.caps, clientInfo: orig.clientInfo,
			principal: orig.principal, inputs: orig.inputs, state: orig.state, retry: orig.retry,
			once: orig.once, tasks: e, run: run,
			sessionID: orig.sessionID, progressToken: orig.progressToken, logLevel: orig.logLevel,
		}
		e.legacyTaskRun(req)
		out, err := s.callTool(ctx, req)
		if err != nil {
			return nil, taskError(err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task's result is not JSON", nil)
		}
		return b, legacyToolError(req, out)
	}
}

// taskError is the JSON-RPC error a failed task keeps.
func taskError(err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	if errors.As(rpcError(err), &je) {
		return je
	}
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "the task failed", nil)
}

// taskInput asks the client for input from inside a task: the request
// becomes one of the task's input requests, answered through any node.
func (r *Request) taskInput(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	b, err := json.Marshal(inputRequest{Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	resp, err := r.run.Input(ctx, b)
	if err != nil {
		return nil, err
	}
	if !r.modern {
		return legacyAnswer(method, resp)
	}
	return resp, nil
}

// taskTTL checks a TTL a client asks for (params.task.ttl in ms; 0: the
// default) against the configured range.
func (e *taskEngine) taskTTL(requested time.Duration) (time.Duration, error) {
	switch {
	case requested == 0:
		return e.opts.TaskTTL, nil
	case requested < e.opts.MinTaskTTL:
		return 0, invalidParam("ttl", fmt.Sprintf("must be at least %d ms", e.opts.MinTaskTTL.Milliseconds()))
	case requested > e.opts.MaxTaskTTL:
		return 0, invalidParam("ttl", fmt.Sprintf("must be at most %d ms", e.opts.MaxTaskTTL.Milliseconds()))
	}
	return requested, nil
}

// visibleTask loads a task for req: one of another principal is unknown.
func (r *Request) visibleTask(ctx context.Context, id string) (coordinator.Task, error) {
	if id == "" {
		return coordinator.Task{}, invalidParam("taskId", "is required")
	}
	if r.tasks == nil {
		return coordinator.Task{}, unknownTask(id)
	}
	t, err := r.tasks.node.Tasks.Get(ctx, id)
	if isGone(err) || err == nil && t.Owner != r.taskOwner() {
		return coordinator.Task{}, unknownTask(id)
	}
	return t, err
}

// unknownTask answers an id that names no task this caller may see. It
// does not echo the id: a task of another principal answers byte for
// byte as one that does not exist.
func unknownTask(string) error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "unknown task", map[string]any{"field": "taskId"})
}
