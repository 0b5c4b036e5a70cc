package mcp_test

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are import path prefixes that a program importing only package
// mcp must not link: the Redis backend and its client, gRPC, and the
// OpenTelemetry SDK and exporters (a program that wants them imports
// mcp/redisbackend or sets tracing up itself, as cmd/server does).
var heavy = []string{
	"github.com/redis/go-redis/",
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis",
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend",
	"google.golang.org/grpc",
	"go.opentelemetry.io/proto/otlp",
	"go.opentelemetry.io/otel/exporters/",
	"go.opentelemetry.io/otel/sdk",
}

// deps lists the packages outside the standard library that pkg links,
// with go list -deps.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is needed to list the program's dependencies:", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// matching returns the packages of list that start with one of prefixes.
func matching(list, prefixes []string) []string {
	var out []string
	for _, p := range list {
		for _, h := range prefixes {
			if strings.HasPrefix(p, h) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// A stdio-only program (testdata/stdioonly, which imports mcp alone)
// links no Redis client, gRPC or OTLP exporter.
func TestStdioProgramDeps(t *testing.T) {
	list := deps(t, "./testdata/stdioonly")
	third := 0
	for _, p := range list {
		if !strings.HasPrefix(p, "github.com/mcpcluster/mcpcluster/") {
			third++
		}
	}
	t.Logf("a stdio-only program links %d third-party packages", third)
	if bad := matching(list, heavy); len(bad) > 0 {
		t.Errorf("a program importing only mcp links %d packages it must not:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	// The check sees them where they belong: the reference node links
	// every kind.
	server := matching(deps(t, "../cmd/server"), heavy)
	for _, h := range []string{"github.com/redis/go-redis/", "google.golang.org/grpc", "go.opentelemetry.io/otel/exporters/"} {
		if len(matching(server, []string{h})) == 0 {
			t.Errorf("cmd/server links nothing under %s: the check would not see it either", h)
		}
	}
}
