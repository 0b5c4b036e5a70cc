package conformance

import (
	"embed"
	"io/fs"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// The skills the Skills extension's scenarios (sep-2640-skills-*) list,
// get, read and browse: several skills, one under a path prefix
// (acme/billing/refunds), frontmatter fields beyond name and description,
// and folders nested two deep. The directory scenario browses the first
// listed skill, which has a subfolder.

//go:embed skills
var skillFiles embed.FS

// registerSkills serves every folder of skills/ holding a SKILL.md.
func registerSkills(s *mcp.Server) {
	sub, err := fs.Sub(skillFiles, "skills")
	if err == nil {
		_, err = s.AddSkillsFS(sub)
	}
	if err != nil {
		panic(err) // the pack's own files, checked by its tests
	}
}
