package gosdk

//lint:file-ignore SA1019 the test drives the SDK's sampling, deprecated in 2026-07-28 but still served

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The cluster's JSON-RPC code a call gets when its node died
// (mcp.CodeNodeLost of the product module, which this module does not
// link).
const exCodeNodeLost = -31003

// TestExamplesWithGoSDK runs the repository's examples as a user would
// deploy them: three examples/node processes on one redis-server behind
// examples/proxy (round robin), and the official Go SDK client through
// the proxy. It proves that a sampling answer lands on another node than
// the call waiting for it (handshake-era reply, and 2026-07-28 retry,
// which another node opens with the shared MCP_STATE_KEY), and that a
// kill -9 of the node running a call costs the client that call only:
// it ends with -31003 once its stream resumed on a live node, never with
// a transport error, and the same session goes on serving calls.
func TestExamplesWithGoSDK(t *testing.T) {
	nodeBin, proxyBin := buildExamples(t)
	redis := redistest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := []string{"MCP_REDIS_URL=" + redis.URL(), "MCP_STATE_KEY=" + hex.EncodeToString(key), "MCP_TRUSTED_PROXIES=127.0.0.1"}
	serving := regexp.MustCompile(`msg=serving mcp=http://(\S+)/mcp`)
	nodes := map[string]*exProc{} // by address
	var bases []string
	for i := range 3 {
		n := startExample(t, fmt.Sprintf("node%d", i+1), env, nodeBin, "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0")
		addr := n.await(t, serving)[1]
		nodes[addr] = n
		bases = append(bases, "http://"+addr)
	}
	proxy := startExample(t, "proxy", nil, proxyBin, append([]string{"-addr", "127.0.0.1:0"}, bases...)...)
	front := proxy.await(t, regexp.MustCompile(`listening on (\S+)`))[1] + "/mcp"

	progress := &exProgress{seen: map[string][]float64{}}
	legacy := exConnect(t, front, "2025-11-25", progress)
	modern := exConnect(t, front, "", progress)
	if got := modern.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Fatalf("the SDK negotiated %q by default, want 2026-07-28", got)
	}

	// Each ask is two POSTs, sent round robin: the call, then the answer
	// (a JSON-RPC response on 2025-11-25, the retry with inputResponses
	// on 2026-07-28).
	for _, cs := range []*mcp.ClientSession{legacy, modern} {
		from := len(proxy.routes())
		for i := range 3 {
			exAsk(t, cs, fmt.Sprintf("question %d", i))
		}
		var posts []string
		for _, r := range proxy.routes()[from:] {
			if r[0] == http.MethodPost {
				posts = append(posts, r[1])
			}
		}
		elsewhere := 0
		for i := 0; i+1 < len(posts); i += 2 {
			if posts[i] != posts[i+1] {
				elsewhere++
			}
		}
		if len(posts) != 6 || elsewhere == 0 {
			t.Fatalf("%s: the proxy sent the asks' POSTs to %v; want 3 pairs, at least one answer on another node than its call", cs.InitializeResult().ProtocolVersion, posts)
		}
	}

	// kill -9 the node running a call, mid-stream.
	from := len(proxy.routes())
	called := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "countdown", Arguments: map[string]any{"from": 100, "delayMs": 100}}
		p.SetProgressToken("killed")
		_, err := legacy.CallTool(t.Context(), p)
		called <- err
	}()
	exWait(t, "progress before the kill", func() bool { return len(progress.of("killed")) >= 3 })
	var victim string
	for _, r := range proxy.routes()[from:] {
		if r[0] == http.MethodPost {
			victim = r[1]
		}
	}
	if nodes[victim] == nil {
		t.Fatalf("the call went to %q, not a node", victim)
	}
	killed := time.Now()
	nodes[victim].kill()
	select {
	case err := <-called:
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != exCodeNodeLost {
			t.Fatalf("the call cut by the kill ended with %v, want the JSON-RPC error %d", err, exCodeNodeLost)
		}
		t.Logf("the cut call ended with %d %q %v after the kill", werr.Code, werr.Message, time.Since(killed).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the call cut by the kill did not end within 20s")
	}
	seen := map[float64]bool{}
	for _, v := range progress.of("killed") {
		if seen[v] {
			t.Fatalf("progress %v delivered twice across the resume: %v", v, progress.of("killed"))
		}
		seen[v] = true
	}

	// The same sessions go on: the proxy sends each request a dead node
	// refuses to a live one.
	from = len(proxy.routes())
	for i := range 3 {
		for _, cs := range []*mcp.ClientSession{legacy, modern} {
			exAsk(t, cs, fmt.Sprintf("after the kill %d", i))
		}
	}
	if !strings.Contains(proxy.out.String()[proxy.offset(from):], "refused the connection") {
		t.Fatalf("no request after the kill met the dead node:\n%s", proxy.out.String())
	}
}

