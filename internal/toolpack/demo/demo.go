// Package demo is the reference node's default tool pack: enough to
// exercise every feature from a real client — an echo, structured output,
// progress and logging, sampling, form elicitation, roots, a resource
// that changes and notifies its subscribers, a resource template, a
// prompt with completion, a tool that changes the tool list at run time,
// and a skill (skills.go).
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// CounterURI is the resource bump_counter changes.
const CounterURI = "demo://counter"

// EchoIn is the input of echo.
type EchoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

// AddIn is the input of add.
type AddIn struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

// AddOut is the structured output of add.
type AddOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

// ProgressIn is the input of progress.
type ProgressIn struct {
	Steps   int `json:"steps,omitempty" jsonschema:"number of progress notifications (default 5, at most 1000)"`
	DelayMs int `json:"delayMs,omitempty" jsonschema:"pause between steps in milliseconds (default 0, at most 10000)"`
}

// SampleIn is the input of sample.
type SampleIn struct {
	Prompt    string `json:"prompt" jsonschema:"what to ask the client's model"`
	MaxTokens int    `json:"maxTokens,omitempty" jsonschema:"token limit of the answer (default 100)"`
}

// ElicitIn is the input of elicit.
type ElicitIn struct {
	Message string `json:"message,omitempty" jsonschema:"what to tell the user"`
}

