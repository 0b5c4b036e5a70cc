// Command gosdk is a benchmark peer: the official Go MCP SDK
// (github.com/modelcontextprotocol/go-sdk) serving, over stateful
// Streamable HTTP with in-memory sessions and an in-memory event store
// (so streams are resumable), the tools mcpbench drives: echo, progress,
// sample and toggle_extra_tool, with the same arguments and results as
// mcpcluster's demo tool pack.
package main

//lint:file-ignore SA1019 the peer serves sampling and logging, deprecated in 2026-07-28 but still part of the benchmark

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/bench/peers/serve"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type progressIn struct {
	Steps   int `json:"steps,omitempty" jsonschema:"number of progress notifications"`
	DelayMs int `json:"delayMs,omitempty" jsonschema:"pause between steps in milliseconds"`
}

type sampleIn struct {
	Prompt string `json:"prompt" jsonschema:"what to ask the client's model"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-peer", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Sends progress notifications, then returns."},
		func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
			steps := in.Steps
			if steps <= 0 {
				steps = 5
			}
			steps = min(steps, 1000)
			delay := time.Duration(min(max(in.DelayMs, 0), 10000)) * time.Millisecond
			token := req.Params.GetProgressToken()
			for i := 1; i <= steps; i++ {
				if token != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: float64(i), Total: float64(steps),
						Message: fmt.Sprintf("step %d of %d", i, steps),
					}); err != nil {
						return nil, nil, err
					}
				}
				if delay > 0 {
					select {
					case <-ctx.Done():
						return nil, nil, ctx.Err()
					case <-time.After(delay):
					}
				}
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "demo", Data: fmt.Sprintf("completed %d steps", steps)})
			return text(fmt.Sprintf("done after %d steps", steps)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks the client's model to answer a prompt (sampling)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
				MaxTokens: 100,
			})
			if err != nil {
				return nil, nil, err
			}
			t, ok := res.Content.(*mcp.TextContent)
			if !ok {
				return nil, nil, errors.New("the sampling answer is not text")
			}
			return text(t.Text), nil, nil
		})
	var mu sync.Mutex
	present := false
	mcp.AddTool(s, &mcp.Tool{Name: "toggle_extra_tool", Description: "Adds the tool 'extra' if absent, removes it if present."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			if present {
				s.RemoveTools("extra")
				present = false
				return text("removed"), nil, nil
			}
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "A tool added at run time."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text("extra"), nil, nil
				})
			present = true
			return text("added"), nil, nil
		})
	return s
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address; the endpoint is http://ADDR/mcp")
	events := flag.Bool("event-store", true, "keep an in-memory event store, so that cut streams can be resumed")
	flag.Parse()
	s := newServer()
	opts := &mcp.StreamableHTTPOptions{}
	if *events {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)
	serve.Run("go-sdk peer", *addr, h)
}
