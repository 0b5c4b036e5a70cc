package mcp

import (
	"context"
	"encoding/json"
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

func (s *Server) listTools(req *Request) (any, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	keys, next, err := page(s.enabledKeys(KindTool, sortedKeys(s.tools)), p.Cursor, s.opts.pageSize())
	tools := make([]Tool, 0, len(keys))
	for _, k := range keys {
		tools = append(tools, toolFor(s.tools[k].tool, req.version))
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	res := map[string]any{"tools": tools}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (s *Server) callTool(ctx context.Context, req *Request) (any, error) {
	var p callParams
	if err := decodeParams(req.Params, &p); err != nil {
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
	if e == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown tool %q", p.Name), map[string]any{"field": "name"})
	}
	if len(p.Arguments) > 0 && p.Arguments[0] != '{' && string(p.Arguments) != "null" {
		return nil, invalidParam("arguments", "must be an object")
	}
	res, err := e.handler(ctx, req, p.Arguments)
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

func (s *Server) listResources(req *Request) (any, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	keys, next, err := page(s.enabledKeys(KindResource, sortedKeys(s.resources)), p.Cursor, s.opts.pageSize())
	list := make([]Resource, 0, len(keys))
	for _, k := range keys {
		list = append(list, resourceFor(s.resources[k].res, req.version))
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	res := map[string]any{"resources": list}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

func (s *Server) listTemplates(req *Request) (any, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	keys, next, err := page(s.enabledKeys(KindResource, sortedKeys(s.templates)), p.Cursor, s.opts.pageSize())
	list := make([]ResourceTemplate, 0, len(keys))
	for _, k := range keys {
		list = append(list, templateFor(s.templates[k].tmpl, req.version))
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	res := map[string]any{"resourceTemplates": list}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
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
	var h ResourceHandler
	var vars map[string]string
	s.mu.RLock()
	if e := s.resources[p.URI]; e != nil && s.enabledLocked(featureKey(KindResource, p.URI)) {
		h = e.handler
	} else if e == nil {
		for _, k := range s.enabledKeys(KindResource, sortedKeys(s.templates)) {
			if m, ok := s.templates[k].parsed.Match(p.URI); ok {
				h, vars = s.templates[k].handler, m
				break
			}
		}
	}
	s.mu.RUnlock()
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

func (s *Server) listPrompts(req *Request) (any, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	keys, next, err := page(s.enabledKeys(KindPrompt, sortedKeys(s.prompts)), p.Cursor, s.opts.pageSize())
	list := make([]Prompt, 0, len(keys))
	for _, k := range keys {
		list = append(list, promptFor(s.prompts[k].prompt, req.version))
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	res := map[string]any{"prompts": list}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

func (s *Server) getPrompt(ctx context.Context, req *Request) (any, error) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	e := s.prompts[p.Name]
	if !s.enabledLocked(featureKey(KindPrompt, p.Name)) {
		e = nil
	}
	s.mu.RUnlock()
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
		s.mu.RLock()
		_, ok := s.prompts[p.Ref.Name]
		ok = ok && s.enabledLocked(featureKey(KindPrompt, p.Ref.Name))
		s.mu.RUnlock()
		if !ok {
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
