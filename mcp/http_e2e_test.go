package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// startNode serves the demo pack on a loopback HTTP server.
func startNode(t *testing.T, opts *mcp.HTTPOptions) (*mcp.Server, *mcp.HTTPHandler, string) {
	t.Helper()
	srv := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, &mcp.ServerOptions{RequestTimeout: 10 * time.Second, StateKeys: testStateKeys})
	demo.Register(srv)
	if opts == nil {
		opts = &mcp.HTTPOptions{}
	}
	if opts.RetryHint == 0 {
		opts.RetryHint = 50 * time.Millisecond
	}
	h, err := srv.NewHTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return srv, h, ts.URL
}

var samplingCaps = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}

func textOf(t *testing.T, resp *mcptest.Response) string {
	t.Helper()
	var res mcp.CallToolResult
	resp.Result(t, &res)
	if len(res.Content) == 0 {
		t.Fatalf("empty content")
	}
	return res.Content[0].Text
}

func TestLegacyEchoIsJSON(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			_, _, url := startNode(t, nil)
			c := mcptest.New(t, url)
			c.Initialize(v, nil)
			if c.Version != v {
				t.Fatalf("negotiated %q, want %q", c.Version, v)
			}
			resp := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, nil)
			if resp.SSE {
				t.Fatalf("got SSE, want a plain JSON response")
			}
			if got := textOf(t, resp); got != "hi" {
				t.Fatalf("got %q, want hi", got)
			}
		})
	}
}

func TestLegacyProgressUpgradesToSSE(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			_, _, url := startNode(t, nil)
			c := mcptest.New(t, url)
			c.Initialize(v, nil)
			resp := c.Call("tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 3},
				"_meta": map[string]any{"progressToken": "p1"}}, nil)
			if !resp.SSE {
				t.Fatalf("got JSON, want an SSE stream")
			}
			var progress int
			for _, m := range resp.Messages {
				if m.Method == "notifications/progress" {
					progress++
				}
			}
			if progress != 3 {
				t.Fatalf("got %d progress notifications, want 3", progress)
			}
			primed := len(resp.Events) > 0 && len(resp.Events[0].Data) == 0 && resp.Events[0].ID != ""
			if want := v >= mcp.Version20251125; primed != want {
				t.Fatalf("priming event present = %v, want %v", primed, want)
			}
			seen := map[string]bool{}
			for _, ev := range resp.Events {
				if ev.ID == "" {
					continue
				}
				if _, err := sse.ParseEventID(ev.ID); err != nil || seen[ev.ID] {
					t.Fatalf("bad or repeated event id %q", ev.ID)
				}
				seen[ev.ID] = true
			}
		})
	}
}

func TestSamplingReplyOnSeparatePost(t *testing.T) {
	_, _, url := startNode(t, nil)
	c := mcptest.New(t, url)
	c.Initialize(mcp.Version20251125, samplingCaps)
	resp := c.Call("tools/call", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": "2+2?"}}, func(m *jsonrpc.Message) *jsonrpc.Message {
		if m.Method != "sampling/createMessage" {
			return nil
		}
		r, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "4"}})
		return r
	})
	if got := textOf(t, resp); got != "4" {
		t.Fatalf("got %q, want 4", got)
	}
}

