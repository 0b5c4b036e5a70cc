package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// A setup is a deployment the flows run on.
type setup struct {
	name string
	opts clustertest.Options
}

// setups: three nodes on Redis behind a random router, and the embedded
// single node on the in-memory backend. A flow written against "a node"
// and "another node" runs on both; on the single node both are the same.
var setups = []setup{
	{"redis-3-nodes", clustertest.Options{Nodes: 3, Random: true}},
	{"memory-1-node", clustertest.Options{Memory: true}},
}

// forEachSetup runs flow on a fresh deployment of every setup, in
// parallel.
func forEachSetup(t *testing.T, flow func(t *testing.T, c *clustertest.Cluster)) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			flow(t, clustertest.Start(t, s.opts))
		})
	}
}

// nodeURL is the endpoint of node i (modulo the node count), to pin a
// request to a node; on a single node every i names the same one.
func nodeURL(c *clustertest.Cluster, i int) string {
	return c.Nodes[i%len(c.Nodes)].URL
}

// Generous bounds for things that should happen promptly.
const (
	soon    = 10 * time.Second
	quietly = 400 * time.Millisecond // a window in which nothing more may arrive
)

// session opens a legacy session through the router.
func session(t *testing.T, c *clustertest.Cluster, caps map[string]any) *mcptest.Client {
	t.Helper()
	cl := mcptest.New(t, c.URL())
	cl.Initialize(mcp.Version20251125, caps)
	return cl
}

// pinned is a client of the same session whose requests go to the given
// endpoints in turn.
func pinned(t *testing.T, cl *mcptest.Client, urls ...string) *mcptest.Client {
	p := mcptest.New(t, urls...)
	p.Session, p.Version = cl.Session, cl.Version
	return p
}

func tool(name string, args map[string]any) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{"name": name, "arguments": args}
}

// progressCall is a tools/call of the progress tool asking for progress.
func progressCall(steps, delayMs int, token string) map[string]any {
	p := tool("progress", map[string]any{"steps": steps, "delayMs": delayMs})
	p["_meta"] = map[string]any{"progressToken": token}
	return p
}

// callAt sends a request to url and reads the whole response.
func callAt(t *testing.T, cl *mcptest.Client, url, method string, params any) *mcptest.Response {
	t.Helper()
	_, b := mcptest.Request(t, cl, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, b, nil, nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	return resp
}

// notifyAt sends a notification to url and returns the HTTP status.
func notifyAt(t *testing.T, cl *mcptest.Client, url, method string, params any) int {
	t.Helper()
	msg, _ := jsonrpc.Notification(method, params)
	b, _ := jsonrpc.Encode(msg)
	resp, err := cl.PostRaw(context.Background(), url, b, nil, nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	return resp.Status
}

// text returns the first text content of a tools/call result.
func text(t *testing.T, resp *mcptest.Response) string {
	t.Helper()
	var res mcp.CallToolResult
	resp.Result(t, &res)
	if len(res.Content) == 0 {
		t.Fatalf("empty content")
	}
	return res.Content[0].Text
}

// resultText is text for a message that may be anything.
func resultText(m *jsonrpc.Message) (string, bool) {
	if m == nil || m.Error != nil {
		return "", false
	}
	var res mcp.CallToolResult
	if json.Unmarshal(m.Result, &res) != nil || len(res.Content) == 0 {
		return "", false
	}
	return res.Content[0].Text, true
}

// succeeded reports whether m is a successful tools/call result.
func succeeded(m *jsonrpc.Message) bool {
	if m == nil || m.Error != nil {
		return false
	}
	var res mcp.CallToolResult
	return json.Unmarshal(m.Result, &res) == nil && !res.IsError
}

func hasResponse(ms []*jsonrpc.Message) bool { return mcptest.Final(ms) != nil }

// wantProgress checks that values are 1..n, each exactly once, in order.
func wantProgress(t *testing.T, values []float64, n int) {
	t.Helper()
	ok := len(values) == n
	for i := 0; ok && i < n; i++ {
		ok = values[i] == float64(i+1)
	}
	if !ok {
		t.Fatalf("progress %v: want 1..%d, each exactly once", values, n)
	}
}

// lastEventID is the id of the last event carrying one.
func lastEventID(evs []sse.Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].ID != "" {
			return evs[i].ID
		}
	}
	return ""
}

