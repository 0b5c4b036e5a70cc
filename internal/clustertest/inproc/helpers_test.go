package inproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// soon bounds every wait: the flows finish in milliseconds, so reaching
// it means a hang.
const soon = 5 * time.Second

const resourceURI = "test://watched"

// rig is a cluster whose tools the test steers: "gated" sends a progress
// notification per step and waits for the test's go-ahead before the
// next, so a test can act while a call is known to be running on a node.
type rig struct {
	*inproc.Cluster
	stepped   chan string   // "<node> <step>" after each step's progress
	release   chan struct{} // one value lets one gated step go on
	cancelled chan string   // the node whose gated call saw its context end
}

type gatedIn struct {
	Steps int `json:"steps"`
}

func newRig(t *testing.T, opts inproc.Options) *rig {
	r := &rig{stepped: make(chan string, 16), release: make(chan struct{}, 16), cancelled: make(chan string, 16)}
	quit := make(chan struct{})
	opts.Setup = func(i int, s *mcp.Server) {
		node := fmt.Sprintf("n%d", i)
		mcp.AddTool(s, mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.Request, struct{}) (string, error) {
			return node, nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "gated"}, func(ctx context.Context, req *mcp.Request, in gatedIn) (string, error) {
			for step := 1; step <= in.Steps; step++ {
				if err := req.Progress(ctx, float64(step), float64(in.Steps), ""); err != nil {
					return "", err
				}
				r.stepped <- fmt.Sprintf("%s %d", node, step)
				select {
				case <-r.release:
				case <-ctx.Done():
					r.cancelled <- node
					return "", ctx.Err()
				case <-quit:
					return "", fmt.Errorf("test over")
				}
			}
			return "done on " + node, nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.Sample(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent("hi")}}}})
			if err != nil {
				return "", err
			}
			return res.Text() + " via " + node, nil
		})
		mcp.AddTool(s, mcp.Tool{Name: "extra"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
		mcp.AddTool(s, mcp.Tool{Name: "toggle"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			_, err := s.ToggleEnabled(ctx, mcp.KindTool, "extra")
			return "", err
		})
		s.AddResource(mcp.Resource{URI: resourceURI, Name: "watched"},
			func(_ context.Context, _ *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
			})
		mcp.AddTool(s, mcp.Tool{Name: "touch"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
			s.ResourceUpdated(ctx, resourceURI)
			return "", nil
		})
	}
	r.Cluster = inproc.New(t, opts)
	t.Cleanup(func() { close(quit) }) // runs before the cluster stops
	return r
}

// waitStep waits until a gated call reports the given "<node> <step>".
func (r *rig) waitStep(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-r.stepped:
		if got != want {
			t.Fatalf("gated call: got step %q, want %q", got, want)
		}
	case <-time.After(soon):
		t.Fatalf("gated call: no step %q", want)
	}
}

// session opens a session with the initialize on node i.
func (r *rig) session(t *testing.T, i int, caps map[string]any) *mcptest.Client {
	t.Helper()
	cl := mcptest.New(t, r.Nodes[i].URL)
	cl.Initialize(mcp.Version20251125, caps)
	return cl
}

// post sends a message to node url and reads the whole response.
func post(t *testing.T, cl *mcptest.Client, url string, msg *jsonrpc.Message) *mcptest.Response {
	t.Helper()
	b, _ := jsonrpc.Encode(msg)
	ctx, cancel := context.WithTimeout(context.Background(), soon)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, b, nil, nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// callAt calls method on node url.
func callAt(t *testing.T, cl *mcptest.Client, url, method string, params any) *mcptest.Response {
	t.Helper()
	msg, err := jsonrpc.Request(cl.NextID(), method, params)
	if err != nil {
		t.Fatal(err)
	}
	return post(t, cl, url, msg)
}

func tool(name string, args any) map[string]any {
	return map[string]any{"name": name, "arguments": args, "_meta": map[string]any{"progressToken": "p"}}
}

// text returns the first text content of a tools/call result message.
func text(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	if m == nil || m.Error != nil {
		t.Fatalf("tools/call: got %+v, want a result", m)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("tools/call result %s: %v", m.Result, err)
	}
	return res.Content[0].Text
}

func hasFinal(ms []*jsonrpc.Message) bool { return mcptest.Final(ms) != nil }

func mustWait(t *testing.T, st *mcptest.Stream, what string, cond func([]*jsonrpc.Message) bool) {
	t.Helper()
	if !st.WaitFor(soon, cond) {
		t.Fatalf("%s: not seen; got %s", what, describe(st.Messages()))
	}
}

func describe(ms []*jsonrpc.Message) string {
	var b strings.Builder
	for _, m := range ms {
		e, _ := jsonrpc.Encode(m)
		b.Write(e)
		b.WriteByte('\n')
	}
	return b.String()
}

// lastID returns the id of the last event of st that had one.
func lastID(st *mcptest.Stream) string {
	evs := st.Events()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].ID != "" {
			return evs[i].ID
		}
	}
	return ""
}
