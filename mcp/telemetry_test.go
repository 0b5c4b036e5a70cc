package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// scrape reads one metric sample (name with its exact label set as
// written in the exposition, e.g. `mcp_requests_total{method="ping",node="n",outcome="ok"}`).
func scrape(t *testing.T, h *mcp.HTTPHandler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

func sample(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("bad sample %q", m[0])
	}
	return v
}

func TestMetricsMoveAsAScenarioRuns(t *testing.T) {
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "m1"}})
	before := scrape(t, n.h)
	if got := sample(t, before, `mcp_sessions_total{event="created",node="m1"}`); got != 0 {
		t.Fatalf("fresh node: %v sessions created, want 0", got)
	}
	c := session(t, n.url, mcp.Version20251125, nil)
	post(t, c, n.url, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, nil).Result(t, nil)
	post(t, c, n.url, "tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 2},
		"_meta": map[string]any{"progressToken": 1}}, nil).Result(t, nil)
	post(t, c, n.url, "tools/call", map[string]any{"name": "nope"}, nil)
	st, err := c.Get(n.url, "")
	if err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, 5*time.Second, "the GET stream counted", func() bool {
		return sample(t, scrape(t, n.h), `mcp_streams_open{kind="get",node="m1"}`) == 1
	})
	st.Close()
	after := scrape(t, n.h)
	checks := []struct {
		series string
		want   float64
	}{
		{`mcp_sessions_total{event="created",node="m1"}`, 1},
		{`mcp_requests_total{method="initialize",node="m1",outcome="ok"}`, 1},
		{`mcp_requests_total{method="tools/call",node="m1",outcome="ok"}`, 2},
		{`mcp_request_duration_seconds_count{method="tools/call",node="m1"}`, 3},
		{`mcp_sessions_live{node="m1"}`, 1},
		{`mcp_draining{node="m1"}`, 0},
	}
	for _, c := range checks {
		if got := sample(t, after, c.series); got != c.want {
			t.Errorf("%s: got %v, want %v", c.series, got, c.want)
		}
	}
	// The unknown tool is a protocol error: counted as an error outcome.
	if got := sample(t, after, `mcp_requests_total{method="tools/call",node="m1",outcome="error"}`); got != 1 {
		t.Errorf("tools/call errors: got %v, want 1", got)
	}
	if got := sample(t, after, `mcp_bus_messages_total{direction="sent",node="m1"}`); got < 1 {
		t.Errorf("bus messages sent: got %v, want at least the take-over of the GET stream", got)
	}
}

// Two nodes on one shared backend: a sampling request issued by node A is
// answered by a reply POSTed to node B; the span node A records for the
// routed reply is a child of node B's span for the reply POST, in the
// same trace.
func TestTraceSpansTwoNodesForARoutedReply(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})

	backend := mcp.NewMemoryBackend()
	t.Cleanup(func() { _ = backend.Close() })
	var urls []string
	for _, id := range []string{"A", "B"} {
		srv := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1"}, nil)
		demo.Register(srv)
		h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{Backend: backend, NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(otelhttp.NewHandler(h, "mcp"))
		t.Cleanup(func() { ts.Close(); h.Close() })
		urls = append(urls, ts.URL)
	}
	c := mcptest.New(t, urls[0])
	c.Initialize(mcp.Version20251125, map[string]any{"sampling": map[string]any{}})
	const replyTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	b, _ := jsonrpc.Encode(mustRequest(t, c.NextID(), "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": "hi"}}))
	resp, err := c.PostRaw(context.Background(), urls[0], b, nil, func(m *jsonrpc.Message) *jsonrpc.Message {
		if m.Method != "sampling/createMessage" {
			return nil
		}
		reply, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "ok"}})
		rb, _ := jsonrpc.Encode(reply)
		req, _ := http.NewRequest(http.MethodPost, urls[1], strings.NewReader(string(rb)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.Session)
		req.Header.Set("Mcp-Protocol-Version", c.Version)
		req.Header.Set("Traceparent", "00-"+replyTrace+"-00f067aa0ba902b7-01")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("reply POST: %v", err)
			return nil
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			t.Errorf("reply POST: status %d, want 202", r.StatusCode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resp.Result(t, nil)

	// The owner ends its "mcp reply routed" span after it settled the
	// reply, so the call's result can reach the client first: wait for it.
	var routed, replyPost sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		routed, replyPost = nil, nil
		for _, s := range rec.Ended() {
			switch {
			case s.Name() == "mcp reply routed":
				routed = s
			case s.SpanContext().TraceID().String() == replyTrace && s.Parent().IsRemote():
				replyPost = s // node B's server span for the reply POST
			}
		}
		if routed != nil && replyPost != nil || time.Now().After(deadline) {
			break
		}
	}
	if routed == nil || replyPost == nil {
		t.Fatalf("spans: routed=%v replyPost=%v, want both recorded", routed != nil, replyPost != nil)
	}
	if routed.SpanContext().TraceID() != replyPost.SpanContext().TraceID() {
		t.Fatalf("routed reply in trace %s, want the reply's trace %s", routed.SpanContext().TraceID(), replyPost.SpanContext().TraceID())
	}
	if routed.Parent().SpanID() != replyPost.SpanContext().SpanID() {
		t.Fatalf("routed reply's parent %s, want node B's reply span %s", routed.Parent().SpanID(), replyPost.SpanContext().SpanID())
	}
	var nodeA bool
	for _, a := range routed.Attributes() {
		if string(a.Key) == "mcp.node.id" && a.Value.AsString() == "A" {
			nodeA = true
		}
	}
	if !nodeA {
		t.Fatalf("routed reply span not recorded by node A: %v", routed.Attributes())
	}
	// The MCP method span exists, named after the method.
	var methodSpan bool
	for _, s := range rec.Ended() {
		if s.Name() == "mcp tools/call" {
			methodSpan = true
		}
	}
	if !methodSpan {
		t.Fatal("no span named \"mcp tools/call\"")
	}
}

func mustRequest(t *testing.T, id jsonrpc.ID, method string, params any) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Request(id, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
