package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTree writes files (path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// --skills-dir serves every folder holding a SKILL.md, beside the tool
// pack's own skill, at its path.
func TestSkillsDirServesItsSkills(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"team/review/SKILL.md":         "---\nname: review\ndescription: Review a change.\n---\nRead the diff first.\n",
		"team/review/checklist.md":     "- tests\n",
		"release/SKILL.md":             "---\nname: release\ndescription: Cut a release.\n---\n",
		".git/objects/SKILL.md":        "not a skill: hidden folders are left out\n",
		"team/review/.editor-swap.tmp": "left out too\n",
	})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}` + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"--stdio", "--skills-dir", dir}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var resp struct {
		Result struct {
			Skills []struct {
				URI       string `json:"uri"`
				Resources []struct {
					URI string `json:"uri"`
				} `json:"resources"`
			} `json:"skills"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var got []string
	for _, s := range resp.Result.Skills {
		got = append(got, s.URI)
		if s.URI == "skill://team/review/SKILL.md" && len(s.Resources) != 2 {
			t.Errorf("review lists %d files, want SKILL.md and checklist.md: %+v", len(s.Resources), s.Resources)
		}
	}
	want := "skill://demo-tour/SKILL.md skill://release/SKILL.md skill://team/review/SKILL.md"
	if strings.Join(got, " ") != want {
		t.Errorf("skills/list: %v, want %s", got, want)
	}
}

// A bad skill, a file past --max-skill-file-bytes, an empty folder or a
// missing one stop the node with an error naming the setting and the
// problem.
func TestSkillsDirRefusesBadSkills(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		want  string
	}{
		{"name differs from folder", map[string]string{"a/SKILL.md": "---\nname: b\ndescription: d\n---\n"}, nil, `names the skill "b"`},
		{"bad yaml", map[string]string{"a/SKILL.md": "---\nname: [a\ndescription: d\n---\n"}, nil, "frontmatter"},
		{"no frontmatter", map[string]string{"a/SKILL.md": "# a\n"}, nil, "does not begin with"},
		{"file too large", map[string]string{"a/SKILL.md": "---\nname: a\ndescription: d\n---\n", "a/big.txt": strings.Repeat("x", 2048)},
			[]string{"--max-skill-file-bytes", "1024"}, "larger than the bound of 1024 bytes"},
		{"no skill", map[string]string{"README.md": "nothing\n"}, nil, "holds no folder with a SKILL.md"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			var out, errOut bytes.Buffer
			args := append([]string{"--stdio", "--skills-dir", dir}, tc.args...)
			code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
			if code != 2 || !strings.Contains(errOut.String(), "--skills-dir (MCP_SKILLS_DIR)") || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and an error with %q", code, errOut.String(), tc.want)
			}
		})
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"--stdio", "--skills-dir", filepath.Join(t.TempDir(), "none")}, strings.NewReader(""), &bytes.Buffer{}, &errOut); code != 2 {
		t.Fatalf("a missing folder: exit %d (%s), want 2", code, errOut.String())
	}
}

// A ConfigMap mounted as a skill's folder (the Helm chart's skills.*)
// holds its files through links into a hidden, timestamped folder:
// the links are followed and the hidden names left out.
func TestSkillsDirReadsAMountedConfigMap(t *testing.T) {
	dir := t.TempDir()
	mount := filepath.Join(dir, "acme", "refunds")
	writeTree(t, filepath.Join(mount, "..2026_01_02_03_04_05.123"), map[string]string{
		"SKILL.md":          "---\nname: refunds\ndescription: Process refunds.\n---\n",
		"examples/email.md": "Dear customer\n",
	})
	for link, target := range map[string]string{"..data": "..2026_01_02_03_04_05.123", "SKILL.md": "..data/SKILL.md", "examples": "..data/examples"} {
		if err := os.Symlink(target, filepath.Join(mount, link)); err != nil {
			t.Fatal(err)
		}
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"skills/get","params":{"uri":"skill://acme/refunds/SKILL.md",` + meta + `}}` + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"--stdio", "--skills-dir", dir}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{`"uri":"skill://acme/refunds/SKILL.md","digest"`, `"uri":"skill://acme/refunds/examples/email.md","digest"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("skills/get lacks %s: %s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "..") {
		t.Errorf("a hidden name is served: %s", out.String())
	}
}
