package main

import (
	"context"
	"net/http"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Tracing export is the program's choice, not the library's: the mcp
// package only makes spans through the global tracer provider, and none
// at all while no program installed one (telemetry.Enabled); this node
// installs an OTLP exporter when the standard OTEL_* variables ask for
// one, before it opens the Redis backend (which then traces commands)
// and wraps the MCP endpoint (traceHTTP). A program that imports mcp
// alone links no exporter.

// exporterConfigured reports whether the standard OTEL_* variables ask
// for an exporter.
func exporterConfigured(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
		getenv("OTEL_TRACES_EXPORTER") == "otlp"
}

// setupTracing installs the global propagator and, when the OTEL_*
// environment asks for one, an OTLP/HTTP exporter with a batching tracer
// provider. With none configured the global provider stays the no-op one.
// The returned shutdown flushes and stops the exporter.
func setupTracing(ctx context.Context, service, node string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(telemetry.Propagator)
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

// traceHTTP wraps the MCP endpoint at path in HTTP server spans when a
// tracer provider is installed (setupTracing ran with an exporter
// configured); the MCP layer adds a span per method, a child of the
// HTTP one or of the trace context in the request's _meta.
//
// With none installed, otelhttp would still compute the request's
// semantic-convention attributes, wrap the body and the response writer
// and start a no-op span on every request, for nothing recorded; the
// handler then only takes the W3C trace context from the headers that
// carry one, so that the MCP layer passes it on as before (in the
// messages it routes to other nodes).
func traceHTTP(h http.Handler, path string) http.Handler {
	if telemetry.Enabled() {
		return otelhttp.NewHandler(h, "mcp", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return "HTTP " + r.Method + " " + path
		}))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" || r.Header.Get("Baggage") != "" {
			r = r.WithContext(telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}
