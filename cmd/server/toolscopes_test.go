package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// TestNodeToolScopes runs the node against a real OpenID provider with
// --auth-tool-scopes: a token without add's extra scope does not list add,
// and calling it gets 403 insufficient_scope naming every scope it needs
// (step-up); a token with it calls add.
func TestNodeToolScopes(t *testing.T) {
	const resource = "https://mcp.example.test/mcp"
	p := authtest.Start(t, authtest.Options{
		DefaultResource: resource,
		Clients:         []*authtest.Client{{ID: "svc", Secret: "svc-secret", Scopes: []string{"mcp:tools", "mcp:math"}}},
	})
	stdout, _ := startNode(t, "--auth-issuer", p.Issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools",
		"--auth-tool-scopes", "add=mcp:math")
	url := nodeURL(t, stdout)
	call := func(scope, method string, params map[string]any) *mcptest.Response {
		t.Helper()
		tok, err := p.ClientCredentials(t.Context(), "svc", "svc-secret", resource, scope)
		if err != nil {
			t.Fatal(err)
		}
		c := mcptest.New(t, url)
		c.Header.Set("Authorization", "Bearer "+tok)
		params["_meta"] = mcptest.ModernMeta()
		msg, err := jsonrpc.Request(c.NextID(), method, params)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := jsonrpc.Encode(msg)
		name, _ := params["name"].(string)
		resp, err := c.PostRaw(context.Background(), url, b, mcptest.ModernHeaders(method, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var list struct {
		Tools []mcp.Tool `json:"tools"`
	}
	call("mcp:tools", "tools/list", map[string]any{}).Result(t, &list)
	if slices.ContainsFunc(list.Tools, func(tl mcp.Tool) bool { return tl.Name == "add" }) || len(list.Tools) == 0 {
		t.Errorf("without mcp:math the tools are %v, want them without add", list.Tools)
	}
	add := map[string]any{"name": "add", "arguments": map[string]any{"a": 1, "b": 2}}
	resp := call("mcp:tools", "tools/call", add)
	want := `Bearer error="insufficient_scope", scope="mcp:tools mcp:math", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`
	if f := resp.Final(); resp.Status != http.StatusForbidden || f == nil || f.Error == nil || f.Error.Code != mcp.CodeInsufficientScope ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("add without mcp:math: %d %q %s", resp.Status, resp.Header.Get("WWW-Authenticate"), resp.Body)
	}
	call("mcp:tools mcp:math", "tools/call", add).Result(t, nil)
}

func TestToolScopesValidated(t *testing.T) {
	on := []string{"--auth-issuer", "https://as.example", "--auth-resource", "https://mcp.example/mcp"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth-tool-scopes", "echo=a"}, "needs --auth-issuer"},
		{append(on, "--auth-tool-scopes", "echo"), "not tool=scopes"},
		{append(on, "--auth-tool-scopes", "echo="), "no scopes"},
		{append(on, "--auth-tool-scopes", "echo=a;echo=b"), "twice"},
		{append(on, "--auth-tool-scopes", `echo=a"b`), "not a scope token"},
	} {
		_, err := loadConfig(tt.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--auth-tool-scopes") {
			t.Errorf("%v: got %v, want an --auth-tool-scopes error with %q", tt.args, err, tt.want)
		}
	}
	var out, errOut bytes.Buffer
	args := append(on, "--addr", "127.0.0.1:0", "--auth-tool-scopes", "nosuch=a")
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `no tool "nosuch"`) || !strings.Contains(errOut.String(), "echo") {
		t.Errorf("an unknown tool: exit %d, %s", code, errOut.String())
	}
	got, err := parseToolScopes(" echo = a, b ;add=c;")
	if err != nil || !slices.Equal(got["echo"], []string{"a", "b"}) || !slices.Equal(got["add"], []string{"c"}) || len(got) != 2 {
		t.Errorf("parseToolScopes: %v, %v", got, err)
	}
}
