package gosdk

//lint:file-ignore SA1019 these tests drive the SDK's sampling, logging and roots features, deprecated in 2026-07-28 but still served

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// setup is a deployment the clients run against.
type setup struct {
	name    string
	opts    clustertest.Options
	cluster bool // several nodes: per-node demo state (counter, extra tool) diverges
}

var setups = []setup{
	{name: "single", opts: clustertest.Options{Memory: true}},
	{name: "cluster3", opts: clustertest.Options{Nodes: 3, Random: true}, cluster: true},
}

// era is how the client negotiates its protocol revision.
type era struct {
	name string
	// pin is ClientSessionOptions.ProtocolVersion; "" lets the client
	// probe server/discover and speak the newest revision.
	pin string
	// want is the revision the session must end up on.
	want   string
	modern bool
}

var eras = []era{
	{name: "discover", want: "2026-07-28", modern: true},
	{name: "2025-03-26", pin: "2025-03-26", want: "2025-03-26"},
	{name: "2025-06-18", pin: "2025-06-18", want: "2025-06-18"},
	{name: "2025-11-25", pin: "2025-11-25", want: "2025-11-25"},
}

const (
	waitTimeout = 20 * time.Second
	rootURI     = "file:///work/project"
	userName    = "Ada"
	userEmail   = "ada@example.com"
)

// recorder keeps what the client's handlers saw. The SDK runs
// notification handlers asynchronously, so tests wait for counts.
type recorder struct {
	mu           sync.Mutex
	progress     []*mcp.ProgressNotificationParams
	logs         []*mcp.LoggingMessageParams
	samples      []*mcp.CreateMessageParams
	elicits      []*mcp.ElicitParams
	toolsChanged int
	updated      []string
}

func (r *recorder) lock() func() { r.mu.Lock(); return r.mu.Unlock }

// progressFor returns the progress notifications carrying token.
func (r *recorder) progressFor(token string) []*mcp.ProgressNotificationParams {
	defer r.lock()()
	var out []*mcp.ProgressNotificationParams
	for _, p := range r.progress {
		if fmt.Sprint(p.ProgressToken) == token {
			out = append(out, p)
		}
	}
	return out
}

// logsWith returns the log messages whose data is text.
func (r *recorder) logsWith(text string) []*mcp.LoggingMessageParams {
	defer r.lock()()
	var out []*mcp.LoggingMessageParams
	for _, l := range r.logs {
		if fmt.Sprint(l.Data) == text {
			out = append(out, l)
		}
	}
	return out
}

func (r *recorder) toolsChangedCount() int {
	defer r.lock()()
	return r.toolsChanged
}

func (r *recorder) updatedCount(uri string) int {
	defer r.lock()()
	n := 0
	for _, u := range r.updated {
		if u == uri {
			n++
		}
	}
	return n
}

// newClient returns an SDK client whose sampling handler answers
// "re:<prompt>", whose elicitation handler accepts with a name and an
// email, with one root, and whose notification handlers feed rec.
func newClient(rec *recorder) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpcluster-gosdk-test", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			func() {
				defer rec.lock()()
				rec.samples = append(rec.samples, req.Params)
			}()
			var prompt string
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", StopReason: "endTurn",
				Content: &mcp.TextContent{Text: "re:" + prompt}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			func() {
				defer rec.lock()()
				rec.elicits = append(rec.elicits, req.Params)
			}()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": userName, "email": userEmail}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			defer rec.lock()()
			rec.progress = append(rec.progress, req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			defer rec.lock()()
			rec.logs = append(rec.logs, req.Params)
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			defer rec.lock()()
			rec.toolsChanged++
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			defer rec.lock()()
			rec.updated = append(rec.updated, req.Params.URI)
		},
	})
	c.AddRoots(&mcp.Root{URI: rootURI, Name: "project"})
	return c
}

// conn is one client session under test with what it recorded.
type conn struct {
	t    *testing.T
	url  string
	era  era
	s    setup
	c    *clustertest.Cluster
	rec  *recorder
	wire *wire
	cs   *mcp.ClientSession
}

// connect opens a session of era through the cluster's endpoint.
func connect(t *testing.T, c *clustertest.Cluster, s setup, e era) *conn {
	t.Helper()
	url := c.URL()
	if !s.cluster {
		url = c.Nodes[0].URL
	}
	k := &conn{t: t, url: url, era: e, s: s, c: c, rec: &recorder{}, wire: newWire()}
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: k.wire}}
	var opts *mcp.ClientSessionOptions
	if e.pin != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: e.pin}
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	cs, err := newClient(k.rec).Connect(ctx, transport, opts)
	if err != nil {
		k.dumpWire()
		t.Fatalf("Connect (%s): %v", e.name, err)
	}
	k.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return k
}

// ctx returns a context bounded by waitTimeout.
func (k *conn) ctx() context.Context {
	ctx, cancel := context.WithTimeout(k.t.Context(), waitTimeout)
	k.t.Cleanup(cancel)
	return ctx
}

// dumpWire logs every HTTP exchange of the session.
func (k *conn) dumpWire() {
	k.t.Helper()
	var b strings.Builder
	for i, ex := range k.wire.exchanges() {
		fmt.Fprintf(&b, "  %2d %s\n", i, ex)
	}
	k.t.Logf("HTTP exchanges of this session:\n%s", b.String())
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func (k *conn) waitFor(what string, cond func() bool) {
	k.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			k.dumpWire()
			k.t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call calls a tool and returns its result, failing on an error or an
// isError result.
func (k *conn) call(name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	k.t.Helper()
	res, err := k.cs.CallTool(k.ctx(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		k.dumpWire()
		k.t.Fatalf("CallTool %s: %v", name, err)
	}
	if res.IsError {
		k.dumpWire()
		k.t.Fatalf("CallTool %s: isError result: %s", name, text(res))
	}
	return res
}

// text returns the text of a result's first content block.
func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprintf("(%T)", res.Content[0])
}

// posts returns the POSTs the session sent whose JSON-RPC message matches.
func (k *conn) posts(match func(rpcSummary) bool) []exchange {
	var out []exchange
	for _, ex := range k.wire.exchanges() {
		if ex.Method == http.MethodPost && match(ex.RPC) {
			out = append(out, ex)
		}
	}
	return out
}

// toolNames lists the tools the server offers.
func (k *conn) toolNames() []string {
	k.t.Helper()
	var names []string
	for tool, err := range k.cs.Tools(k.ctx(), nil) {
		if err != nil {
			k.t.Fatalf("ListTools: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}
