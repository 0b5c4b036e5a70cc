package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// testAuthn is a stand-in authentication layer: the subject comes from
// the X-Test-Subject header; without it the request is anonymous.
func testAuthn(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sub := r.Header.Get("X-Test-Subject"); sub != "" {
			p := &mcp.Principal{Issuer: "https://as.test", Subject: sub, Scopes: []string{"a", "b"}}
			r = r.WithContext(mcp.WithPrincipal(r.Context(), p))
		}
		h.ServeHTTP(w, r)
	})
}

func subject(sub string) http.Header { return http.Header{"X-Test-Subject": {sub}} }

// TestCrossPrincipalOneNode: everything stateful on a node is bound to
// the principal that made it; another principal (or an anonymous
// caller, and the reverse) gets exactly the answer for something that
// does not exist, and changes nothing (see mcptest.CrossPrincipal).
func TestCrossPrincipalOneNode(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, &mcp.ServerOptions{RequestTimeout: 10 * time.Second})
	demo.Register(srv)
	mcp.AddTool(srv, mcp.Tool{Name: "hold", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{RetryHint: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testAuthn(h))
	t.Cleanup(func() { ts.CloseClientConnections(); h.Close(); ts.Close() })
	b := &mcptest.CrossPrincipal{T: t, URLs: []string{ts.URL}, Owner: subject("ada"), Intruder: subject("eve")}
	b.Legacy(true)
	b.Modern()
	b.Tasks("hold")
	b.LegacyTasks("hold")
	// An anonymous owner and an authenticated intruder.
	anon := &mcptest.CrossPrincipal{T: t, URLs: []string{ts.URL}, Owner: nil, Intruder: subject("eve")}
	anon.Legacy(false)
	anon.Tasks("hold")
	anon.LegacyTasks("hold")
	b.Attempts += anon.Attempts
	b.Refusals += anon.Refusals
	b.Log("one node")
}
