package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// parseToolScopes reads --auth-tool-scopes: entries separated by ";",
// each a tool name, "=", and its scopes (comma- or space-separated), e.g.
// "echo=mcp:tools;add=mcp:tools mcp:math".
func parseToolScopes(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, list, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		scopes := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("%q is not tool=scopes", entry)
		case len(scopes) == 0:
			return nil, fmt.Errorf("tool %q has no scopes", name)
		case out[name] != nil:
			return nil, fmt.Errorf("tool %q is listed twice", name)
		}
		for _, sc := range scopes {
			if strings.ContainsAny(sc, "\"\\") || strings.IndexFunc(sc, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
				return nil, fmt.Errorf("tool %q: %q is not a scope token", name, sc)
			}
		}
		out[name] = scopes
	}
	return out, nil
}

// requireToolScopes gives the tools of --auth-tool-scopes their scopes;
// a name the tool pack does not have is an error.
func requireToolScopes(srv *mcp.Server, spec string) error {
	scopes, err := parseToolScopes(spec)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(scopes))
	for name := range scopes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := srv.RequireScopes(mcp.KindTool, name, scopes[name]...); err != nil {
			return err
		}
	}
	return nil
}
