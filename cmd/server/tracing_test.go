package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// nopWriter is a ResponseWriter that keeps nothing, so that a handler's
// allocations are its own.
type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header       { return w.h }
func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) WriteHeader(int)             {}

// With no tracer provider installed the MCP endpoint is not wrapped in
// HTTP spans (otelhttp would compute attributes and wrap the request and
// the response on every request): it allocates nothing of its own,
// and still takes the trace context of a traceparent header. With one
// installed, every request is an HTTP server span, a child of that
// context.
func TestTraceHTTPOnlyWhenTracing(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var seen trace.SpanContext
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusAccepted)
	})
	w := nopWriter{h: http.Header{}}
	plain := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	withParent := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	withParent.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")

	h := traceHTTP(inner, "/mcp")
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, plain) }); n != 0 {
		t.Errorf("a request without a tracer: %v allocations, want 0", n)
	}
	h.ServeHTTP(w, withParent)
	if seen.TraceID().String() != traceID {
		t.Errorf("trace id from the header without a tracer: %q, want %q", seen.TraceID(), traceID)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(telemetry.Propagator) // as setupTracing does
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})
	h = traceHTTP(inner, "/mcp")
	h.ServeHTTP(httptest.NewRecorder(), withParent)
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "HTTP POST /mcp" || spans[0].Parent.TraceID().String() != traceID {
		t.Fatalf("spans with a tracer: %+v, want one \"HTTP POST /mcp\" under the header's trace", spans)
	}
	if seen.SpanID() != spans[0].SpanContext.SpanID() {
		t.Errorf("the handler's span is %s, want the HTTP span %s", seen.SpanID(), spans[0].SpanContext.SpanID())
	}
}

// BenchmarkMCPEndpoint serves a tools/call (the demo's echo, a
// 2026-07-28 request: no session) through the MCP endpoint as the node
// wraps it, with no tracer provider installed.
func BenchmarkMCPEndpoint(b *testing.B) {
	s := mcp.NewServer(mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{StateKeys: [][]byte{bytes.Repeat([]byte{7}, 32)}})
	demo.Register(s)
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: mcp.NewMemoryBackend(), CallerRate: 1 << 30, CallerBurst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	endpoint := traceHTTP(h, "/mcp")
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", mcp.Version20260728)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		rec := httptest.NewRecorder()
		endpoint.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("tools/call: %d %s", rec.Code, rec.Body)
		}
	}
}
