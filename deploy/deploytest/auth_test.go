package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestChartAuthConfiguresTheNode renders the chart with introspection and
// a client secret given as a value, runs the node binary with exactly the
// environment the pod would get (the ConfigMap, the Secret through its
// secretKeyRef; only the listen addresses and Redis are local), and checks
// that the node starts (its tool scopes accepted) with authorization on
// in introspection mode and serves the Protected Resource Metadata the
// values describe.
func TestChartAuthConfiguresTheNode(t *testing.T) {
	docs, err := renderChart(t, valueSet{file: "auth-introspection-value.yaml"}.read(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRelease(docs)
	if err != nil {
		t.Fatal(err)
	}
	c := &r.deployments[0].Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if cm := r.configMap(from.ConfigMapRef.Name); cm != nil {
			for k, v := range cm.Data {
				env[k] = v
			}
		}
	}
	for _, e := range c.Env {
		v, ext, found := r.envValue(c, e.Name)
		if ext != nil || !found {
			t.Fatalf("env %s does not resolve within the release (%+v)", e.Name, ext)
		}
		env[e.Name] = v
	}
	if env["MCP_AUTH_CLIENT_SECRET"] == "" {
		t.Fatal("the node would get no MCP_AUTH_CLIENT_SECRET")
	}
	// Local stand-ins for what the cluster provides.
	env["MCP_NODE_ID"] = "chart-node"
	env["MCP_ADDR"] = "127.0.0.1:0"
	env["MCP_METRICS_ADDR"] = "127.0.0.1:0"
	delete(env, "MCP_REDIS_URL") // in-memory backend

	bin := filepath.Join(t.TempDir(), "server")
	build := exec.Command("go", "build", "-o", bin, "./cmd/server")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/server: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_") {
			node.Env = append(node.Env, kv)
		}
	}
	for k, v := range env {
		node.Env = append(node.Env, k+"="+v)
	}
	var logs strings.Builder
	node.Stderr = &logs
	stdout, err := node.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on http://([0-9.:]+)/`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-ctx.Done():
		t.Fatalf("the node did not start with the chart's environment:\n%s", logs.String())
	}

	resp, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metadata: %d, %v", resp.StatusCode, err)
	}
	if prm.Resource != "https://mcp.example.com/mcp" || !slices.Equal(prm.AuthorizationServers, []string{"https://login.example.com"}) || !slices.Equal(prm.ScopesSupported, []string{"mcp:tools"}) {
		t.Errorf("metadata %+v does not describe the chart's auth values", prm)
	}
	resp, err = http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("a request without a token: %d %q, want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if !strings.Contains(logs.String(), "mode=introspection") {
		t.Errorf("the node does not log authorization on in introspection mode:\n%s", logs.String())
	}
}