// Register adds the demo pack to s.
func Register(s *mcp.Server) {
	mcp.AddTool(s, mcp.Tool{Name: "echo", Description: "Returns its text argument.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ptr(true), OpenWorldHint: ptr(false)}},
		func(_ context.Context, _ *mcp.Request, in EchoIn) (string, error) { return in.Text, nil })
	// echo_task is echo run as a durable task when the client takes one
	// (the mcpbench tasks scenario measures the task machinery with it).
	mcp.AddTool(s, mcp.Tool{Name: "echo_task", Description: "Returns its text argument, as a task when the client takes tasks.", TaskSupport: mcp.TaskOptional,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ptr(true), OpenWorldHint: ptr(false), IdempotentHint: ptr(true)}},
		func(_ context.Context, _ *mcp.Request, in EchoIn) (string, error) { return in.Text, nil })

	mcp.AddTool(s, mcp.Tool{Name: "add", Title: "Add", Description: "Adds two numbers and returns the sum as structured output."},
		func(_ context.Context, _ *mcp.Request, in AddIn) (AddOut, error) {
			return AddOut{Sum: in.A + in.B}, nil
		})

	mcp.AddTool(s, mcp.Tool{Name: "progress", Description: "Sends progress notifications and log messages, then returns."},
		func(ctx context.Context, req *mcp.Request, in ProgressIn) (string, error) {
			steps := in.Steps
			if steps <= 0 {
				steps = 5
			}
			steps = min(steps, 1000)
			delay := time.Duration(min(max(in.DelayMs, 0), 10000)) * time.Millisecond
			for i := 1; i <= steps; i++ {
				if err := req.Progress(ctx, float64(i), float64(steps), fmt.Sprintf("step %d of %d", i, steps)); err != nil {
					return "", err
				}
				if delay > 0 {
					select {
					case <-ctx.Done():
						return "", ctx.Err()
					case <-time.After(delay):
					}
				}
			}
			_ = req.Log(ctx, mcp.LevelInfo, "demo", fmt.Sprintf("completed %d steps", steps))
			return fmt.Sprintf("done after %d steps", steps), nil
		})

	mcp.AddTool(s, mcp.Tool{Name: "sample", Description: "Asks the client's model to answer a prompt (sampling) and returns the answer."},
		func(ctx context.Context, req *mcp.Request, in SampleIn) (string, error) {
			maxTokens := in.MaxTokens
			if maxTokens <= 0 {
				maxTokens = 100
			}
			res, err := req.Sample(ctx, &mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent(in.Prompt)}}},
				MaxTokens: maxTokens,
			})
			if err != nil {
				return "", err
			}
			return res.Text(), nil
		})

	mcp.AddTool(s, mcp.Tool{Name: "elicit", Description: "Asks the user for a name and an email address (form elicitation)."},
		func(ctx context.Context, req *mcp.Request, in ElicitIn) (string, error) {
			msg := in.Message
			if msg == "" {
				msg = "Please tell us who you are."
			}
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":  map[string]any{"type": "string", "description": "your name"},
					"email": map[string]any{"type": "string", "format": "email", "description": "your email address"},
				},
				"required": []string{"name", "email"},
			}})
			if err != nil {
				return "", err
			}
			if res.Action != "accept" {
				return "the user chose to " + res.Action, nil
			}
			b, _ := json.Marshal(res.Content)
			return "received " + string(b), nil
		})

	mcp.AddTool(s, mcp.Tool{Name: "roots", Description: "Lists the client's roots."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.ListRoots(ctx)
			if err != nil {
				return "", err
			}
			uris := make([]string, 0, len(res.Roots))
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return strings.Join(uris, "\n"), nil
		})

	var counter atomic.Int64
	s.AddResource(mcp.Resource{URI: CounterURI, Name: "counter", Description: "A counter that bump_counter increments; subscribe to hear about it.", MimeType: "text/plain"},
		func(_ context.Context, _ *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/plain", Text: strconv.FormatInt(counter.Load(), 10)}}}, nil
		})
	mcp.AddTool(s, mcp.Tool{Name: "bump_counter", Description: "Increments " + CounterURI + " and notifies its subscribers."},
		func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			n := counter.Add(1)
			s.ResourceUpdated(ctx, CounterURI)
			return strconv.FormatInt(n, 10), nil
		})

	s.AddResourceTemplate(mcp.ResourceTemplate{URITemplate: "demo://greeting/{name}", Name: "greeting", Description: "A greeting for anyone.", MimeType: "text/plain"},
		func(_ context.Context, _ *mcp.Request, uri string, vars map[string]string) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/plain", Text: "Hello, " + vars["name"] + "!"}}}, nil
		})

	s.AddPrompt(mcp.Prompt{Name: "greet", Description: "Writes a greeting.", Arguments: []mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}}},
		func(_ context.Context, _ *mcp.Request, args map[string]string) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A greeting", Messages: []mcp.PromptMessage{
				{Role: "user", Content: mcp.TextContent("Write a warm greeting for " + args["name"] + ".")},
			}}, nil
		})
	names := []string{"Ada", "Alan", "Barbara", "Edsger", "Grace", "Ken", "Linus", "Margaret"}
	s.SetCompletionHandler(func(_ context.Context, _ *mcp.Request, p *mcp.CompleteRequest) (*mcp.Completion, error) {
		if p.Ref.Type != "ref/prompt" || p.Ref.Name != "greet" || p.Argument.Name != "name" {
			return &mcp.Completion{}, nil
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(strings.ToLower(n), strings.ToLower(p.Argument.Value)) {
				out = append(out, n)
			}
		}
		total := len(out)
		return &mcp.Completion{Values: out, Total: &total}, nil
	})

	registerSkills(s)

	// 'extra' is registered on every node, disabled; toggling it is
	// cluster state (SetEnabled), so every node lists the same tools.
	mcp.AddTool(s, mcp.Tool{Name: "extra", Description: "A tool added at run time."},
		func(context.Context, *mcp.Request, struct{}) (string, error) { return "extra", nil })
	if err := s.SetEnabled(context.Background(), mcp.KindTool, "extra", false); err != nil {
		panic(err) // unreachable: just registered
	}
	// The toggle flips the cluster's state in one atomic step of the
	// shared store (not what this node last saw of it), so toggles sent
	// to different nodes in quick succession each flip it.
	mcp.AddTool(s, mcp.Tool{Name: "toggle_extra_tool", Description: "Adds the tool 'extra' if absent, removes it if present (clients get tools/list_changed)."},
		func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			on, err := s.ToggleEnabled(ctx, mcp.KindTool, "extra")
			if err != nil {
				return "", err
			}
			if on {
				return "added", nil
			}
			return "removed", nil
		})
}

func ptr[T any](v T) *T { return &v }
