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

// defaultProvider is the global tracer provider before any program sets
// one: OpenTelemetry's delegating no-op.
var defaultProvider = otel.GetTracerProvider()

// Enabled reports whether the program installed a tracer provider
// (otel.SetTracerProvider). Until it does, spans would record nothing,
// and the MCP layer and the Redis backend skip making them: starting a
// span through the default provider still costs a lock, a context and
// the span's attributes. It is an atomic load, cheap enough per request.
func Enabled() bool { return otel.GetTracerProvider() != defaultProvider }

// NoSpan returns a span that does nothing, for code paths that skip
// making one when tracing is not Enabled.
func NoSpan() trace.Span { return noSpan }

// noSpan is the non-recording span of a context without one.
var noSpan = trace.SpanFromContext(context.Background())

// FromTraceMeta extracts W3C trace context carried in a request's
// params._meta (the raw JSON values of its traceparent, tracestate and
// baggage members) into ctx. A context already carrying a span from HTTP
// headers keeps it unless _meta has one; a member that is not a string
// makes the whole trace context ignored.
func FromTraceMeta(ctx context.Context, traceparent, tracestate, baggage json.RawMessage) context.Context {
	if len(traceparent) == 0 {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for name, raw := range map[string]json.RawMessage{"traceparent": traceparent, "tracestate": tracestate, "baggage": baggage} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return ctx
		}
		if v != "" {
			carrier[name] = v
		}
	}
	if carrier["traceparent"] == "" {
		return ctx
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
