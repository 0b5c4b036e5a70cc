package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The chart's limits block, and its redis.connection block, carry the
// node's defaults: each line names its MCP_* variable in a comment, and
// its value is that setting's default in the settings table.
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
	in, indent, seen := false, "", 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "limits:" || line == "  connection:":
			in, indent = true, strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " "))+2)
			continue
		case in && !strings.HasPrefix(line, indent):
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
	if seen < 18 {
		t.Fatalf("%d lines in the limits and redis.connection blocks of values.yaml; want them all", seen)
	}
}

// The chart reaches every Redis setting of the node (from its redis.*
// values), and its metrics port is the node's default one.
func TestChartCoversTheRedisSettings(t *testing.T) {
	var templates strings.Builder
	for _, name := range []string{"configmap.yaml", "deployment.yaml"} {
		b, err := os.ReadFile("../../deploy/helm/mcpcluster/templates/" + name)
		if err != nil {
			t.Fatal(err)
		}
		templates.Write(b)
	}
	for _, s := range settings() {
		if strings.HasPrefix(s.flag, "redis-") && !strings.Contains(templates.String(), s.env+":") && !strings.Contains(templates.String(), "name: "+s.env) {
			t.Errorf("the chart never sets %s (--%s)", s.env, s.flag)
		}
		if s.flag == "metrics-addr" {
			values, err := os.ReadFile("../../deploy/helm/mcpcluster/values.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := strings.Cut(s.def, ":")
			if !strings.Contains(string(values), "\nmetricsPort: "+port+"\n") {
				t.Errorf("values.yaml's metricsPort is not the node's default port %s", port)
			}
		}
	}
}
