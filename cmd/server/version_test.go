package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// --version names the release, the build, and the format versions the
// node reads and writes.
func TestVersionText(t *testing.T) {
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(release) {
		t.Errorf("release %q is not a semantic version", release)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("--version exits %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"mcpcluster server " + release + "\n",
		"build: " + buildVersion() + ", go1.",
		"node format: writes 2 (its instance name ends in \"~2\"",
		"reads 1 to 2\n",
		"session record format: writes 2, reads 1 to 2\n",
		"shares a cluster with releases 0.1 and 0.2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--version lacks %q:\n%s", want, out.String())
		}
	}
	if coordinator.Format != 2 || session.Format != 2 {
		t.Errorf("a format changed (node %d, session %d): update this test, --version's compatibility line and docs/UPGRADING.md", coordinator.Format, session.Format)
	}
	old := release
	release = "9.8.7" // -ldflags "-X main.release=9.8.7"
	defer func() { release = old }()
	if s := versionText(); !strings.HasPrefix(s, "mcpcluster server 9.8.7\n") {
		t.Errorf("with -X main.release=9.8.7, --version prints %q", s)
	}
}
