// Command mcpgo is a benchmark peer: github.com/mark3labs/mcp-go serving,
// over stateful Streamable HTTP with in-memory sessions and an in-memory
// event store (so streams are resumable), the tools mcpbench drives:
// echo, progress, sample and toggle_extra_tool, with the same arguments
// and results as mcpcluster's demo tool pack.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/bench/peers/serve"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func newServer() *server.MCPServer {
	s := server.NewMCPServer("mcpgo-peer", "1",
		server.WithToolCapabilities(true),
		server.WithLogging(),
	)
	s.EnableSampling()
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Returns its text argument."),
		mcp.WithString("text", mcp.Required(), mcp.Description("the text to send back"))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("progress", mcp.WithDescription("Sends progress notifications, then returns."),
		mcp.WithNumber("steps", mcp.Description("number of progress notifications")),
		mcp.WithNumber("delayMs", mcp.Description("pause between steps in milliseconds"))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			steps := req.GetInt("steps", 5)
			if steps <= 0 {
				steps = 5
			}
			steps = min(steps, 1000)
			delay := time.Duration(min(max(req.GetInt("delayMs", 0), 0), 10000)) * time.Millisecond
			var token mcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			for i := 1; i <= steps; i++ {
				if token != nil {
					if err := s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
						"progressToken": token, "progress": i, "total": steps,
						"message": fmt.Sprintf("step %d of %d", i, steps),
					}); err != nil {
						return nil, err
					}
				}
				if delay > 0 {
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(delay):
					}
				}
			}
			_ = s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "demo", fmt.Sprintf("completed %d steps", steps)))
			return mcp.NewToolResultText(fmt.Sprintf("done after %d steps", steps)), nil
		})
	// sample is written the 2026-07-28 way (multi round-trip): it returns
	// input_required until the answer comes back in inputResponses;
	// mcp-go bridges it for older clients with a server→client request.
	s.AddTool(mcp.NewTool("sample", mcp.WithDescription("Asks the client's model to answer a prompt (sampling)."),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("what to ask the client's model"))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if res := server.SamplingResponse(req.Params.InputResponses, "sample"); res != nil {
				if t, ok := textOf(res.Content); ok {
					return mcp.NewToolResultText(t), nil
				}
				return nil, errors.New("the sampling answer is not text")
			}
			return server.NewInputRequestBuilder("").Sample("sample", mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.TextContent{Type: "text", Text: req.GetString("prompt", "")}}},
				MaxTokens: 100,
			}).ToolResult(), nil
		})
	var mu sync.Mutex
	present := false
	s.AddTool(mcp.NewTool("toggle_extra_tool", mcp.WithDescription("Adds the tool 'extra' if absent, removes it if present.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if present {
				s.DeleteTools("extra")
				present = false
				return mcp.NewToolResultText("removed"), nil
			}
			s.AddTool(mcp.NewTool("extra", mcp.WithDescription("A tool added at run time.")),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("extra"), nil
				})
			present = true
			return mcp.NewToolResultText("added"), nil
		})
	return s
}

// textOf reads the text of a sampling answer's content, decoded either
// as a TextContent or as a generic map.
func textOf(content any) (string, bool) {
	if t, ok := mcp.AsTextContent(content); ok {
		return t.Text, true
	}
	if m, ok := content.(map[string]any); ok {
		t, ok := m["text"].(string)
		return t, ok
	}
	return "", false
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8091", "listen address; the endpoint is http://ADDR/mcp")
	flag.Parse()
	h := server.NewStreamableHTTPServer(newServer(), server.WithEventStore(server.NewInMemoryEventStore()))
	serve.Run("mcp-go peer", *addr, h)
}
