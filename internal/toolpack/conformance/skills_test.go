package conformance

import (
	"strings"
	"testing"
)

// The pack serves what the skills scenarios exercise: several skills,
// one under a path prefix, and a first listed skill whose folder has a
// subfolder (the directory scenario browses the first one).
func TestSkills(t *testing.T) {
	c := startServer(t)
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	var list struct {
		Skills []struct {
			URI string `json:"uri"`
		} `json:"skills"`
	}
	c.call("skills/list", map[string]any{"_meta": meta}, &list)
	var uris []string
	for _, s := range list.Skills {
		uris = append(uris, s.URI)
	}
	if got := strings.Join(uris, " "); got != "skill://acme/billing/refunds/SKILL.md skill://git-workflow/SKILL.md skill://pdf-processing/SKILL.md" {
		t.Fatalf("skills/list: %s", got)
	}
	var dir struct {
		Resources []struct {
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
		} `json:"resources"`
	}
	c.call("resources/directory/read", map[string]any{"uri": strings.TrimSuffix(uris[0], "/SKILL.md"), "_meta": meta}, &dir)
	sub := false
	for _, r := range dir.Resources {
		sub = sub || r.MimeType == "inode/directory"
	}
	if !sub {
		t.Errorf("the first skill's folder has no subfolder: %+v", dir.Resources)
	}
}
