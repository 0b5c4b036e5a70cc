package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// stdioClient talks newline-delimited JSON-RPC to a server served with
// ServeStdio over a pair of pipes.
type stdioClient struct {
	t      *testing.T
	w      io.Writer
	lines  chan []byte
	nextID int
	notes  []string // methods of the notifications call skipped
}

func startServer(t *testing.T) *stdioClient {
	t.Helper()
	srv := mcp.NewServer(mcp.Implementation{Name: "conformance-pack-test", Version: "0"}, nil)
	Register(srv)

	inR, inW := io.Pipe()   // client → server
	outR, outW := io.Pipe() // server → client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, inR, outW, nil) }()

	c := &stdioClient{t: t, w: inW, lines: make(chan []byte, 64)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("ServeStdio did not return")
		}
		_ = outW.Close()
	})
	return c
}

func (c *stdioClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// call sends a request and decodes the result of its response into out,
// skipping any notification that comes first.
func (c *stdioClient) call(method string, params, out any) {
	c.t.Helper()
	c.nextID++
	id := c.nextID
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	timeout := time.After(5 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("%s: server closed its output", method)
			}
			var msg struct {
				Method string          `json:"method"`
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(line, &msg); err != nil {
				c.t.Fatalf("%s: bad message %s: %v", method, line, err)
			}
			if msg.ID == nil && msg.Method != "" {
				c.notes = append(c.notes, msg.Method)
			}
			if msg.ID == nil || *msg.ID != id {
				continue
			}
			if msg.Error != nil {
				c.t.Fatalf("%s: error %s", method, msg.Error)
			}
			if err := json.Unmarshal(msg.Result, out); err != nil {
				c.t.Fatalf("%s: decode result %s: %v", method, msg.Result, err)
			}
			return
		case <-timeout:
			c.t.Fatalf("%s: no response", method)
		}
	}
}

func (c *stdioClient) initialize() {
	c.t.Helper()
	var res map[string]any
	c.call("initialize", map[string]any{
		"protocolVersion": mcp.Version20251125,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "test", "version": "0"},
	}, &res)
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

func TestToolsList(t *testing.T) {
	c := startServer(t)
	c.initialize()

	var res struct {
		Tools []mcp.Tool `json:"tools"`
	}
	c.call("tools/list", map[string]any{}, &res)

	want := []string{
		"confirm_delete",
		"failing_job",
		"greet",
		"json_schema_2020_12_tool",
		"multi_input",
		"protocol_error_job",
		"slow_compute",
		"test_audio_content",
		"test_custom_header",
		"test_elicitation",
		"test_elicitation_sep1034_defaults",
		"test_elicitation_sep1330_enums",
		"test_embedded_resource",
		"test_error_handling",
		"test_image_content",
		"test_input_required_result_capabilities",
		"test_input_required_result_elicitation",
		"test_input_required_result_list_roots",
		"test_input_required_result_multi_round",
		"test_input_required_result_multiple_inputs",
		"test_input_required_result_request_state",
		"test_input_required_result_sampling",
		"test_input_required_result_tampered_state",
		"test_logging_tool",
		"test_missing_capability",
		"test_multiple_content_types",
		"test_reconnection",
		"test_sampling",
		"test_simple_text",
		"test_streaming_elicitation",
		"test_tool_with_logging",
		"test_tool_with_progress",
		"test_tool_with_task",
		"test_trigger_prompt_change",
		"test_trigger_tool_change",
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tools/list names:\n got  %v\n want %v", got, want)
	}

	// The 2020-12 keywords reach the client as registered.
	for _, tool := range res.Tools {
		if tool.Name != "json_schema_2020_12_tool" {
			continue
		}
		var sch map[string]any
		if err := json.Unmarshal(tool.InputSchema, &sch); err != nil {
			t.Fatal(err)
		}
		if sch["$schema"] != "https://json-schema.org/draft/2020-12/schema" || sch["additionalProperties"] != false || sch["$defs"] == nil {
			t.Errorf("json_schema_2020_12_tool inputSchema lost keywords: %s", tool.InputSchema)
		}
		addr, _ := sch["$defs"].(map[string]any)["address"].(map[string]any)
		if sch["allOf"] == nil || sch["if"] == nil || sch["then"] == nil || sch["else"] == nil || addr["$anchor"] != "addressDef" {
			t.Errorf("json_schema_2020_12_tool inputSchema lacks the SEP-2106 keywords: %s", tool.InputSchema)
		}
	}
}

func TestSimpleText(t *testing.T) {
	c := startServer(t)
	c.initialize()

	var res mcp.CallToolResult
	c.call("tools/call", map[string]any{"name": "test_simple_text"}, &res)
	want := []mcp.Content{mcp.TextContent("This is a simple text response for testing.")}
	if res.IsError || !reflect.DeepEqual(res.Content, want) {
		t.Errorf("test_simple_text = %+v, want content %+v", res, want)
	}
}

// TestPayloads checks that the generated image and audio are real files.
func TestPayloads(t *testing.T) {
	b, err := base64.StdEncoding.DecodeString(pngBase64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("image payload is not a PNG: %v", err)
	}
	w, err := base64.StdEncoding.DecodeString(audioBase64)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) < 44 || string(w[0:4]) != "RIFF" || string(w[8:12]) != "WAVE" || string(w[36:40]) != "data" {
		t.Errorf("audio payload is not a RIFF/WAVE file: % x", w[:min(len(w), 44)])
	}
}
