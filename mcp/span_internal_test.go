package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// With no tracer provider installed, a request's method span costs
// nothing: no span, context or name is allocated. The trace context of
// the request's _meta still reaches the context (for the messages the
// request routes to other nodes). With one installed, the span is
// recorded, a child of that trace context.
func TestMethodSpanFreeWithoutTracer(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	s := NewServer(Implementation{Name: "t", Version: "1"}, nil)
	plain := &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{}}`), srv: s}
	traced := &Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo","_meta":{"traceparent":"00-` + traceID + `-00f067aa0ba902b7-01"}}`), srv: s}
	ctx := context.Background()

	if n := testing.AllocsPerRun(100, func() {
		_, span := s.startSpan(ctx, plain)
		span.End()
	}); n != 0 {
		t.Errorf("method span without a tracer: %v allocations, want 0", n)
	}
	got, span := s.startSpan(ctx, traced)
	span.End()
	if span.IsRecording() {
		t.Error("span records without a tracer")
	}
	if id := trace.SpanContextFromContext(got).TraceID().String(); id != traceID {
		t.Errorf("trace id from _meta: %q, want %q", id, traceID)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	_, span = s.startSpan(ctx, traced)
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "mcp tools/call" || spans[0].SpanContext.TraceID().String() != traceID {
		t.Fatalf("spans with a tracer: %+v, want one \"mcp tools/call\" in trace %s", spans, traceID)
	}
}
