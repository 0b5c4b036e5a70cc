package telemetry

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the tracer of the MCP layer.
const TracerName = "github.com/mcpcluster/mcpcluster"

// Propagator is the W3C trace-context and baggage propagator used for
// HTTP headers, request _meta and bus messages.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracer returns the MCP layer's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// FromMeta extracts W3C trace context (traceparent, tracestate, baggage)
// carried in a request's params._meta into ctx. A context already
// carrying a span from HTTP headers keeps it unless _meta has one.
func FromMeta(ctx context.Context, params json.RawMessage) context.Context {
	if len(params) == 0 {
		return ctx
	}
	var p struct {
		Meta struct {
			TraceParent string `json:"traceparent"`
			TraceState  string `json:"tracestate"`
			Baggage     string `json:"baggage"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.TraceParent == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": p.Meta.TraceParent}
	if p.Meta.TraceState != "" {
		carrier["tracestate"] = p.Meta.TraceState
	}
	if p.Meta.Baggage != "" {
		carrier["baggage"] = p.Meta.Baggage
	}
	return Propagator.Extract(ctx, carrier)
}

// Inject returns the trace context of ctx as a small map to carry in a
// bus message (nil when ctx has no span).
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c
}

// Extract restores a trace context carried by Inject.
func Extract(ctx context.Context, m map[string]string) context.Context {
	if len(m) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier(m))
}
