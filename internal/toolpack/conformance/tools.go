package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// Texts the suite's scenarios describe.
const (
	simpleText   = "This is a simple text response for testing."
	errorText    = "This tool intentionally returns an error for testing"
	embeddedText = "This is an embedded resource content."
)

// step is the pause between the notifications of the logging and
// progress tools, so a client sees them arrive during the call.
const step = 50 * time.Millisecond

// reconnectDelay is how long test_reconnection goes on after closing its
// stream, so the result is produced while the client is reconnecting.
const reconnectDelay = 100 * time.Millisecond

// noArgs is the input of the tools that take no arguments.
type noArgs struct{}

type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the client's model"`
}

type elicitationArgs struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

// address and schemaArgs are the input of json_schema_2020_12_tool; its
// schema is given explicitly (schema2020) rather than inferred, because
// the suite checks that $schema, $defs, additionalProperties and the
// SEP-2106 keywords (allOf/anyOf, if/then/else, $anchor) reach the client
// as written.
type address struct {
	Street string `json:"street,omitempty"`
	City   string `json:"city,omitempty"`
}

type schemaArgs struct {
	Name          string   `json:"name,omitempty"`
	Address       *address `json:"address,omitempty"`
	ContactMethod string   `json:"contactMethod,omitempty"`
	Phone         string   `json:"phone,omitempty"`
	Email         string   `json:"email,omitempty"`
}

