// Package backendwrap lets code of this module turn a cluster.Backend
// into an *mcp.Backend (mcp/redisbackend does; a test harness may wrap a
// backend with faults), without package mcp exporting a constructor whose
// argument is an internal type. Package mcp sets Wrap when it is
// initialised, so any package that imports mcp finds it set.
package backendwrap

import "github.com/mcpcluster/mcpcluster/internal/cluster"

// Wrap returns b as an *mcp.Backend (typed any: this package cannot
// import mcp).
var Wrap func(b *cluster.Backend) any
