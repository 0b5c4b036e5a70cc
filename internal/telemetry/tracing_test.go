package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

func TestFromTraceMeta(t *testing.T) {
	const tp = `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, c := range []struct {
		name                  string
		parent, state, bagged json.RawMessage
		want                  string // trace id, "" for none
	}{
		{"traceparent", raw(tp), nil, nil, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"with tracestate and baggage", raw(tp), raw(`"k=v"`), raw(`"a=b"`), "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"null tracestate", raw(tp), raw(`null`), nil, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"absent", nil, nil, nil, ""},
		{"not a string", raw(`42`), nil, nil, ""},
		{"a member not a string", raw(tp), raw(`{}`), nil, ""},
		{"malformed traceparent", raw(`"00-zz"`), nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := telemetry.FromTraceMeta(context.Background(), c.parent, c.state, c.bagged)
			sc := trace.SpanContextFromContext(ctx)
			got := ""
			if sc.IsValid() {
				got = sc.TraceID().String()
			}
			if got != c.want {
				t.Fatalf("trace id %q, want %q", got, c.want)
			}
		})
	}
}
