package mcp_test

import (
	"fmt"
	"testing/fstest"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// A skill registered from values, and a folder of skills from a file
// system (os.DirFS in a program, an in-memory one here).
func ExampleServer_AddSkill() {
	s := mcp.NewServer(mcp.Implementation{Name: "skills", Version: "1.0.0"}, nil)
	err := s.AddSkill(mcp.Skill{Path: "acme/refunds", Files: map[string][]byte{
		"SKILL.md":          []byte("---\nname: refunds\ndescription: Process refund requests.\n---\n# Refunds\n"),
		"examples/email.md": []byte("Dear customer, ..."),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	folder := fstest.MapFS{
		"git-workflow/SKILL.md": {Data: []byte("---\nname: git-workflow\ndescription: Branch and commit as this team does.\n---\n")},
		"notes/README.md":       {Data: []byte("not a skill: no SKILL.md")},
	}
	if _, err := s.AddSkillsFS(folder); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.SkillURIs())
	// A skill whose name is not the last segment of its path is refused.
	err = s.AddSkill(mcp.Skill{Path: "refund", Files: map[string][]byte{
		"SKILL.md": []byte("---\nname: refunds\ndescription: Process refund requests.\n---\n"),
	}})
	fmt.Println(err)
	// Output:
	// [skill://acme/refunds/SKILL.md skill://git-workflow/SKILL.md]
	// mcp: invalid skill "refund": SKILL.md names the skill "refunds", but the last segment of its path is "refund": they must be equal
}
