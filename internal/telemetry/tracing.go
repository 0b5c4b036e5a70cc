package telemetry

import (
	"context"
	"encoding/json"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the tracer of the MCP layer.
const TracerName = "github.com/mcpcluster/mcpcluster"

// Propagator is the W3C trace-context and baggage propagator used for
// HTTP headers, request _meta and bus messages.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// exporterConfigured reports whether the standard OTEL_* variables ask
// for an exporter.
func exporterConfigured(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
		getenv("OTEL_TRACES_EXPORTER") == "otlp"
}

// SetupTracing installs the global propagator and, when the OTEL_*
// environment asks for one, an OTLP/HTTP exporter with a batching tracer
// provider. With none configured the global provider stays the no-op one.
// The returned shutdown flushes and stops the exporter.
func SetupTracing(ctx context.Context, service, node string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator)
	if !exporterConfigured(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	if s := os.Getenv("OTEL_SERVICE_NAME"); s != "" {
		service = s
	}
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.instance.id", node),
	))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

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
