package coordinator_test

import (
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// ParseGetEventStream reads the stream part of a client's Last-Event-ID:
// it never panics, and what it accepts is exactly what GetStreamID and
// GetEventStream write.
func FuzzParseGetEventStream(f *testing.F) {
	const sid = "c2Vzc2lvbi1pZC1mb3ItZnV6eg"
	gs := coordinator.GetStreamID(sid)
	for _, s := range []string{gs, gs + "-0", gs + "-42", gs + "-007", gs + "-", gs + "-1-2", gs + "x", "list-changed", "", gs + "-18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, hasB, ok := coordinator.ParseGetEventStream(sid, s)
		switch {
		case !ok:
			if hasB || b != 0 {
				t.Fatalf("%q refused with a position %d/%v", s, b, hasB)
			}
		case hasB:
			if got := coordinator.GetEventStream(sid, b); got != s {
				t.Fatalf("%q read as %d, written back as %q", s, b, got)
			}
		default:
			if s != gs || b != 0 {
				t.Fatalf("%q accepted without a position", s)
			}
		}
	})
}
