package main

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Tracing export is the program's choice, not the library's: the mcp
// package only makes spans through the global tracer provider (no cost
// while it is the no-op one), and this node installs an OTLP exporter
// when the standard OTEL_* variables ask for one. A program that imports
// mcp alone links no exporter.

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
