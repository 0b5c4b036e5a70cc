package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// The fixtures of the 2026-07-28 scenarios (conformance suite 0.2):
// diagnostic tools of server-stateless, the list-mutation hooks, the
// MRTR (SEP-2322) tools and prompt, and a tool whose argument travels in
// an Mcp-Param header (SEP-2243).

// Names of the entries the trigger hooks add and remove. The lists end
// as they began, so the nodes of a cluster keep serving the same lists.
const (
	dynamicTool   = "test_dynamic_tool"
	dynamicPrompt = "test_dynamic_prompt"
)

// formSchema is a form asking for one required property of type typ.
func formSchema(prop, typ string) map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{prop: map[string]any{"type": typ}},
		"required":   []string{prop},
	}
}

// elicitKeyed asks the client, under input key key, for one property of
// form; it returns the property's value as the client sent it.
func elicitKeyed(ctx context.Context, req *mcp.Request, key, message, prop, typ string) (any, error) {
	res, err := req.Elicit(mcp.WithInputKey(ctx, key), &mcp.ElicitParams{Message: message, RequestedSchema: formSchema(prop, typ)})
	if err != nil {
		return nil, err
	}
	if res.Action != "accept" {
		return nil, fmt.Errorf("the user chose %q", res.Action)
	}
	return res.Content[prop], nil
}

// askAll runs every ask and returns the first error that is not an MRTR
// input request, else the first input request: the client then receives
// all unanswered requests at once.
func askAll(asks ...func() error) error {
	var pending error
	for _, ask := range asks {
		err := ask()
		switch {
		case err == nil:
		case mcp.IsInputRequired(err):
			if pending == nil {
				pending = err
			}
		default:
			return err
		}
	}
	return pending
}

func sampleKeyed(ctx context.Context, req *mcp.Request, key, prompt string, maxTokens int) (string, error) {
	res, err := req.Sample(mcp.WithInputKey(ctx, key), &mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent(prompt)}}},
		MaxTokens: maxTokens,
	})
	if err != nil {
		return "", err
	}
	return res.Text(), nil
}

func rootsKeyed(ctx context.Context, req *mcp.Request, key string) ([]string, error) {
	res, err := req.ListRoots(mcp.WithInputKey(ctx, key))
	if err != nil {
		return nil, err
	}
	uris := make([]string, len(res.Roots))
	for i, r := range res.Roots {
		uris[i] = r.URI
	}
	return uris, nil
}

// greet asks the user's name (input request user_name) and greets them.
func greet(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
	name, err := elicitKeyed(ctx, req, "user_name", "What is your name?", "name", "string")
	if err != nil {
		return nil, err
	}
	return mcp.TextResult(fmt.Sprintf("Hello, %v!", name)), nil
}

// sampleTool returns a tool handler that asks the client's model prompt
// under input key key and returns its answer.
func sampleTool(key, prompt string, maxTokens int) func(context.Context, *mcp.Request, noArgs) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		text, err := sampleKeyed(ctx, req, key, prompt, maxTokens)
		if err != nil {
			return nil, err
		}
		return mcp.TextResult("LLM response: " + text), nil
	}
}

// requestStateMarker is the handler state test_input_required_result_request_state
// carries across its rounds (sealed into requestState).
const requestStateMarker = "conformance-request-state"

type regionArgs struct {
	Region string `json:"region"`
}

const headerSchema = `{
  "type": "object",
  "properties": {
    "region": {"type": "string", "description": "Region to report", "x-mcp-header": "Region"}
  },
  "required": ["region"]
}`

func registerModern(s *mcp.Server) {
	registerDiagnostics(s)
	registerMRTR(s)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_custom_header",
		Description: "Echoes its region argument, which clients also send in the Mcp-Param-Region header (SEP-2243)",
		InputSchema: json.RawMessage(headerSchema),
	}, func(ctx context.Context, req *mcp.Request, in regionArgs) (*mcp.CallToolResult, error) {
		return mcp.TextResult("region=" + in.Region), nil
	})
}

// registerDiagnostics adds the server-stateless probes and the hooks that
// change the tool and prompt lists.
func registerDiagnostics(s *mcp.Server) {
	mcp.AddTool(s, mcp.Tool{
		Name:        "test_missing_capability",
		Description: "Needs the client's sampling capability; a client without it gets -32021",
	}, sampleTool("completion", "Say hello", 20))

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_streaming_elicitation",
		Description: "Asks the user for a name; on 2026-07-28 as an input request in the result, never as a request on the stream",
	}, greet)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_logging_tool",
		Description: "Logs three messages; they are sent only when the request sets a log level",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		for _, m := range []string{"first", "second", "third"} {
			if err := req.Log(ctx, mcp.LevelInfo, "test_logging_tool", m+" log message"); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("logged three messages"), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_trigger_tool_change",
		Description: "Adds " + dynamicTool + " and removes it again: two tool list changes that leave the list as it was",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		mcp.AddTool(s, mcp.Tool{
			Name:        dynamicTool,
			Description: "Added and removed by test_trigger_tool_change",
		}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
			return mcp.TextResult("dynamic tool"), nil
		})
		s.RemoveTools(dynamicTool)
		return mcp.TextResult("added and removed " + dynamicTool), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_trigger_prompt_change",
		Description: "Adds " + dynamicPrompt + " and removes it again: two prompt list changes that leave the list as it was",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		s.AddPrompt(mcp.Prompt{
			Name:        dynamicPrompt,
			Description: "Added and removed by test_trigger_prompt_change",
		}, func(ctx context.Context, req *mcp.Request, _ map[string]string) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("dynamic prompt")}}}, nil
		})
		s.RemovePrompts(dynamicPrompt)
		return mcp.TextResult("added and removed " + dynamicPrompt), nil
	})
}

