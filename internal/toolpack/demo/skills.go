package demo

import (
	"embed"
	"io/fs"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// SkillURI is the demo pack's skill (the Skills extension): a tour of the
// pack, with a reference file beside its SKILL.md.
const SkillURI = "skill://demo-tour/SKILL.md"

//go:embed skills
var skillFiles embed.FS

// registerSkills serves the folders of skills/ as skills.
func registerSkills(s *mcp.Server) {
	sub, err := fs.Sub(skillFiles, "skills")
	if err == nil {
		_, err = s.AddSkillsFS(sub)
	}
	if err != nil {
		panic(err) // the pack's own files, checked by its tests
	}
}
