package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Field gating: members too new for a revision are not sent.

func toolFor(t Tool, v string) Tool {
	if !atLeast(v, Version20250618) {
		t.Title, t.OutputSchema = "", nil
		if t.Meta != nil {
			t.Meta = nil
		}
	}
	if !atLeast(v, Version20251125) {
		t.Icons = nil
	}
	t.Execution = executionFor(t, v)
	return t
}

func resultFor(r *CallToolResult, v string) *CallToolResult {
	if atLeast(v, Version20250618) {
		return r
	}
	out := *r
	out.StructuredContent = nil
	out.Content = contentFor(r.Content, v)
	return &out
}

// contentFor drops block types and members a revision does not know:
// resource_link blocks (2025-06-18+) become text.
func contentFor(cs []Content, v string) []Content {
	if atLeast(v, Version20250618) {
		return cs
	}
	out := make([]Content, 0, len(cs))
	for _, c := range cs {
		if c.Type == "resource_link" {
			c = TextContent(c.URI)
		}
		c.Title, c.Meta = "", nil
		if c.Annotations != nil {
			a := *c.Annotations
			a.LastModified = ""
			c.Annotations = &a
		}
		out = append(out, c)
	}
	return out
}

func (s *Server) listTools(ctx context.Context, req *Request) (any, error) {
	entries, next, err := listVisible(ctx, s, req, KindTool, s.tools, func(e *toolEntry) []string { return e.tool.RequiredScopes })
	if err != nil {
		return nil, err
	}
	tools := make([]Tool, 0, len(entries))
	for _, e := range entries {
		tools = append(tools, toolFor(e.tool, req.version))
	}
	return listResult("tools", tools, next), nil
}

// listResult is the result of a list method: the page under key, and
// nextCursor when there is more.
func listResult(key string, list any, next string) map[string]any {
	res := map[string]any{key: list}
	if next != "" {
		res["nextCursor"] = next
	}
	return res
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (s *Server) callTool(ctx context.Context, req *Request) (any, error) {
	p, err := req.callParams()
	if err != nil {
		return nil, err
	}
	if p.Name == "" {
		return nil, invalidParam("name", "is required")
	}
	s.mu.RLock()
	e := s.tools[p.Name]
	if !s.enabledLocked(featureKey(KindTool, p.Name)) {
		e = nil
	}
	s.mu.RUnlock()
	if e != nil {
		if err := s.access(ctx, req, KindTool, p.Name, e.tool.RequiredScopes); errors.Is(err, errHidden) {
			e = nil
		} else if err != nil {
			return nil, err
		}
	}
	if e == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown tool %q", p.Name), map[string]any{"field": "name"})
	}
	if len(p.Arguments) > 0 && p.Arguments[0] != '{' && string(p.Arguments) != "null" {
		return nil, invalidParam("arguments", "must be an object")
	}
	if t, ok, err := s.toolTask(ctx, req, e.tool); ok || err != nil {
		return t, err
	}
	if t, ok, err := s.legacyToolTask(ctx, req, e.tool); ok || err != nil {
		return t, err
	}
	res, err := e.handler(ctx, req, p.Arguments)
	var tc *errTaskCreated
	if errors.As(err, &tc) {
		return createTaskResult(tc.task), nil
	}
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &CallToolResult{}
	}
	if res.Content == nil {
		res.Content = []Content{}
	}
	return resultFor(res, req.version), nil
}

func resourceFor(r Resource, v string) Resource {
	if !atLeast(v, Version20250618) {
		r.Title, r.Meta = "", nil
		if r.Annotations != nil {
			a := *r.Annotations
			a.LastModified = ""
			r.Annotations = &a
		}
	}
	if !atLeast(v, Version20251125) {
		r.Icons = nil
	}
	return r
}

func templateFor(t ResourceTemplate, v string) ResourceTemplate {
	if !atLeast(v, Version20250618) {
		t.Title, t.Meta = "", nil
	}
	if !atLeast(v, Version20251125) {
		t.Icons = nil
	}
	return t
}

func (s *Server) listResources(ctx context.Context, req *Request) (any, error) {
	list, next, err := s.resourcePage(ctx, req) // skills_serve.go
	if err != nil {
		return nil, err
	}
	return listResult("resources", list, next), nil
}

func (s *Server) listTemplates(ctx context.Context, req *Request) (any, error) {
	entries, next, err := listVisible(ctx, s, req, KindResource, s.templates, func(e *templateEntry) []string { return e.tmpl.RequiredScopes })
	if err != nil {
		return nil, err
	}
	list := make([]ResourceTemplate, 0, len(entries))
	for _, e := range entries {
		list = append(list, templateFor(e.tmpl, req.version))
	}
	return listResult("resourceTemplates", list, next), nil
}

// resourceNotFound is -32002 up to 2025-11-25 and -32602 on 2026-07-28.
func resourceNotFound(req *Request, uri string) error {
	code := int64(jsonrpc.CodeResourceNotFound)
	if req.modern {
		code = jsonrpc.CodeInvalidParams
	}
	return jsonrpc.NewError(code, fmt.Sprintf("resource not found: %s", uri), map[string]any{"uri": uri})
}

