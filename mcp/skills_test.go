package mcp_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// skillMD is a SKILL.md of name with extra frontmatter lines.
func skillMD(name string, extra ...string) []byte {
	fm := append([]string{"name: " + name, "description: The " + name + " skill."}, extra...)
	return []byte("---\n" + strings.Join(fm, "\n") + "\n---\n\n# " + name + "\n")
}

// skillEntry is a Skill entry as clients decode it.
type skillEntry struct {
	URI         string         `json:"uri"`
	Frontmatter map[string]any `json:"frontmatter"`
	Resources   []struct {
		URI    string `json:"uri"`
		Digest string `json:"digest"`
		Size   int    `json:"size"`
	} `json:"resources"`
}

// Every bad skill is refused at registration with an error saying what
// is wrong (wrapping ErrInvalidSkill), and leaves nothing registered.
func TestAddSkillRefuses(t *testing.T) {
	ok := skillMD("a")
	many := map[string][]byte{"SKILL.md": ok}
	for i := range mcp.SkillMaxFiles {
		many[fmt.Sprintf("f/%03d.txt", i)] = []byte("x")
	}
	big := map[string][]byte{"SKILL.md": ok}
	for i := range 5 {
		big[fmt.Sprintf("part%d.bin", i)] = make([]byte, 4<<20) // 5 × 4 MiB > 16 MiB
	}
	cases := []struct {
		name string
		sk   mcp.Skill
		want string
	}{
		{"empty path", mcp.Skill{Path: "", Files: map[string][]byte{"SKILL.md": ok}}, "the path needs"},
		{"dot segment", mcp.Skill{Path: "x/../a", Files: map[string][]byte{"SKILL.md": ok}}, "the path needs"},
		{"space in path", mcp.Skill{Path: "my skills/a", Files: map[string][]byte{"SKILL.md": ok}}, "the path needs"},
		{"no SKILL.md", mcp.Skill{Path: "a", Files: map[string][]byte{"README.md": ok}}, "has no SKILL.md"},
		{"name is not the last segment", mcp.Skill{Path: "x/b", Files: map[string][]byte{"SKILL.md": ok}}, `names the skill "a", but the last segment of its path is "b"`},
		{"uppercase name", mcp.Skill{Path: "A", Files: map[string][]byte{"SKILL.md": skillMD("A")}}, "naming rules"},
		{"double hyphen", mcp.Skill{Path: "a--b", Files: map[string][]byte{"SKILL.md": skillMD("a--b")}}, "naming rules"},
		{"no description", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\n---\n")}}, "no description"},
		{"blank description", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\ndescription: \"  \"\n---\n")}}, "description is empty"},
		{"long description", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\ndescription: " + strings.Repeat("é", 1025) + "\n---\n")}}, "1025 characters"},
		{"name not a string", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: 12\ndescription: d\n---\n")}}, "no name string"},
		{"no frontmatter", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("# a\n")}}, "does not begin with"},
		{"unclosed frontmatter", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\n")}}, "no line \"---\" closing"},
		{"bad YAML", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\n  description: [d\n---\n")}}, "line 3"},
		{"a list, not a mapping", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\n- a\n---\n")}}, "not a YAML mapping"},
		{"repeated key", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": []byte("---\nname: a\nname: a\ndescription: d\n---\n")}}, `the key "name" appears twice`},
		{"bad file path", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": ok, "../x": nil}}, `"../x" is not a file path`},
		{"file and folder", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": ok, "x": nil, "x/y/z": nil}}, "x is a file and a folder"},
		{"file too large", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": ok, "big": make([]byte, 4<<20+1)}}, "big has 4194305 bytes, over the bound of 4194304"},
		{"too many files", mcp.Skill{Path: "a", Files: many}, "has 513 files, over the extension's bound of 512"},
		{"too many bytes", mcp.Skill{Path: "a", Files: big}, "over the extension's bound of 16777216"},
		{"bad scope", mcp.Skill{Path: "a", Files: map[string][]byte{"SKILL.md": ok}, RequiredScopes: []string{"a b"}}, "not a valid scope token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
			err := s.AddSkill(tc.sk)
			if !errors.Is(err, mcp.ErrInvalidSkill) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AddSkill: %v, want ErrInvalidSkill with %q", err, tc.want)
			}
			if uris := s.SkillURIs(); len(uris) != 0 {
				t.Fatalf("registered %v after a refusal", uris)
			}
		})
	}
}

// A nested skill may not serve a file its enclosing skill serves with
// other bytes, and AddSkillsFS registers every skill or none.
func TestAddSkillsFSAllOrNothing(t *testing.T) {
	s := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	if err := s.AddSkill(mcp.Skill{Path: "outer", Files: map[string][]byte{"SKILL.md": skillMD("outer"), "inner/SKILL.md": skillMD("inner")}}); err != nil {
		t.Fatal(err)
	}
	err := s.AddSkill(mcp.Skill{Path: "outer/inner", Files: map[string][]byte{"SKILL.md": skillMD("inner", "license: MIT")}})
	if !errors.Is(err, mcp.ErrInvalidSkill) || !strings.Contains(err.Error(), "differs from the same file of the skill skill://outer/SKILL.md") {
		t.Fatalf("a nested skill with other bytes: %v", err)
	}
	fsys := fstest.MapFS{
		"good/SKILL.md":   {Data: skillMD("good")},
		"bad/SKILL.md":    {Data: skillMD("wrong")},
		"worse/SKILL.md":  {Data: []byte("no frontmatter")},
		"plain/README.md": {Data: []byte("not a skill")},
	}
	_, err = s.AddSkillsFS(fsys)
	for _, want := range []string{`invalid skill "bad"`, `invalid skill "worse"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AddSkillsFS: %v, want it to name %s", err, want)
		}
	}
	if got := s.SkillURIs(); !slices.Equal(got, []string{"skill://outer/SKILL.md"}) {
		t.Errorf("after a refused AddSkillsFS: %v", got)
	}
	if _, err := s.AddSkillsFS(fstest.MapFS{"SKILL.md": {Data: skillMD("top")}}); err == nil {
		t.Error("a SKILL.md at the top of the folder: no error")
	}
}

// skillsServer serves a few skills from values: one under a prefix, a
// nested one, a binary and an empty file.
func skillsServer(t *testing.T, pageSize int) *node {
	png := []byte{0x89, 'P', 'N', 'G', 0xff, 0x00}
	return newNode(t, &nodeOptions{Server: mcp.ServerOptions{PageSize: pageSize}, Setup: func(s *mcp.Server) {
		for _, sk := range []mcp.Skill{
			{Path: "acme/billing/refunds", Files: map[string][]byte{"SKILL.md": skillMD("refunds", "license: Apache-2.0"), "examples/email.md": []byte("Dear customer"), "logo.png": png, "empty.txt": {}}},
			{Path: "git-workflow", Files: map[string][]byte{"SKILL.md": skillMD("git-workflow")}},
			{Path: "outer", Files: map[string][]byte{"SKILL.md": skillMD("outer"), "inner/SKILL.md": skillMD("inner"), "inner/notes.md": []byte("n")}},
			{Path: "outer/inner", Files: map[string][]byte{"SKILL.md": skillMD("inner"), "notes.md": []byte("n")}},
		} {
			if err := s.AddSkill(sk); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

// skills/list pages, skills/get, and the files' digests and contents,
// on one node.
func TestSkillsServe(t *testing.T) {
	n := skillsServer(t, 2)
	c := mcptest.New(t, n.url)
	cl := &caller{t: t, c: c, url: n.url, era: era{"2026-07-28", true}}
	got, sizes := cl.names("skills/list", "skills")
	want := []string{"skill://acme/billing/refunds/SKILL.md", "skill://demo-tour/SKILL.md", "skill://git-workflow/SKILL.md", "skill://outer/SKILL.md", "skill://outer/inner/SKILL.md"}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Fatalf("skills/list pages: %v (sizes %v), want %v in pages of 2", got, sizes, want)
	}
	var res struct {
		Skill skillEntry `json:"skill"`
	}
	cl.call("skills/get", map[string]any{"uri": want[0]}).Result(t, &res)
	if res.Skill.URI != want[0] || res.Skill.Frontmatter["license"] != "Apache-2.0" || res.Skill.Frontmatter["name"] != "refunds" {
		t.Errorf("skills/get: %+v", res.Skill)
	}
	var uris []string
	for _, r := range res.Skill.Resources {
		uris = append(uris, r.URI)
		var read struct {
			Contents []struct {
				MimeType string  `json:"mimeType"`
				Text     *string `json:"text"`
				Blob     *string `json:"blob"`
			} `json:"contents"`
		}
		cl.call("resources/read", map[string]any{"uri": r.URI}).Result(t, &read)
		if len(read.Contents) != 1 {
			t.Fatalf("resources/read %s: %d contents", r.URI, len(read.Contents))
		}
		var data []byte
		switch ct := read.Contents[0]; {
		case ct.Text != nil:
			data = []byte(*ct.Text)
		case ct.Blob != nil:
			data, _ = base64.StdEncoding.DecodeString(*ct.Blob)
		default:
			t.Fatalf("resources/read %s: neither text nor blob", r.URI)
		}
		sum := sha256.Sum256(data)
		if r.Digest != "sha256:"+hex.EncodeToString(sum[:]) || r.Size != len(data) {
			t.Errorf("%s: manifest says %s, %d bytes; read %d bytes", r.URI, r.Digest, r.Size, len(data))
		}
	}
	if !slices.Equal(uris, []string{want[0], "skill://acme/billing/refunds/empty.txt", "skill://acme/billing/refunds/examples/email.md", "skill://acme/billing/refunds/logo.png"}) {
		t.Errorf("manifest: %v", uris)
	}
	// The enclosing skill lists the nested one's files too.
	cl.call("skills/get", map[string]any{"uri": "skill://outer/SKILL.md"}).Result(t, &res)
	if len(res.Skill.Resources) != 3 {
		t.Errorf("outer lists %d files, want its SKILL.md and inner's two", len(res.Skill.Resources))
	}
}

// resources/directory/read: a skill's folder and subfolders, the folders
// of the path above skills, pages, and -32602 for anything else.
func TestSkillsDirectoryRead(t *testing.T) {
	n := skillsServer(t, 2)
	cl := &caller{t: t, c: mcptest.New(t, n.url), url: n.url, era: era{"2026-07-28", true}}
	children := func(uri string) []string {
		var out []string
		cursor := ""
		for range 10 {
			params := map[string]any{"uri": uri}
			if cursor != "" {
				params["cursor"] = cursor
			}
			var page struct {
				Resources []mcp.Resource `json:"resources"`
				Next      string         `json:"nextCursor"`
			}
			cl.call("resources/directory/read", params).Result(t, &page)
			for _, r := range page.Resources {
				out = append(out, r.URI+" "+r.MimeType)
			}
			if cursor = page.Next; cursor == "" {
				return out
			}
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	for dir, want := range map[string][]string{
		"skill://acme":         {"skill://acme/billing inode/directory"},
		"skill://acme/billing": {"skill://acme/billing/refunds inode/directory"},
		"skill://acme/billing/refunds": {
			"skill://acme/billing/refunds/SKILL.md text/markdown", "skill://acme/billing/refunds/empty.txt text/plain",
			"skill://acme/billing/refunds/examples inode/directory", "skill://acme/billing/refunds/logo.png image/png"},
		"skill://outer":       {"skill://outer/SKILL.md text/markdown", "skill://outer/inner inode/directory"},
		"skill://outer/inner": {"skill://outer/inner/SKILL.md text/markdown", "skill://outer/inner/notes.md text/markdown"},
	} {
		if got := children(dir); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", dir, got, want)
		}
	}
	// A megabyte of path segments is looked up no further than a short URI.
	long := "skill://acme" + strings.Repeat("/a", 512<<10)
	for _, method := range []string{"resources/read", "resources/directory/read"} {
		if f := cl.call(method, map[string]any{"uri": long}).Final(); f == nil || f.Error == nil || f.Error.Code != -32602 {
			t.Errorf("%s of a 1 MiB URI: %+v, want -32602", method, f)
		}
	}
	for _, uri := range []string{"skill://acme/billing/refunds/SKILL.md", "skill://nowhere", "skill://acme/", "skill://", "demo://counter"} {
		resp := cl.call("resources/directory/read", map[string]any{"uri": uri})
		if f := resp.Final(); f == nil || f.Error == nil || f.Error.Code != -32602 {
			t.Errorf("%s: %s, want -32602", uri, resp.Body)
		}
	}
}

// Skills change at run time: added, disabled (cluster state on a shared
// backend) and removed, each seen by the next request.
func TestSkillsRuntimeChanges(t *testing.T) {
	n := newNode(t, nil)
	cl := &caller{t: t, c: mcptest.New(t, n.url), url: n.url, era: era{"2026-07-28", true}}
	list := func() []string {
		got, _ := cl.names("skills/list", "skills")
		return got
	}
	md := skillMD("late")
	if err := n.srv.AddSkill(mcp.Skill{Path: "late", Files: map[string][]byte{"SKILL.md": md}}); err != nil {
		t.Fatal(err)
	}
	md[0] = 'X' // the server serves what it was given, as its digest says
	var read struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	cl.call("resources/read", map[string]any{"uri": "skill://late/SKILL.md"}).Result(t, &read)
	if len(read.Contents) != 1 || read.Contents[0].Text != string(skillMD("late")) {
		t.Errorf("read after the caller changed its bytes: %+v", read.Contents)
	}
	if got := list(); !slices.Equal(got, []string{"skill://demo-tour/SKILL.md", "skill://late/SKILL.md"}) {
		t.Fatalf("after AddSkill: %v", got)
	}
	if err := n.srv.SetEnabled(t.Context(), mcp.KindSkill, "skill://late/SKILL.md", false); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []string{"skill://demo-tour/SKILL.md"}) || n.srv.Enabled(mcp.KindSkill, "skill://late/SKILL.md") {
		t.Fatalf("after disabling late: %v", got)
	}
	if f := cl.call("resources/read", map[string]any{"uri": "skill://late/SKILL.md"}).Final(); f.Error == nil {
		t.Error("a disabled skill's SKILL.md reads")
	}
	n.srv.RemoveSkills("skill://demo-tour/SKILL.md", "skill://late/SKILL.md")
	if f := cl.call("skills/list", nil).Final(); f.Error == nil || f.Error.Code != -32601 {
		t.Errorf("skills/list without skills: %s, want -32601 (the extension is no longer declared)", cl.call("skills/list", nil).Body)
	}
	var disc struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	cl.call("server/discover", nil).Result(t, &disc)
	if _, ok := disc.Capabilities.Extensions[mcp.ExtensionSkills]; ok {
		t.Error("the extension is declared without skills")
	}
}