// exAsk calls the example's ask tool; the client's model answers "re: "
// and the question.
func exAsk(t *testing.T, cs *mcp.ClientSession, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": q}})
	if err != nil {
		t.Fatalf("ask on %s: %v", cs.InitializeResult().ProtocolVersion, err)
	}
	if got := text(res); got != "re: "+q || res.IsError {
		t.Fatalf("ask on %s: %q (isError %v), want %q", cs.InitializeResult().ProtocolVersion, got, res.IsError, "re: "+q)
	}
}

// exConnect opens a session through the proxy: pinned to version, or
// the SDK's default (2026-07-28, discovered) when version is empty.
func exConnect(t *testing.T, endpoint, version string, progress *exProgress) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "examples-test", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var q string
			if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
				q = tc.Text
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "re: " + q}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress.add(fmt.Sprint(req.Params.ProgressToken), req.Params.Progress)
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}}, opts)
	if err != nil {
		t.Fatalf("Connect through the proxy (%q): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// exProgress keeps the progress values the client got, by token.
type exProgress struct {
	mu   sync.Mutex
	seen map[string][]float64
}

func (p *exProgress) add(token string, v float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[token] = append(p.seen[token], v)
}

func (p *exProgress) of(token string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]float64(nil), p.seen[token]...)
}

func exWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// buildExamples builds examples/node and examples/proxy of the product
// module.
func buildExamples(t *testing.T) (node, proxy string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./examples/node", "./examples/proxy")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/node ./examples/proxy: %v\n%s", err, out)
	}
	return filepath.Join(dir, "node"), filepath.Join(dir, "proxy")
}

// exProc is an example program running; it is killed when the test ends.
type exProc struct {
	name string
	cmd  *exec.Cmd
	out  exBuffer
	done chan struct{}
}

func startExample(t *testing.T, name string, env []string, bin string, args ...string) *exProc {
	t.Helper()
	p := &exProc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

// kill ends the process with SIGKILL and waits for it.
func (p *exProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// await waits until the output matches re and returns the submatches.
func (p *exProc) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	exWait(t, p.name+" printing "+re.String(), func() bool {
		m = re.FindStringSubmatch(p.out.String())
		return m != nil
	})
	return m
}

var exRoute = regexp.MustCompile(`proxy: (GET|POST|DELETE) /mcp -> (\S+)\n`)

// routes are the proxy's requests so far, as [method, node address].
func (p *exProc) routes() [][2]string {
	var out [][2]string
	for _, m := range exRoute.FindAllStringSubmatch(p.out.String(), -1) {
		out = append(out, [2]string{m[1], m[2]})
	}
	return out
}

// offset is where the proxy's output stands after its first n routes.
func (p *exProc) offset(n int) int {
	if n == 0 {
		return 0
	}
	idx := exRoute.FindAllStringIndex(p.out.String(), n)
	return idx[len(idx)-1][1]
}

// exBuffer is a bytes.Buffer safe for concurrent use.
type exBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *exBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *exBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