const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"}
      }
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`

func registerTools(s *mcp.Server) {
	mcp.AddTool(s, mcp.Tool{
		Name:        "test_simple_text",
		Description: "Returns a simple text response",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return mcp.TextResult(simpleText), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_image_content",
		Description: "Returns a small PNG image",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.ImageContent(pngBase64, "image/png")}}, nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_audio_content",
		Description: "Returns a short WAV audio clip",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.AudioContent(audioBase64, "audio/wav")}}, nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_embedded_resource",
		Description: "Returns an embedded text resource",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.EmbeddedResource(mcp.ResourceContents{
			URI:      "test://embedded-resource",
			MimeType: "text/plain",
			Text:     embeddedText,
		})}}, nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_multiple_content_types",
		Description: "Returns text, an image and an embedded resource in one result",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.TextContent("Multiple content types test:"),
			mcp.ImageContent(pngBase64, "image/png"),
			mcp.EmbeddedResource(mcp.ResourceContents{
				URI:      "test://mixed-content-resource",
				MimeType: "application/json",
				Text:     `{"test":"data","value":123}`,
			}),
		}}, nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_tool_with_logging",
		Description: "Sends three info log messages while it runs",
	}, toolWithLogging)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_tool_with_progress",
		Description: "Reports progress 0, 50 and 100 of 100 while it runs",
	}, toolWithProgress)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_error_handling",
		Description: "Always fails with a tool execution error",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return mcp.ErrorResult(errorText), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_sampling",
		Description: "Asks the client's model to answer a prompt (sampling) and returns the answer",
	}, sampling)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_elicitation",
		Description: "Asks the user for a username and an email address (elicitation)",
	}, elicitation)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_elicitation_sep1034_defaults",
		Description: "Elicits a form whose fields of every primitive type carry defaults (SEP-1034)",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return elicitForm(ctx, req, "Please review and update the form fields with defaults", defaultsSchema())
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_elicitation_sep1330_enums",
		Description: "Elicits a form with every enum variant: untitled, titled, legacy, multi-select (SEP-1330)",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		return elicitForm(ctx, req, "Please select options from the enum fields", enumsSchema())
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features",
		InputSchema: json.RawMessage(schema2020),
	}, func(ctx context.Context, req *mcp.Request, in schemaArgs) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		return mcp.TextResult("JSON Schema 2020-12 tool called with: " + string(b)), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_reconnection",
		Description: "Closes its SSE stream mid-call and sends the result after the client reconnects (SEP-1699)",
	}, reconnection)
}

// sleep waits for d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func toolWithLogging(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, m := range msgs {
		if i > 0 {
			if err := sleep(ctx, step); err != nil {
				return nil, err
			}
		}
		if err := req.Log(ctx, mcp.LevelInfo, "test_tool_with_logging", m); err != nil {
			return nil, err
		}
	}
	return mcp.TextResult("Tool with logging executed successfully"), nil
}

func toolWithProgress(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
	const total = 100
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := sleep(ctx, step); err != nil {
				return nil, err
			}
		}
		if err := req.Progress(ctx, p, total, fmt.Sprintf("Completed step %d of 3", i+1)); err != nil {
			return nil, err
		}
	}
	return mcp.TextResult("Tool with progress executed successfully"), nil
}

func sampling(ctx context.Context, req *mcp.Request, in samplingArgs) (*mcp.CallToolResult, error) {
	res, err := req.Sample(ctx, &mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent(in.Prompt)}}},
		MaxTokens: 100,
	})
	if err != nil {
		return nil, fmt.Errorf("sampling failed: %w", err)
	}
	return mcp.TextResult("LLM response: " + res.Text()), nil
}

func elicitation(ctx context.Context, req *mcp.Request, in elicitationArgs) (*mcp.CallToolResult, error) {
	res, err := req.Elicit(ctx, &mcp.ElicitParams{
		Message: in.Message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("elicitation failed: %w", err)
	}
	return mcp.TextResult("User response: " + describeElicit(res)), nil
}

// elicitForm asks for schema with message and reports the answer.
func elicitForm(ctx context.Context, req *mcp.Request, message string, schema map[string]any) (*mcp.CallToolResult, error) {
	res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
	if err != nil {
		return nil, fmt.Errorf("elicitation failed: %w", err)
	}
	return mcp.TextResult("Elicitation completed: " + describeElicit(res)), nil
}

// describeElicit renders an elicitation answer as
// "action=ACTION, content={...}".
func describeElicit(res *mcp.ElicitResult) string {
	content := "{}"
	if len(res.Content) > 0 {
		if b, err := json.Marshal(res.Content); err == nil {
			content = string(b)
		}
	}
	return fmt.Sprintf("action=%s, content=%s", res.Action, content)
}

// defaultsSchema is the SEP-1034 form: one field of each primitive type,
// each with a default.
func defaultsSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":  map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":   map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score": map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status": map[string]any{
				"type": "string", "description": "User status",
				"enum": []string{"active", "inactive", "pending"}, "default": "active",
			},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		},
	}
}

// enumsSchema is the SEP-1330 form: the five ways to offer choices.
func enumsSchema() map[string]any {
	titled := func(prefix string, titles ...string) []map[string]any {
		out := make([]map[string]any, len(titles))
		for i, t := range titles {
			out[i] = map[string]any{"const": fmt.Sprintf("%s%d", prefix, i+1), "title": t}
		}
		return out
	}
	options := []string{"option1", "option2", "option3"}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{
				"type": "string", "description": "Choose one option",
				"enum": options,
			},
			"titledSingle": map[string]any{
				"type": "string", "description": "Choose one titled option",
				"oneOf": titled("value", "First Option", "Second Option", "Third Option"),
			},
			"legacyEnum": map[string]any{
				"type": "string", "description": "Choose one option (legacy enumNames)",
				"enum":      []string{"opt1", "opt2", "opt3"},
				"enumNames": []string{"Option One", "Option Two", "Option Three"},
			},
			"untitledMulti": map[string]any{
				"type": "array", "description": "Choose any options",
				"items": map[string]any{"type": "string", "enum": options},
			},
			"titledMulti": map[string]any{
				"type": "array", "description": "Choose any titled options",
				"items": map[string]any{"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")},
			},
		},
	}
}

// reconnection closes the client's connection of its SSE response stream
// mid-call and finishes afterwards, so the client receives the result
// only by resuming the stream with Last-Event-ID (SSE polling, SEP-1699).
func reconnection(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
	// A stream exists once the handler has sent something (its priming
	// event comes first on 2025-11-25 sessions); this message opens it.
	if err := req.Log(ctx, mcp.LevelInfo, "test_reconnection", "closing the SSE stream; resume it with Last-Event-ID to receive the result"); err != nil {
		return nil, err
	}
	req.CloseSSEStream()
	if err := sleep(ctx, reconnectDelay); err != nil {
		return nil, err
	}
	return mcp.TextResult("Reconnection test completed successfully. If you received this, the client resumed the stream."), nil
}
