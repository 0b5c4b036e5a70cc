// Command stdioonly is a stdio server that imports package mcp alone:
// TestStdioProgramDeps lists what it links.
package main

import (
	"context"
	"os"

	"github.com/mcpcluster/mcpcluster/mcp"
)

func main() {
	s := mcp.NewServer(mcp.Implementation{Name: "stdioonly", Version: "1.0.0"}, nil)
	if err := s.ServeStdio(context.Background(), os.Stdin, os.Stdout, nil); err != nil {
		os.Exit(1)
	}
}