func (s *Server) readResource(ctx context.Context, req *Request) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if p.URI == "" {
		return nil, invalidParam("uri", "is required")
	}
	if res, ok, err := s.readSkillFile(ctx, req, p.URI); ok || err != nil {
		return res, err
	}
	h, vars, err := s.resourceHandler(ctx, req, p.URI)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, resourceNotFound(req, p.URI)
	}
	res, err := h(ctx, req, p.URI, vars)
	if err != nil {
		if jsonrpc.ErrResourceNotFound.Is(jsonrpc.AsError(err)) {
			return nil, resourceNotFound(req, p.URI)
		}
		return nil, err
	}
	if res == nil || res.Contents == nil {
		return nil, resourceNotFound(req, p.URI)
	}
	return res, nil
}

// resourceHandler finds what reads uri for the caller of req: the static
// resource, or else the first template in order that matches it. A
// resource or template the caller may not see is passed over as if it
// were not registered (a disabled static resource hides its URI from the
// templates too); one it lacks the scopes for is an
// InsufficientScopeError. A nil handler means not found.
func (s *Server) resourceHandler(ctx context.Context, req *Request, uri string) (ResourceHandler, map[string]string, error) {
	s.mu.RLock()
	static, enabled := s.resources[uri], s.enabledLocked(featureKey(KindResource, uri))
	keys := s.enabledKeys(KindResource, sortedKeys(s.templates))
	tmpls := make([]*templateEntry, len(keys))
	for i, k := range keys {
		tmpls[i] = s.templates[k]
	}
	s.mu.RUnlock()
	if static != nil {
		if !enabled {
			return nil, nil, nil
		}
		err := s.access(ctx, req, KindResource, uri, static.res.RequiredScopes)
		if !errors.Is(err, errHidden) {
			return static.handler, nil, err
		}
	}
	for i, t := range tmpls {
		m, ok := t.parsed.Match(uri)
		if !ok {
			continue
		}
		err := s.access(ctx, req, KindResource, keys[i], t.tmpl.RequiredScopes)
		if !errors.Is(err, errHidden) {
			return t.handler, m, err
		}
	}
	return nil, nil, nil
}

func promptFor(p Prompt, v string) Prompt {
	if !atLeast(v, Version20250618) {
		p.Title, p.Meta = "", nil
		if len(p.Arguments) > 0 {
			args := make([]PromptArgument, len(p.Arguments))
			for i, a := range p.Arguments {
				a.Title = ""
				args[i] = a
			}
			p.Arguments = args
		}
	}
	if !atLeast(v, Version20251125) {
		p.Icons = nil
	}
	return p
}

func (s *Server) listPrompts(ctx context.Context, req *Request) (any, error) {
	entries, next, err := listVisible(ctx, s, req, KindPrompt, s.prompts, func(e *promptEntry) []string { return e.prompt.RequiredScopes })
	if err != nil {
		return nil, err
	}
	list := make([]Prompt, 0, len(entries))
	for _, e := range entries {
		list = append(list, promptFor(e.prompt, req.version))
	}
	return listResult("prompts", list, next), nil
}

// visiblePrompt returns the prompt name the caller of req may use: nil
// when it is not registered, disabled or hidden, or an
// InsufficientScopeError.
func (s *Server) visiblePrompt(ctx context.Context, req *Request, name string) (*promptEntry, error) {
	return visibleEntry(ctx, s, req, KindPrompt, name, s.prompts, func(e *promptEntry) []string { return e.prompt.RequiredScopes })
}

func (s *Server) getPrompt(ctx context.Context, req *Request) (any, error) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	e, err := s.visiblePrompt(ctx, req, p.Name)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown prompt %q", p.Name), map[string]any{"field": "name"})
	}
	for _, a := range e.prompt.Arguments {
		if _, ok := p.Arguments[a.Name]; a.Required && !ok {
			return nil, invalidParam("arguments."+a.Name, "is required")
		}
	}
	res, err := e.handler(ctx, req, p.Arguments)
	if err != nil {
		return nil, err
	}
	if res.Messages == nil {
		res.Messages = []PromptMessage{}
	}
	if !atLeast(req.version, Version20250618) {
		out := *res
		out.Messages = make([]PromptMessage, len(res.Messages))
		for i, m := range res.Messages {
			m.Content = contentFor([]Content{m.Content}, req.version)[0]
			out.Messages[i] = m
		}
		res = &out
	}
	return res, nil
}

func (s *Server) complete(ctx context.Context, req *Request) (any, error) {
	s.mu.RLock()
	h := s.completion
	s.mu.RUnlock()
	if h == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "completion is not supported")
	}
	var p CompleteRequest
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	switch p.Ref.Type {
	case "ref/prompt":
		e, err := s.visiblePrompt(ctx, req, p.Ref.Name)
		if err != nil {
			return nil, err
		}
		if e == nil {
			return nil, invalidParam("ref.name", fmt.Sprintf("%q is not a prompt", p.Ref.Name))
		}
	case "ref/resource":
		if p.Ref.URI == "" {
			return nil, invalidParam("ref.uri", "is required")
		}
	default:
		return nil, invalidParam("ref.type", "must be ref/prompt or ref/resource")
	}
	c, err := h(ctx, req, &p)
	if err != nil {
		return nil, err
	}
	if c == nil {
		c = &Completion{}
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	if len(c.Values) > 100 {
		c.Values, c.HasMore = c.Values[:100], true
	}
	return map[string]any{"completion": c}, nil
}