// wantContiguous checks that the event ids, in the order received across
// the connections of one stream, name that stream with consecutive
// sequence numbers: nothing lost, nothing repeated.
func wantContiguous(t *testing.T, parts ...[]sse.Event) {
	t.Helper()
	type pos struct {
		stream    string
		broadcast uint64 // a GET stream's broadcast position (its ids are <stream>-<broadcast>_<seq>)
		seq       uint64
	}
	var ids []pos
	for _, p := range parts {
		for _, ev := range p {
			if ev.ID == "" || len(ev.Data) == 0 {
				continue // priming events carry a cursor, not a message
			}
			id, err := sse.ParseEventID(ev.ID)
			if err != nil {
				t.Fatalf("bad event id %q: %v", ev.ID, err)
			}
			at := pos{stream: id.Stream, seq: id.Seq}
			if base, b, ok := strings.Cut(id.Stream, "-"); ok {
				n, err := strconv.ParseUint(b, 10, 64)
				if err != nil {
					t.Fatalf("bad event id %q: %v", ev.ID, err)
				}
				at.stream, at.broadcast = base, n
			}
			ids = append(ids, at)
		}
	}
	// Each event moves one position of one stream on by exactly one.
	for i := 1; i < len(ids); i++ {
		a, b := ids[i-1], ids[i]
		next := b.broadcast == a.broadcast && b.seq == a.seq+1 || b.broadcast == a.broadcast+1 && b.seq == a.seq
		if b.stream != ids[0].stream || !next {
			t.Fatalf("event ids %v: want one stream with consecutive sequence numbers", ids)
		}
	}
}

// waitEnd waits for the server to end a stream.
func waitEnd(t *testing.T, st *mcptest.Stream, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-st.Done():
	case <-time.After(timeout):
		t.Fatalf("%s: stream still open after %v (%d messages)", what, timeout, len(st.Messages()))
	}
}

// settle waits until the stream delivered nothing for quietly (or ended),
// at most for limit.
func settle(st *mcptest.Stream, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n := len(st.Events())
		grew := st.WaitUntil(quietly, func() bool { return len(st.Events()) != n })
		if !grew {
			return
		}
	}
}

// mustWait fails the test unless cond holds on the stream's messages
// within timeout.
func mustWait(t *testing.T, st *mcptest.Stream, timeout time.Duration, what string, cond func([]*jsonrpc.Message) bool) {
	t.Helper()
	if !st.WaitFor(timeout, cond) {
		t.Fatalf("%s: not seen within %v; the stream has %s", what, timeout, describe(st.Messages()))
	}
}

func describe(msgs []*jsonrpc.Message) string {
	s := fmt.Sprintf("%d messages:", len(msgs))
	for _, m := range msgs {
		switch {
		case m.Method != "":
			s += " " + m.Method
		case m.Error != nil:
			s += fmt.Sprintf(" error(%d %q)", m.Error.Code, m.Error.Message)
		default:
			r := string(m.Result)
			if len(r) > 160 {
				r = r[:160] + "..."
			}
			s += " result " + r
		}
	}
	return s
}

// modernBody encodes a stateless request: params plus the _meta.
func modernBody(t *testing.T, cl *mcptest.Client, method string, params map[string]any) []byte {
	t.Helper()
	params["_meta"] = mcptest.ModernMeta()
	_, b := mcptest.Request(t, cl, method, params)
	return b
}

// modernCall sends a stateless request to url.
func modernCall(t *testing.T, cl *mcptest.Client, url, method, name string, params map[string]any) *mcptest.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, modernBody(t, cl, method, params), mcptest.ModernHeaders(method, name), nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	return resp
}
