package gosdk

import (
	"context"
	"os/exec"
	"slices"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKOverStdio launches the node as a desktop client does
// ("args": ["--stdio"]) with the official SDK's command transport, many
// times over for every era: the SDK sends initialize, initialized and
// its first requests back to back, and each must be served in order
// (the session then hears list_changed). Closing the session ends the
// process.
func TestGoSDKOverStdio(t *testing.T) {
	bin := clustertest.Binary(t)
	const runs = 10
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			for range runs {
				stdioSession(t, bin, e)
				if t.Failed() {
					return
				}
			}
		})
	}
}

func stdioSession(t *testing.T, bin string, e era) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if e.pin != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: e.pin}
	}
	k := &conn{t: t, era: e, rec: &recorder{}, wire: newWire()}
	cs, err := newClient(k.rec).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "--stdio")}, opts)
	if err != nil {
		t.Fatalf("Connect over stdio (%s): %v", e.name, err)
	}
	k.cs = cs
	if got := cs.InitializeResult().ProtocolVersion; got != e.want {
		t.Fatalf("negotiated %q over stdio, want %q", got, e.want)
	}
	names := k.toolNames()
	if !slices.Contains(names, "echo") || slices.Contains(names, "ping_client") {
		t.Errorf("tools/list over stdio: %v (want the demo pack, without the HTTP-only ping_client)", names)
	}
	checkEcho(k)
	prompt := "over stdio"
	if got := text(k.call("sample", map[string]any{"prompt": prompt}, nil)); got != "re:"+prompt {
		t.Errorf("sample over stdio: got %q", got)
	}
	if !e.modern {
		// Each process has its own demo state: the extra tool is added.
		before := k.rec.toolsChangedCount()
		if got := text(k.call("toggle_extra_tool", nil, nil)); got != "added" {
			t.Errorf("toggle_extra_tool: got %q, want added", got)
		}
		k.waitFor("notifications/tools/list_changed over stdio", func() bool { return k.rec.toolsChangedCount() > before })
	}
	if err := cs.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
