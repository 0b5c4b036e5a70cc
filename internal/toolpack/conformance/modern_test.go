package conformance

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// modernMeta is the _meta of a 2026-07-28 request declaring caps.
func modernMeta(caps map[string]any) map[string]any {
	return map[string]any{
		mcp.MetaProtocolVersion:    mcp.Version20260728,
		mcp.MetaClientCapabilities: caps,
	}
}

var allCaps = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}

type round struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string `json:"method"`
	} `json:"inputRequests"`
	RequestState string            `json:"requestState"`
	Content      []mcp.Content     `json:"content"`
	Messages     []json.RawMessage `json:"messages"`
}

// answerFor is what a client would answer to an input request of method.
func answerFor(method string) map[string]any {
	switch method {
	case "elicitation/create":
		return map[string]any{"action": "accept", "content": map[string]any{"name": "Alice", "ok": true, "color": "blue", "context": "ctx"}}
	case "sampling/createMessage":
		return map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "Paris"}}
	default:
		return map[string]any{"roots": []any{map[string]any{"uri": "file:///r"}}}
	}
}

// The MRTR fixtures ask under the keys the suite's scenarios name, and
// complete once every round is answered with the sealed requestState.
func TestMRTRFixtures(t *testing.T) {
	c := startServer(t)
	cases := []struct {
		method, name string
		rounds       [][]string // input keys of each round
		want         string     // text of the final result
	}{
		{"tools/call", "test_input_required_result_elicitation", [][]string{{"user_name"}}, "Hello, Alice!"},
		{"tools/call", "test_input_required_result_sampling", [][]string{{"capital_question"}}, "LLM response: Paris"},
		{"tools/call", "test_input_required_result_list_roots", [][]string{{"client_roots"}}, "Roots: file:///r"},
		{"tools/call", "test_input_required_result_request_state", [][]string{{"confirm"}}, "state-ok: confirmed=true"},
		{"tools/call", "test_input_required_result_multiple_inputs", [][]string{{"client_roots", "greeting", "user_name"}}, "name=Alice, greeting=Paris, roots=file:///r"},
		{"tools/call", "test_input_required_result_multi_round", [][]string{{"step1"}, {"step2"}}, "Alice likes blue"},
		{"tools/call", "test_streaming_elicitation", [][]string{{"user_name"}}, "Hello, Alice!"},
		{"prompts/get", "test_input_required_result_prompt", [][]string{{"user_context"}}, "Use this context: ctx"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"name": tc.name, "_meta": modernMeta(allCaps)}
			if tc.method == "tools/call" {
				params["arguments"] = map[string]any{}
			}
			inputs := map[string]any{}
			for i, keys := range tc.rounds {
				var r round
				c.call(tc.method, params, &r)
				if r.ResultType != "input_required" || r.RequestState == "" {
					t.Fatalf("round %d: got %+v, want input_required with requestState", i+1, r)
				}
				if got := slices.Sorted(maps.Keys(r.InputRequests)); !slices.Equal(got, keys) {
					t.Fatalf("round %d: input keys %v, want %v", i+1, got, keys)
				}
				for k, ir := range r.InputRequests {
					inputs[k] = answerFor(ir.Method)
				}
				params["inputResponses"] = inputs
				params["requestState"] = r.RequestState
			}
			var r round
			c.call(tc.method, params, &r)
			var text string
			switch {
			case len(r.Content) > 0:
				text = r.Content[0].Text
			case len(r.Messages) > 0:
				var m mcp.PromptMessage
				_ = json.Unmarshal(r.Messages[0], &m)
				text = m.Content.Text
			}
			if r.ResultType == "input_required" || text != tc.want {
				t.Fatalf("final round: got %+v (text %q), want %q", r, text, tc.want)
			}
		})
	}
}

// test_input_required_result_capabilities asks only through what the
// client declared.
func TestMRTRCapabilities(t *testing.T) {
	c := startServer(t)
	var r round
	c.call("tools/call", map[string]any{
		"name": "test_input_required_result_capabilities", "arguments": map[string]any{},
		"_meta": modernMeta(map[string]any{"sampling": map[string]any{}}),
	}, &r)
	if r.ResultType != "input_required" || len(r.InputRequests) != 1 || r.InputRequests["greeting"].Method != "sampling/createMessage" {
		t.Fatalf("got %+v, want one sampling input request", r)
	}
}

// The trigger hooks change the tool or prompt list (list_changed goes
// out) and leave it as it was, so every node of a cluster lists the same.
func TestTriggers(t *testing.T) {
	c := startServer(t)
	c.initialize()
	names := func(method, field string) []string {
		var res map[string][]struct {
			Name string `json:"name"`
		}
		c.call(method, map[string]any{}, &res)
		var out []string
		for _, e := range res[field] {
			out = append(out, e.Name)
		}
		return out
	}
	for _, tc := range []struct{ hook, method, field, note string }{
		{"test_trigger_tool_change", "tools/list", "tools", "notifications/tools/list_changed"},
		{"test_trigger_prompt_change", "prompts/list", "prompts", "notifications/prompts/list_changed"},
	} {
		before := names(tc.method, tc.field)
		c.notes = nil
		var res mcp.CallToolResult
		c.call("tools/call", map[string]any{"name": tc.hook}, &res)
		after := names(tc.method, tc.field)
		if res.IsError || !slices.Equal(before, after) {
			t.Errorf("%s: list %v became %v (result %+v), want it unchanged", tc.hook, before, after, res)
		}
		if !slices.Contains(c.notes, tc.note) {
			t.Errorf("%s: notifications %v, want %s", tc.hook, c.notes, tc.note)
		}
	}
}
