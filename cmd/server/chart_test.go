package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The chart's limits block carries the node's defaults: each line names
// its MCP_* variable in a comment, and its value is that setting's default
// in the settings table.
func TestChartLimitsAreNodeDefaults(t *testing.T) {
	f, err := os.Open("../../deploy/helm/mcpcluster/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defaults := map[string]string{}
	for _, s := range settings() {
		defaults[s.env] = s.def
	}
	in, seen := false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "limits:":
			in = true
			continue
		case in && !strings.HasPrefix(line, "  "):
			in = false
		}
		if !in || strings.TrimSpace(line) == "" {
			continue
		}
		kv, comment, ok := strings.Cut(line, "#")
		key, value, ok2 := strings.Cut(kv, ":")
		env, _, ok3 := strings.Cut(strings.TrimSpace(comment), ":")
		if !ok || !ok2 || !ok3 {
			t.Fatalf("limits line %q is not `key: value  # MCP_NAME: meaning`", line)
		}
		def, known := defaults[env]
		if !known {
			t.Fatalf("limits.%s names %s, which is no setting", strings.TrimSpace(key), env)
		}
		if got := strings.TrimSpace(value); got != def {
			t.Errorf("limits.%s is %s, want the node's default %s (%s)", strings.TrimSpace(key), got, def, env)
		}
		seen++
	}
	if seen == 0 {
		t.Fatal("no limits block in values.yaml")
	}
}
