package mcp_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// TestRequestSeesPrincipalOfItsHTTPRequest: the principal an
// authentication layer puts in the HTTP request's context is what a
// handler sees through Request.Principal, on a session and stateless;
// an unauthenticated request sees nil.
func TestRequestSeesPrincipalOfItsHTTPRequest(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
		p := req.Principal()
		if p == nil {
			return "anonymous", nil
		}
		return p.ID() + " " + strings.Join(p.Scopes, ","), nil
	})
	h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testAuthn(h))
	t.Cleanup(func() { ts.CloseClientConnections(); h.Close(); ts.Close() })

	as := header("X-Test-Subject", "ada")
	legacy := mcptest.New(t, ts.URL)
	legacy.Header.Set("X-Test-Subject", "ada")
	legacy.Initialize("2025-11-25", nil)
	if got := resultText(t, post(t, legacy, ts.URL, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}}, nil)); got != "https://as.test#ada a,b" {
		t.Errorf("legacy call saw %q", got)
	}
	c := session(t, ts.URL, "2025-11-25", nil)
	if got := resultText(t, post(t, c, ts.URL, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}}, nil)); got != "anonymous" {
		t.Errorf("unauthenticated call saw %q", got)
	}
	if got := resultText(t, postModern(t, c, ts.URL, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}}, as)); got != "https://as.test#ada a,b" {
		t.Errorf("stateless call saw %q", got)
	}
}
