package main

import (
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// A run that completed no operation is an anomaly on the page and in
// the log, not a silent 0 ops/s; an idle run (no operations by design)
// is not.
func TestNoOperationIsAnAnomaly(t *testing.T) {
	stuck := &result{
		Spec:   spec{Kind: "main", Scenario: "fanout", Revision: modern, Target: "redis3"},
		Report: &bench.Report{Counters: map[string]int64{"streams_opened": 1000}},
	}
	idle := &result{Spec: spec{Kind: "idle", Scenario: "idle", Revision: legacy, Target: "redis3"}, Report: &bench.Report{}}
	var b strings.Builder
	renderProblems(&b, &suiteResult{Results: []*result{stuck, idle}})
	page := b.String()
	if !strings.Contains(page, "main fanout "+modern+" on redis3: **no operation completed**") {
		t.Errorf("anomalies do not flag the run without operations:\n%s", page)
	}
	if strings.Contains(page, "idle idle") {
		t.Errorf("anomalies flag an idle run:\n%s", page)
	}
	if got := errorsCell(stuck.Report); !strings.Contains(got, "no operation completed") {
		t.Errorf("errors cell %q, want it to say no operation completed", got)
	}
	if got := summarize(stuck); !strings.Contains(got, "NO OPERATION COMPLETED") {
		t.Errorf("log line %q, want it to say no operation completed", got)
	}
	if got := summarize(idle); strings.Contains(got, "NO OPERATION") {
		t.Errorf("idle log line %q flags no operation", got)
	}
}
