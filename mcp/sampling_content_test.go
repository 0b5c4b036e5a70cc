package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// One block goes on the wire as an object (every revision reads it),
// several as an array; both forms read back.
func TestSamplingContentForms(t *testing.T) {
	one, err := json.Marshal(mcp.SamplingMessage{Role: "user", Content: mcp.SamplingContent{mcp.TextContent("hi")}})
	if err != nil || string(one) != `{"role":"user","content":{"type":"text","text":"hi"}}` {
		t.Fatalf("one block: %s, %v", one, err)
	}
	two, err := json.Marshal(mcp.SamplingContent{mcp.TextContent("a"), mcp.TextContent("b")})
	if err != nil || string(two) != `[{"type":"text","text":"a"},{"type":"text","text":"b"}]` {
		t.Fatalf("two blocks: %s, %v", two, err)
	}
	for _, in := range []string{
		`{"role":"assistant","model":"m","content":{"type":"text","text":"x"}}`,
		`{"role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"f","input":{}},{"type":"text","text":"x"}]}`,
	} {
		var r mcp.CreateMessageResult
		if err := json.Unmarshal([]byte(in), &r); err != nil || r.Text() != "x" {
			t.Fatalf("%s: text %q, %v", in, r.Text(), err)
		}
	}
	var bad mcp.SamplingContent
	if err := json.Unmarshal([]byte(`"text"`), &bad); err == nil {
		t.Fatal("a string read as sampling content")
	}
}
