// Package conformance is the tool pack the official MCP conformance suite
// (@modelcontextprotocol/conformance) expects a server to provide: the
// fixed tools, resources, resource template, prompts, completions and
// skills its server scenarios call by name and whose payloads they check.
//
// Register installs exactly those fixtures on an mcp.Server; a server
// started with this pack and nothing else is what the suite scores.
package conformance

import (
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Register adds the conformance fixtures to s: the tools, the static and
// subscribable resources, the resource template, the prompts, the skills
// and the completion handler (which replaces any completion handler s
// had).
func Register(s *mcp.Server) {
	registerTools(s)
	registerModern(s)
	registerTasks(s)
	registerResources(s)
	registerPrompts(s)
	registerSkills(s)
	s.SetCompletionHandler(complete)
}
