package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/jsonschema"
)

// TypedToolHandler handles a tool whose input decodes into In and whose
// output Out becomes the result: a struct or map is returned as
// structuredContent (with its JSON as a text block for older clients), a
// string as a text block, and a *CallToolResult as is.
type TypedToolHandler[In, Out any] func(ctx context.Context, req *Request, in In) (Out, error)

// AddTool registers a typed tool. When t.InputSchema is empty it is
// inferred from In (In must be a struct or map); when t.OutputSchema is
// empty and Out is a struct, it is inferred from Out. Arguments are
// validated against the input schema before the handler runs; invalid
// arguments and errors returned by the handler become results with
// isError set, so a model can correct itself. A protocol error
// (a *Error, see NewError, possibly wrapped) and cancellation pass
// through as JSON-RPC errors.
//
// A bad registration (unnamed tool, a type whose schema cannot be
// inferred, a schema that does not compile) panics.
func AddTool[In, Out any](s *Server, t Tool, h TypedToolHandler[In, Out]) {
	if len(t.InputSchema) == 0 {
		sch, err := jsonschema.For(reflect.TypeFor[In]())
		if err != nil {
			panic(fmt.Sprintf("mcp: tool %q: input schema: %v", t.Name, err))
		}
		if _, ok := sch["type"]; !ok {
			sch["type"] = "object"
		}
		t.InputSchema = mustJSON(sch)
	}
	in, err := jsonschema.Compile(t.InputSchema)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool %q: input schema: %v", t.Name, err))
	}
	outType := reflect.TypeFor[Out]()
	rawResult := outType == reflect.TypeFor[*CallToolResult]()
	textResult := outType.Kind() == reflect.String
	if !rawResult && !textResult && len(t.OutputSchema) == 0 && isStructType(outType) {
		sch, err := jsonschema.For(outType)
		if err != nil {
			panic(fmt.Sprintf("mcp: tool %q: output schema: %v", t.Name, err))
		}
		t.OutputSchema = mustJSON(sch)
	}
	s.AddToolRaw(t, func(ctx context.Context, req *Request, args json.RawMessage) (*CallToolResult, error) {
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		if err := in.ValidateJSON(args); err != nil {
			return ErrorResult("invalid arguments: " + err.Error()), nil
		}
		var v In
		if err := json.Unmarshal(args, &v); err != nil {
			return ErrorResult("invalid arguments: " + err.Error()), nil
		}
		out, err := h(ctx, req, v)
		if err != nil {
			if passThrough(ctx, err) {
				return nil, err
			}
			return ErrorResult(err.Error()), nil
		}
		switch o := any(out).(type) {
		case *CallToolResult:
			if o == nil {
				return &CallToolResult{Content: []Content{}}, nil
			}
			return o, nil
		case string:
			return &CallToolResult{Content: []Content{TextContent(o)}}, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("mcp: tool %q: encode output: %w", t.Name, err)
		}
		res := &CallToolResult{Content: []Content{TextContent(string(b))}}
		if len(t.OutputSchema) > 0 {
			res.StructuredContent = json.RawMessage(b)
		}
		return res, nil
	})
}

// ErrorResult returns a tool result that reports an execution error.
func ErrorResult(msg string) *CallToolResult {
	return &CallToolResult{Content: []Content{TextContent(msg)}, IsError: true}
}

// TextResult returns a tool result with one text block.
func TextResult(text string) *CallToolResult {
	return &CallToolResult{Content: []Content{TextContent(text)}}
}

// passThrough reports whether a handler error must become a JSON-RPC error
// rather than an isError result: protocol errors, MRTR input requests, a
// call continued as a task, and cancellation.
func passThrough(ctx context.Context, err error) bool {
	var je *jsonrpc.Error
	var ir *inputRequired
	var ue *URLElicitationRequiredError
	var tc *errTaskCreated
	return errors.As(err, &je) || errors.As(err, &ir) || errors.As(err, &ue) || errors.As(err, &tc) ||
		errors.Is(err, context.Canceled) && ctx.Err() != nil
}

func isStructType(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
