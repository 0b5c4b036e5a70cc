package examples_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

const stateKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// TestNodeOverStdio runs examples/node -stdio as a desktop client would:
// the registrations of the HTTP mode answer over stdin and stdout, and
// end of input ends the process.
func TestNodeOverStdio(t *testing.T) {
	p := exec.Command(nodeBin, "-stdio")
	in, err := p.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
	hung := time.AfterFunc(20*time.Second, func() { _ = p.Process.Kill() }) // ends the reads below
	defer hung.Stop()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"c"}`
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"from":3},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"example://readme",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"explain","arguments":{"topic":"Raft"},` + meta + `}}`,
	} {
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	progress := 0
	sc := bufio.NewScanner(out)
	for len(got) < 3 && sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q: %v", sc.Text(), err)
		}
		if m.Method == "notifications/progress" {
			progress++
		} else if m.ID != nil {
			got[string(m.ID)] = sc.Text()
		}
	}
	for id, want := range map[string]string{"1": `"text":"liftoff"`, "2": "# Example node", "3": "Explain Raft in one paragraph."} {
		if !strings.Contains(got[id], want) {
			t.Errorf("answer %s over stdio: %s, want it to contain %q", id, got[id], want)
		}
	}
	if progress != 3 {
		t.Errorf("got %d progress notifications over stdio, want 3", progress)
	}
	_ = in.Close()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node -stdio at end of input: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node -stdio still runs after end of input")
	}
}