func TestModernDiscoverAndMRTRSampling(t *testing.T) {
	_, _, url := startNode(t, nil)
	c := mcptest.New(t, url)
	post := func(method, name string, params map[string]any) *mcptest.Response {
		params["_meta"] = mcptest.ModernMeta()
		msg, _ := jsonrpc.Request(c.NextID(), method, params)
		b, _ := jsonrpc.Encode(msg)
		resp, err := c.PostRaw(context.Background(), url, b, mcptest.ModernHeaders(method, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var disc struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
		TTL               *int     `json:"ttlMs"`
	}
	post("server/discover", "", map[string]any{}).Result(t, &disc)
	if disc.ResultType != "complete" || disc.TTL == nil || len(disc.SupportedVersions) != 4 {
		t.Fatalf("discover: got %+v", disc)
	}
	args := map[string]any{"prompt": "hello"}
	var round1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	post("tools/call", "sample", map[string]any{"name": "sample", "arguments": args}).Result(t, &round1)
	if round1.ResultType != "input_required" || len(round1.InputRequests) != 1 || round1.RequestState == "" {
		t.Fatalf("round 1: got %+v", round1)
	}
	var key string
	for k := range round1.InputRequests {
		key = k
	}
	answer := map[string]any{key: map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "world"}}}
	resp := post("tools/call", "sample", map[string]any{"name": "sample", "arguments": args, "inputResponses": answer, "requestState": round1.RequestState})
	if got := textOf(t, resp); got != "world" {
		t.Fatalf("round 2: got %q, want world", got)
	}
	// A requestState replayed against other params is refused.
	bad := post("tools/call", "sample", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": "other"}, "inputResponses": answer, "requestState": round1.RequestState})
	if f := bad.Final(); f == nil || f.Error == nil || f.Error.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("tampered round: got %+v, want -32602", f)
	}
}

func TestModernHeaderMismatch(t *testing.T) {
	_, _, url := startNode(t, nil)
	c := mcptest.New(t, url)
	msg, _ := jsonrpc.Request(c.NextID(), "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "_meta": mcptest.ModernMeta()})
	b, _ := jsonrpc.Encode(msg)
	resp, err := c.PostRaw(context.Background(), url, b, mcptest.ModernHeaders("tools/call", "add"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusBadRequest || resp.Final() == nil || resp.Final().Error.Code != jsonrpc.CodeHeaderMismatch {
		t.Fatalf("got status %d body %s, want 400 -32020", resp.Status, resp.Body)
	}
}

func TestGetStreamReceivesListChanged(t *testing.T) {
	_, _, url := startNode(t, nil)
	c := mcptest.New(t, url)
	c.Initialize(mcp.Version20251125, nil)
	st, err := c.Get(url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The stream follows every event appended after its headers arrived.
	c.Call("tools/call", map[string]any{"name": "toggle_extra_tool", "arguments": map[string]any{}}, nil)
	ok := st.WaitFor(5*time.Second, func(ms []*jsonrpc.Message) bool {
		for _, m := range ms {
			if m.Method == "notifications/tools/list_changed" {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no tools/list_changed on the GET stream; got %d messages", len(st.Messages()))
	}
}

func TestResumePostStreamAfterCut(t *testing.T) {
	_, _, url := startNode(t, nil)
	c := mcptest.New(t, url)
	c.Initialize(mcp.Version20251125, nil)
	var lastID string
	// Cut after the third event.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	msg2, _ := jsonrpc.Request(c.NextID(), "tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 10, "delayMs": 30}, "_meta": map[string]any{"progressToken": 8}})
	b2, _ := jsonrpc.Encode(msg2)
	req, _ := http.NewRequestWithContext(ctx2, http.MethodPost, url, strings.NewReader(string(b2)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	req.Header.Set("Mcp-Protocol-Version", c.Version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := sse.NewReader(resp.Body, 1<<20)
	var got []float64
	for len(got) < 3 {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		lastID = ev.ID
		if len(ev.Data) == 0 {
			continue
		}
		var m struct {
			Params struct {
				Progress float64 `json:"progress"`
			} `json:"params"`
		}
		_ = json.Unmarshal(ev.Data, &m)
		got = append(got, m.Params.Progress)
	}
	cancel2()
	resp.Body.Close()
	st, err := c.Get(url, lastID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	select {
	case <-st.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("resumed stream did not end")
	}
	for _, m := range st.Messages() {
		if m.Method == "notifications/progress" {
			var p struct {
				Progress float64 `json:"progress"`
			}
			_ = json.Unmarshal(m.Params, &p)
			got = append(got, p.Progress)
		}
	}
	final := st.Messages()
	if len(final) == 0 || final[len(final)-1].Kind() != jsonrpc.KindResponse {
		t.Fatalf("resumed stream did not end with the response")
	}
	for i, p := range got {
		if p != float64(i+1) {
			t.Fatalf("progress sequence %v: want 1..10 exactly once", got)
		}
	}
	if len(got) != 10 {
		t.Fatalf("got %d progress events %v, want 10", len(got), got)
	}
}
