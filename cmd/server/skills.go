package main

import (
	"fmt"
	"os"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// addSkills serves the skills of --skills-dir: every folder below dir
// holding a SKILL.md. A folder that holds none, or any bad skill, is an
// error: a node never starts serving part of what it was given.
func addSkills(srv *mcp.Server, dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", dir)
	}
	uris, err := srv.AddSkillsFS(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	if len(uris) == 0 {
		return nil, fmt.Errorf("%s holds no folder with a SKILL.md", dir)
	}
	return uris, nil
}