// registerMRTR adds the SEP-2322 (multi round-trip requests) fixtures.
// Each asks through the ordinary Elicit/Sample/ListRoots calls; on
// 2026-07-28 those become input requests named by WithInputKey.
func registerMRTR(s *mcp.Server) {
	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_elicitation",
		Description: "Asks the user's name (input request user_name) and greets them",
	}, greet)

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_sampling",
		Description: "Asks the client's model a question (input request capital_question)",
	}, sampleTool("capital_question", "What is the capital of France?", 100))

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_list_roots",
		Description: "Asks the client for its roots (input request client_roots)",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		uris, err := rootsKeyed(ctx, req, "client_roots")
		if err != nil {
			return nil, err
		}
		return mcp.TextResult("Roots: " + strings.Join(uris, ", ")), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_request_state",
		Description: "Carries handler state across rounds in requestState and confirms it (state-ok)",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		carried := req.State()
		if carried == nil {
			req.SetState([]byte(requestStateMarker))
		}
		ok, err := elicitKeyed(ctx, req, "confirm", "Please confirm", "ok", "boolean")
		if err != nil {
			return nil, err
		}
		// On 2026-07-28 the answer arrives in a retry, which must carry
		// the state set in the first round.
		if req.Stateless() && string(carried) != requestStateMarker {
			return nil, fmt.Errorf("the retry carried no valid requestState (state %q)", carried)
		}
		return mcp.TextResult(fmt.Sprintf("state-ok: confirmed=%v", ok)), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_multiple_inputs",
		Description: "Asks for a name, a model's greeting and the client's roots in one round",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		var name any
		var greeting string
		var roots []string
		err := askAll(
			func() (err error) {
				name, err = elicitKeyed(ctx, req, "user_name", "What is your name?", "name", "string")
				return err
			},
			func() (err error) {
				greeting, err = sampleKeyed(ctx, req, "greeting", "Generate a greeting", 50)
				return err
			},
			func() (err error) {
				roots, err = rootsKeyed(ctx, req, "client_roots")
				return err
			},
		)
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(fmt.Sprintf("name=%v, greeting=%s, roots=%s", name, greeting, strings.Join(roots, ", "))), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_multi_round",
		Description: "Asks for a name, then in a second round for a favourite colour",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		name, err := elicitKeyed(ctx, req, "step1", "Step 1: What is your name?", "name", "string")
		if err != nil {
			return nil, err
		}
		color, err := elicitKeyed(ctx, req, "step2", "Step 2: What is your favorite color?", "color", "string")
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(fmt.Sprintf("%v likes %v", name, color)), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_tampered_state",
		Description: "Asks for a confirmation; a retry whose requestState was altered is rejected",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		ok, err := elicitKeyed(ctx, req, "confirm", "Please confirm", "ok", "boolean")
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(fmt.Sprintf("confirmed=%v", ok)), nil
	})

	mcp.AddTool(s, mcp.Tool{
		Name:        "test_input_required_result_capabilities",
		Description: "Asks only through the capabilities the client declared (elicitation, sampling)",
	}, func(ctx context.Context, req *mcp.Request, _ noArgs) (*mcp.CallToolResult, error) {
		caps := req.ClientCapabilities()
		var asks []func() error
		var got []string
		if caps.Elicitation != nil {
			asks = append(asks, func() error {
				name, err := elicitKeyed(ctx, req, "user_name", "What is your name?", "name", "string")
				got = append(got, fmt.Sprintf("name=%v", name))
				return err
			})
		}
		if caps.Sampling != nil {
			asks = append(asks, func() error {
				text, err := sampleKeyed(ctx, req, "greeting", "Generate a greeting", 50)
				got = append(got, "greeting="+text)
				return err
			})
		}
		if len(asks) == 0 {
			return mcp.TextResult("the client declared neither elicitation nor sampling"), nil
		}
		if err := askAll(asks...); err != nil {
			return nil, err
		}
		return mcp.TextResult(strings.Join(got, ", ")), nil
	})

	s.AddPrompt(mcp.Prompt{
		Name:        "test_input_required_result_prompt",
		Description: "Asks the user for context (input request user_context) before rendering",
	}, func(ctx context.Context, req *mcp.Request, _ map[string]string) (*mcp.GetPromptResult, error) {
		text, err := elicitKeyed(ctx, req, "user_context", "What context should the prompt use?", "context", "string")
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
			{Role: "user", Content: mcp.TextContent(fmt.Sprintf("Use this context: %v", text))},
		}}, nil
	})
}
