package clustertest_test

import (
	"net/http"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
)

// TestCrossPrincipalOnRedis runs the cross-principal battery on three
// reference nodes (cmd/server) sharing a real redis-server, behind the
// bearer middleware, with access tokens a real OpenID provider issued to
// two clients through client credentials: replying to the owner's
// server→client request, resuming its streams, ending its session,
// reusing its requestState and cancelling its listen stream, from every
// node (see mcptest.CrossPrincipal).
func TestCrossPrincipalOnRedis(t *testing.T) {
	const resource = "https://mcp.example.test/mcp"
	p := authtest.Start(t, authtest.Options{
		DefaultResource: resource,
		Clients: []*authtest.Client{
			{ID: "ada", Secret: "ada-secret", Scopes: []string{"mcp:tools"}},
			{ID: "eve", Secret: "eve-secret", Scopes: []string{"mcp:tools"}},
		},
	})
	bearer := func(id string) http.Header {
		tok, err := p.ClientCredentials(t.Context(), id, id+"-secret", resource, "mcp:tools")
		if err != nil {
			t.Fatalf("token for %s: %v", id, err)
		}
		return http.Header{"Authorization": {"Bearer " + tok}}
	}
	c := clustertest.Start(t, clustertest.Options{
		Args: []string{"--auth-issuer", p.Issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools"},
	})
	b := &mcptest.CrossPrincipal{T: t, URLs: c.NodeURLs(), Owner: bearer("ada"), Intruder: bearer("eve")}
	b.Legacy(false)
	b.Modern()
	b.Log("three nodes (cmd/server on Redis, real tokens)")
}
