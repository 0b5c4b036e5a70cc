package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// nodeURL reads the MCP URL from the node's "listening on" line.
func nodeURL(t *testing.T, stdout *syncBuffer) string {
	t.Helper()
	m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no URL in %q", stdout)
	}
	return m[1]
}

func post(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestNodeWithAuthorization runs the reference node against a real
// OpenID provider: it publishes its metadata, refuses requests without a
// token (401) or without the scope (403), and serves one with a token.
func TestNodeWithAuthorization(t *testing.T) {
	const resource = "https://mcp.example.test/mcp"
	p := authtest.Start(t, authtest.Options{
		DefaultResource: resource,
		Clients:         []*authtest.Client{{ID: "svc", Secret: "svc-secret", Scopes: []string{"mcp:tools", "other"}}},
	})
	stdout, logs := startNode(t, "--auth-issuer", p.Issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools")
	if !strings.Contains(logs.String(), "authorization on") {
		t.Errorf("no start-up line about authorization:\n%s", logs)
	}
	url := nodeURL(t, stdout)
	base := strings.TrimSuffix(url, "/mcp")

	resp := post(t, url, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: got %d, want 401", resp.StatusCode)
	}
	want := `Bearer scope="mcp:tools", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`
	if got := resp.Header.Get("WWW-Authenticate"); got != want {
		t.Errorf("got WWW-Authenticate %q, want %q", got, want)
	}

	mresp, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(mresp.Body).Decode(&meta)
	mresp.Body.Close()
	if err != nil || meta.Resource != resource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != p.Issuer {
		t.Fatalf("metadata: got %+v, %v", meta, err)
	}

	narrow, err := p.ClientCredentials(t.Context(), "svc", "svc-secret", resource, "other")
	if err != nil {
		t.Fatal(err)
	}
	if resp := post(t, url, narrow); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("token without the scope: got %d, want 403", resp.StatusCode)
	}
	good, err := p.ClientCredentials(t.Context(), "svc", "svc-secret", resource, "mcp:tools")
	if err != nil {
		t.Fatal(err)
	}
	if resp := post(t, url, good); resp.StatusCode != http.StatusOK {
		t.Fatalf("valid token: got %d, want 200", resp.StatusCode)
	}
}

func TestNodeWithoutAuthorizationSaysSo(t *testing.T) {
	stdout, logs := startNode(t)
	if !strings.Contains(logs.String(), "authorization off") {
		t.Errorf("no log line saying authorization is off:\n%s", logs)
	}
	if resp := post(t, nodeURL(t, stdout), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("open node: got %d, want 200", resp.StatusCode)
	}
}

func TestAuthSettingsValidated(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--auth-resource", "https://mcp.example/mcp"}, "without an issuer"},
		{[]string{"--auth-issuer", "https://as.example"}, "resource URI"},
		{[]string{"--auth-issuer", "https://as.example", "--auth-resource", "https://mcp.example/mcp", "--auth-client-id", "rs"}, "client secret"},
		{[]string{"--stdio", "--auth-issuer", "https://as.example", "--auth-resource", "https://mcp.example/mcp"}, "HTTP only"},
	}
	for _, tt := range tests {
		_, err := loadConfig(tt.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--auth-issuer") {
			t.Errorf("%v: got %v, want an --auth-issuer error with %q", tt.args, err, tt.want)
		}
	}
	c, err := loadConfig(nil, func(k string) string {
		return map[string]string{"MCP_AUTH_ISSUER": "https://as.example", "MCP_AUTH_RESOURCE": "https://mcp.example/mcp", "MCP_AUTH_CLIENT_ID": "rs", "MCP_AUTH_CLIENT_SECRET": "x"}[k]
	}, io.Discard)
	if err != nil || !c.Auth.Enabled() || c.Auth.ClientSecret != "x" {
		t.Fatalf("from the environment: got %+v, %v", c.Auth, err)
	}
}

// The README's "Authentication" example works when pasted whole: the
// provider and the node run from built binaries on free ports.
func TestReadmeAuthenticationExample(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands")
	}
	blocks := readmeBlocks(t, "Authentication")
	if len(blocks) != 1 {
		t.Fatalf("want one block, found %d", len(blocks))
	}
	dir := t.TempDir()
	server, provider := filepath.Join(dir, "server"), filepath.Join(dir, "oidcprovider")
	for bin, pkg := range map[string]string{server: ".", provider: "../../internal/tools/oidcprovider"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	script := blocks[0]
	for _, r := range [][2]string{
		{"go run ./internal/tools/oidcprovider", "exec " + provider},
		{"go run ./cmd/server", "exec " + server + " --metrics-addr 127.0.0.1:0 --addr 127.0.0.1:8080"},
		{"127.0.0.1:8080", "127.0.0.1:" + freePort(t)},
		{"127.0.0.1:9400", "127.0.0.1:" + freePort(t)},
	} {
		if !strings.Contains(script, r[0]) {
			t.Fatalf("the block no longer has %q:\n%s", r[0], script)
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	out := runScript(t, script)
	for _, want := range []string{
		`www-authenticate: bearer scope="mcp:tools", resource_metadata=`,
		`"authorization_servers":["http://127.0.0.1:`,
		`"text":"hello"`, // the tool call with the token
		"http/1.1 403",
		`www-authenticate: bearer error="insufficient_scope", scope="mcp:tools"`,
	} {
		if !strings.Contains(strings.ToLower(string(out)), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
