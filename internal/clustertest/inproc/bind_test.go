package inproc_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// TestCrossPrincipalThreeNodes runs the cross-principal battery on three
// nodes: the owner's state is made on the first, and every attempt of
// the intruder lands on each node in turn, so the check holds wherever
// a request lands (see mcptest.CrossPrincipal).
func TestCrossPrincipalThreeNodes(t *testing.T) {
	c := inproc.New(t, inproc.Options{
		Setup: func(_ int, s *mcp.Server) {
			demo.Register(s)
			mcp.AddTool(s, mcp.Tool{Name: "hold", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			})
		},
		Server: mcp.ServerOptions{StateKeys: [][]byte{bytes.Repeat([]byte{7}, 32)}},
		Wrap:   inproc.HeaderAuthn,
	})
	as := func(sub string) http.Header { return http.Header{"X-Test-Subject": {sub}} }
	b := &mcptest.CrossPrincipal{T: t, URLs: c.URLs(), Owner: as("ada"), Intruder: as("eve")}
	b.Legacy(true)
	b.Modern()
	b.Tasks("hold")
	b.LegacyTasks("hold")
	anon := &mcptest.CrossPrincipal{T: t, URLs: c.URLs(), Intruder: as("eve")}
	anon.Legacy(false)
	anon.LegacyTasks("hold")
	b.Attempts += anon.Attempts
	b.Refusals += anon.Refusals
	b.Log("three nodes (in process)")
}
