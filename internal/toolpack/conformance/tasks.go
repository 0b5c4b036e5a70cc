package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// The fixtures of the tasks extension scenarios (tasks-*, SEP-2663): a
// sync tool, tools that run as tasks (TaskSupport), one that asks for
// input inside its task, one that asks twice at once, and one that
// gathers input through MRTR before it continues as a task.

func registerTasks(s *mcp.Server) {
	type greetArgs struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, mcp.Tool{Name: "greet", Description: "Greets by name, at once (never a task)"},
		func(ctx context.Context, req *mcp.Request, in greetArgs) (string, error) {
			return fmt.Sprintf("Hello, %s!", in.Name), nil
		})

	type computeArgs struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label,omitempty"`
	}
	yes := true
	mcp.AddTool(s, mcp.Tool{
		Name: "slow_compute", Description: "Sleeps the given seconds, then answers (a task when the client takes tasks)",
		TaskSupport: mcp.TaskOptional, Annotations: &mcp.ToolAnnotations{IdempotentHint: &yes},
	}, func(ctx context.Context, req *mcp.Request, in computeArgs) (string, error) {
		if in.Seconds < 0 || in.Seconds > 3600 {
			return "", errors.New("seconds must lie in [0, 3600]")
		}
		if err := sleep(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
			return "", err
		}
		return fmt.Sprintf("computed %s after %vs", in.Label, in.Seconds), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name: "failing_job", Description: "Runs only as a task and ends with a tool error after about a second",
		TaskSupport: mcp.TaskRequired,
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (string, error) {
		if err := sleep(ctx, time.Second); err != nil {
			return "", err
		}
		return "", errors.New("the job failed, as it always does")
	})

	mcp.AddTool(s, mcp.Tool{
		Name: "protocol_error_job", Description: "Runs as a task and fails with a protocol error",
		TaskSupport: mcp.TaskOptional,
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (string, error) {
		return "", mcp.NewError(mcp.CodeInternalError, "the job hit an internal error", nil)
	})

	type deleteArgs struct {
		Filename string `json:"filename"`
	}
	mcp.AddTool(s, mcp.Tool{
		Name: "confirm_delete", Description: "Asks the user to confirm, inside its task, before deleting a file",
		TaskSupport: mcp.TaskOptional,
	}, func(ctx context.Context, req *mcp.Request, in deleteArgs) (string, error) {
		ok, err := elicitKeyed(ctx, req, "confirm", "Delete "+in.Filename+"?", "confirm", "boolean")
		if err != nil {
			return "", err
		}
		if ok != true {
			return "kept " + in.Filename, nil
		}
		return "deleted " + in.Filename, nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name: "multi_input", Description: "Asks two questions at once inside its task",
		TaskSupport: mcp.TaskOptional,
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (string, error) {
		var wg sync.WaitGroup
		answers := make([]any, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("q%d", i+1)
				answers[i], errs[i] = elicitKeyed(ctx, req, key, "Your name?", "name", "string")
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		return fmt.Sprintf("got %v and %v", answers[0], answers[1]), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_tool_with_task",
		Description: "Asks the user's name (MRTR input request user_name), then continues as a task that greets them",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		name, err := elicitKeyed(ctx, req, "user_name", "What is your name?", "name", "string")
		if err != nil {
			return nil, err
		}
		return req.ContinueAsTask(ctx, func(ctx context.Context) (*mcp.CallToolResult, error) {
			return mcp.TextResult(fmt.Sprintf("Hello, %v!", name)), nil
		})
	})
}