// TestNodesOnRedis runs two examples/node processes on one redis-server
// behind examples/proxy, with a third backend that refuses connections:
// a node without MCP_STATE_KEY refuses to start on Redis; the probes and
// metrics answer; a session's calls (progress, sampling whose reply
// goes through the proxy to any node), resource and prompt work through
// the proxy; and on SIGTERM a node drains: its streams end with a retry
// hint, the call it ran completes and is resumed through the proxy, and
// the process exits 0.
func TestNodesOnRedis(t *testing.T) {
	redis := redistest.Start(t)
	url := "MCP_REDIS_URL=" + redis.URL()

	keyless := start(t, "keyless node", []string{url}, nodeBin, "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0")
	if err := keyless.exited(t, 20*time.Second); err == nil || !strings.Contains(keyless.out.String(), "StateKeys") {
		t.Fatalf("a node on Redis without MCP_STATE_KEY: exit %v, output %q; want a refusal naming StateKeys", err, keyless.out.String())
	}

	env := []string{url, "MCP_STATE_KEY=" + stateKey, "MCP_TRUSTED_PROXIES=127.0.0.1"}
	n1, n2 := startNode(t, "node1", env...), startNode(t, "node2", env...)
	proxy, front := startProxy(t, n1.base, n2.base, "http://"+refusingAddr(t))
	for _, n := range []*node{n1, n2} {
		if got := status(n.base + "/healthz"); got != http.StatusOK {
			t.Fatalf("%s /healthz: %d", n.name, got)
		}
		if !strings.Contains(get(t, n.metrics), "mcp_draining") {
			t.Fatalf("%s /metrics has no mcp_draining", n.name)
		}
	}

	cl := mcptest.New(t, front+"/mcp")
	cl.Initialize("2025-11-25", map[string]any{"sampling": map[string]any{}})
	if got := text(t, cl.Call("tools/call", map[string]any{"name": "countdown", "arguments": map[string]any{"from": 3},
		"_meta": map[string]any{"progressToken": "p"}}, nil)); got != "liftoff" {
		t.Fatalf("countdown: %q", got)
	}
	for i := range 3 { // each reply lands on whichever node the proxy picks
		q := fmt.Sprintf("question %d", i)
		if got := text(t, cl.Call("tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"question": q}}, answerSampling)); got != "re: "+q {
			t.Fatalf("ask: %q, want %q", got, "re: "+q)
		}
	}
	if r := cl.Call("resources/read", map[string]any{"uri": "example://readme"}, nil); !strings.Contains(string(r.Final().Result), "# Example node") {
		t.Fatalf("resources/read: %s", r.Body)
	}
	if r := cl.Call("prompts/get", map[string]any{"name": "explain", "arguments": map[string]any{"topic": "Raft"}}, nil); !strings.Contains(string(r.Final().Result), "Explain Raft") {
		t.Fatalf("prompts/get: %s", r.Body)
	}
	if !strings.Contains(proxy.out.String(), "refused the connection") {
		t.Fatalf("no request met the refusing backend:\n%s", proxy.out.String())
	}

	// Drain node1 while it runs a call and holds the session's GET stream.
	getStream := mcptest.OpenGet(t, cl, n1.url, "")
	id, call := mcptest.OpenCall(t, cl, n1.url, "tools/call", map[string]any{"name": "countdown",
		"arguments": map[string]any{"from": 20, "delayMs": 50}, "_meta": map[string]any{"progressToken": "d"}})
	if !call.WaitFor(10*time.Second, mcptest.Has("notifications/progress", 2)) {
		t.Fatal("no progress before the drain")
	}
	n1.signal(syscall.SIGTERM)
	for what, st := range map[string]*mcptest.Stream{"the call's stream": call, "the GET stream": getStream} {
		if !st.WaitUntil(10*time.Second, func() bool { return st.Err() != nil }) || len(st.Retries()) == 0 {
			t.Fatalf("%s on the draining node: ended %v, retry hints %d; want it ended after a retry hint", what, st.Err(), len(st.Retries()))
		}
	}
	all := call.Messages()
	if mcptest.Final(all) == nil {
		events := call.Events()
		resumed := mcptest.OpenGet(t, cl, front+"/mcp", events[len(events)-1].ID) // through the proxy: node1 refuses now
		if !resumed.WaitFor(20*time.Second, func(ms []*jsonrpc.Message) bool { return mcptest.Final(ms) != nil }) {
			t.Fatalf("the resumed call got no response: %v", resumed.Err())
		}
		all = append(all, resumed.Messages()...)
		t.Logf("the drained call's stream closed after %d events; resumed through the proxy", len(events))
	}
	if f := mcptest.Final(all); f == nil || f.ID != id || !strings.Contains(string(f.Result), "liftoff") {
		t.Fatalf("the call drained off node1 did not complete: %+v", f)
	}
	if p := mcptest.ProgressValues(all); len(p) != 20 || p[19] != 20 {
		t.Fatalf("progress of the drained call: %v, want 1..20 once each", p)
	}
	if err := n1.exited(t, 25*time.Second); err != nil {
		t.Fatalf("node1 after SIGTERM: %v", err)
	}
	if got := text(t, cl.Call("tools/call", map[string]any{"name": "countdown", "arguments": map[string]any{"from": 1}}, nil)); got != "liftoff" {
		t.Fatalf("countdown after the drain: %q", got)
	}
}

// answerSampling answers sampling/createMessage with "re: " and the
// question.
func answerSampling(m *jsonrpc.Message) *jsonrpc.Message {
	if m.Method != "sampling/createMessage" {
		return nil
	}
	var p struct {
		Messages []struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(m.Params, &p)
	q := ""
	if len(p.Messages) > 0 {
		q = p.Messages[0].Content.Text
	}
	r, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "test",
		"content": map[string]any{"type": "text", "text": "re: " + q}})
	return r
}

// text returns the text of a tools/call result, failing on an error.
func text(t *testing.T, r *mcptest.Response) string {
	t.Helper()
	f := r.Final()
	if f == nil || f.Error != nil {
		t.Fatalf("tools/call: status %d, %s", r.Status, r.Body)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(f.Result, &res); err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call result: %s", f.Result)
	}
	return res.Content[0].Text
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestExamplesUseThePublicAPI checks that the examples import nothing of
// the module but mcp and mcp/redisbackend, so that they build as they
// are outside it.
func TestExamplesUseThePublicAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./node", "./proxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	public := map[string]bool{"github.com/mcpcluster/mcpcluster/mcp": true, "github.com/mcpcluster/mcpcluster/mcp/redisbackend": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") && !public[imp] {
				t.Errorf("%s imports %s: the examples use the standard library, mcp and mcp/redisbackend only", pkg, imp)
			}
		}
	}
}
