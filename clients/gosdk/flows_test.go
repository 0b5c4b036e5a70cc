package gosdk

//lint:file-ignore SA1019 these tests drive the SDK's sampling, logging and roots features, deprecated in 2026-07-28 but still served

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoTools are the tools of the demo pack, with ping_client, which the
// reference node adds when it serves HTTP.
var demoTools = []string{"add", "bump_counter", "echo", "elicit", "ping_client", "progress", "roots", "sample", "toggle_extra_tool"}

// flow is one check run on a connected session, in order.
type flow struct {
	name   string
	legacy bool // handshake-era revisions only
	run    func(k *conn)
}

var flows = []flow{
	{name: "handshake", run: checkHandshake},
	{name: "tools/list", run: checkToolList},
	{name: "echo", run: checkEcho},
	{name: "add", run: checkAdd},
	{name: "progress+logs", run: checkProgressAndLogs},
	{name: "sample", run: checkSample},
	{name: "elicit", run: checkElicit},
	{name: "roots", run: checkRoots},
	{name: "ping_client", run: checkPingClient},
	{name: "bump_counter", run: checkCounter},
	{name: "toggle_extra_tool", run: checkToggle},
	{name: "prompts", run: checkPrompts},
	{name: "resources", run: checkResources},
	{name: "resume", legacy: true, run: checkResume},
	{name: "close", run: checkClose},
}

// TestGoSDK runs every flow with the official Go SDK client, for every
// era, against a single node and a three-node cluster. The eras of a
// setup share its deployment and run one after the other (the demo pack
// has server-wide state: the counter and the extra tool).
func TestGoSDK(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, s.opts)
			for _, e := range eras {
				t.Run(e.name, func(t *testing.T) {
					k := connect(t, c, s, e)
					for _, f := range flows {
						if f.legacy && e.modern {
							continue
						}
						ok := t.Run(f.name, func(t *testing.T) {
							k.t = t
							f.run(k)
						})
						k.t = t
						if !ok && f.name == "handshake" {
							t.FailNow()
						}
					}
				})
			}
		})
	}
}

// checkHandshake: default discovery probes server/discover and stays on
// 2026-07-28 without initialize or session; a pinned revision initializes
// a session on that revision and opens the standalone GET stream.
func checkHandshake(k *conn) {
	t := k.t
	res := k.cs.InitializeResult()
	if res == nil {
		t.Fatal("no initialize/discover result")
	}
	if res.ProtocolVersion != k.era.want {
		t.Fatalf("negotiated %q, want %q", res.ProtocolVersion, k.era.want)
	}
	first := k.wire.exchanges()[0]
	if k.era.modern {
		if first.RPC.Method != "server/discover" || first.Version != "2026-07-28" || first.Status != http.StatusOK {
			t.Errorf("first request: got %s (Mcp-Protocol-Version %q), want POST server/discover with 2026-07-28 -> 200", first, first.Version)
		}
		if n := len(k.posts(func(r rpcSummary) bool { return r.Method == "initialize" })); n != 0 {
			t.Errorf("got %d initialize requests, want none after a successful discover", n)
		}
		if id := k.cs.ID(); id != "" {
			t.Errorf("stateless session has id %q, want none", id)
		}
		return
	}
	if first.RPC.Method != "initialize" || !strings.Contains(string(first.RPC.Body), `"protocolVersion":"`+k.era.pin+`"`) {
		t.Errorf("first request: got %s %s, want initialize with protocolVersion %s", first, first.RPC.Body, k.era.pin)
	}
	if k.cs.ID() == "" {
		t.Fatal("no Mcp-Session-Id after initialize")
	}
	k.waitFor("the standalone GET stream", func() bool {
		for _, ex := range k.wire.exchanges() {
			if ex.Method == http.MethodGet && ex.LastEventID == "" && ex.Status == http.StatusOK {
				return true
			}
		}
		return false
	})
	// Every request after initialize carries the session and the revision.
	for _, ex := range k.wire.exchanges()[1:] {
		if ex.SessionID != k.cs.ID() || ex.Version != k.era.want {
			t.Errorf("%s: Mcp-Session-Id %q, Mcp-Protocol-Version %q; want %q, %q", ex, ex.SessionID, ex.Version, k.cs.ID(), k.era.want)
		}
	}
}

func checkToolList(k *conn) {
	names := k.toolNames()
	for _, want := range demoTools {
		if !slices.Contains(names, want) {
			k.t.Errorf("tools/list: %q missing from %v", want, names)
		}
	}
	res, err := k.cs.ListTools(k.ctx(), nil)
	if err != nil {
		k.t.Fatalf("ListTools: %v", err)
	}
	for _, tool := range res.Tools {
		if tool.InputSchema == nil {
			k.t.Errorf("tool %s has no inputSchema", tool.Name)
		}
		if tool.Name == "add" && structured(k.era) && tool.OutputSchema == nil {
			k.t.Errorf("tool add has no outputSchema")
		}
	}
}

func checkEcho(k *conn) {
	if got := text(k.call("echo", map[string]any{"text": "hello from go-sdk"}, nil)); got != "hello from go-sdk" {
		k.t.Errorf("echo: got %q, want %q", got, "hello from go-sdk")
	}
}

// structured reports whether era has structured tool output (since
// 2025-06-18).
func structured(e era) bool { return e.want >= "2025-06-18" }

func checkAdd(k *conn) {
	res := k.call("add", map[string]any{"a": 2, "b": 3.5}, nil)
	if got := text(res); !strings.Contains(got, "5.5") {
		k.t.Errorf("add: text content %q does not carry the sum", got)
	}
	if !structured(k.era) {
		if res.StructuredContent != nil {
			k.t.Errorf("add: structuredContent %v on %s, which predates it", res.StructuredContent, k.era.want)
		}
		return
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Sum *float64 `json:"sum"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Sum == nil || *out.Sum != 5.5 {
		k.t.Errorf("add: structuredContent %s, want {\"sum\":5.5}", b)
	}
}

// progressCall calls progress with a progress token (and, on 2026-07-28,
// the per-request log level) and checks that every step and the closing
// log message arrive exactly once.
func (k *conn) progressCall(token string, steps, delayMs int) {
	k.t.Helper()
	var meta mcp.Meta
	if k.era.modern {
		meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
	}
	p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": steps, "delayMs": delayMs}, Meta: meta}
	p.SetProgressToken(token)
	res, err := k.cs.CallTool(k.ctx(), p)
	if err != nil {
		k.dumpWire()
		k.t.Fatalf("CallTool progress: %v", err)
	}
	if want := fmt.Sprintf("done after %d steps", steps); text(res) != want {
		k.t.Errorf("progress: got %q, want %q", text(res), want)
	}
	k.waitFor(fmt.Sprintf("%d progress notifications for %s", steps, token), func() bool { return len(k.rec.progressFor(token)) >= steps })
	logText := fmt.Sprintf("completed %d steps", steps)
	k.waitFor("log message "+strconv.Quote(logText), func() bool { return len(k.rec.logsWith(logText)) >= 1 })
	got := k.rec.progressFor(token)
	seen := map[float64]int{}
	for _, n := range got {
		seen[n.Progress]++
		if n.Total != float64(steps) {
			k.t.Errorf("progress %v: total %v, want %d", n.Progress, n.Total, steps)
		}
	}
	for i := 1; i <= steps; i++ {
		if seen[float64(i)] != 1 {
			k.t.Errorf("progress %d received %d times, want once", i, seen[float64(i)])
		}
	}
	if len(got) != steps {
		k.t.Errorf("got %d progress notifications, want %d", len(got), steps)
	}
	logs := k.rec.logsWith(logText)
	if len(logs) != 1 || logs[0].Level != "info" || logs[0].Logger != "demo" {
		k.t.Errorf("log messages %q: got %d (%+v), want one at info from logger demo", logText, len(logs), logs)
	}
}

func checkProgressAndLogs(k *conn) {
	if !k.era.modern {
		if err := k.cs.SetLoggingLevel(k.ctx(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			k.t.Fatalf("SetLoggingLevel: %v", err)
		}
	}
	k.progressCall("p-"+k.era.name, 5, 10)
}

// checkInputPath asserts how a server→client request travelled: on
// 2026-07-28 as an MRTR retry of tools/call carrying inputResponses and
// requestState, never as a JSON-RPC response POST; on a session as a
// JSON-RPC response the client POSTed.
func (k *conn) checkInputPath(tool string) {
	k.t.Helper()
	retries := k.posts(func(r rpcSummary) bool { return r.Tool == tool && r.InputResponses && r.RequestState })
	responses := k.posts(func(r rpcSummary) bool { return r.Response })
	if k.era.modern {
		if len(retries) == 0 {
			k.t.Errorf("%s: no tools/call retry with inputResponses and requestState (MRTR)", tool)
		}
		if len(responses) != 0 {
			k.t.Errorf("%s: the client POSTed %d JSON-RPC responses on 2026-07-28, want none", tool, len(responses))
		}
		return
	}
	if len(retries) != 0 {
		k.t.Errorf("%s: MRTR retry on a %s session, want a real server→client request", tool, k.era.want)
	}
	if len(responses) == 0 {
		k.t.Errorf("%s: the client POSTed no JSON-RPC response", tool)
	}
	k.waitFor("the answers to the server's requests", func() bool {
		for _, r := range k.posts(func(r rpcSummary) bool { return r.Response }) {
			if r.Status == 0 && r.Err == nil {
				return false
			}
		}
		return true
	})
	for _, r := range k.posts(func(r rpcSummary) bool { return r.Response }) {
		if r.Status != http.StatusAccepted {
			k.t.Errorf("%s: POST of the client's response got %d, want 202", tool, r.Status)
		}
	}
}

func checkSample(k *conn) {
	prompt := "What is 2+2? (" + k.era.name + ")"
	if got, want := text(k.call("sample", map[string]any{"prompt": prompt}, nil)), "re:"+prompt; got != want {
		k.t.Errorf("sample: got %q, want %q", got, want)
	}
	k.rec.mu.Lock()
	samples := slices.Clone(k.rec.samples)
	k.rec.mu.Unlock()
	if len(samples) != 1 {
		k.t.Fatalf("sampling handler ran %d times, want once", len(samples))
	}
	if samples[0].MaxTokens != 100 {
		k.t.Errorf("sampling maxTokens %d, want 100", samples[0].MaxTokens)
	}
	k.checkInputPath("sample")
}

// checkElicit answers a form elicitation. Elicitation arrived in
// 2025-06-18: on 2025-03-26 the server must not send it, even though the
// SDK declares the capability, and the tool reports an error instead.
func checkElicit(k *conn) {
	if k.era.want < "2025-06-18" {
		res, err := k.cs.CallTool(k.ctx(), &mcp.CallToolParams{Name: "elicit", Arguments: map[string]any{"message": "Who are you?"}})
		if err != nil {
			k.t.Fatalf("CallTool elicit: %v", err)
		}
		if !res.IsError || !strings.Contains(text(res), "elicitation") {
			k.t.Errorf("elicit on %s: got %q (isError %v), want an isError result about the elicitation capability", k.era.want, text(res), res.IsError)
		}
		k.rec.mu.Lock()
		n := len(k.rec.elicits)
		k.rec.mu.Unlock()
		if n != 0 {
			k.t.Errorf("the server sent %d elicitation requests on %s, which has no elicitation", n, k.era.want)
		}
		return
	}
	got := text(k.call("elicit", map[string]any{"message": "Who are you?"}, nil))
	want := fmt.Sprintf(`received {"email":%q,"name":%q}`, userEmail, userName)
	if got != want {
		k.t.Errorf("elicit: got %q, want %q", got, want)
	}
	k.rec.mu.Lock()
	elicits := slices.Clone(k.rec.elicits)
	k.rec.mu.Unlock()
	if len(elicits) != 1 {
		k.t.Fatalf("elicitation handler ran %d times, want once", len(elicits))
	}
	if elicits[0].Message != "Who are you?" {
		k.t.Errorf("elicitation message %q, want %q", elicits[0].Message, "Who are you?")
	}
	b, _ := json.Marshal(elicits[0].RequestedSchema)
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	_ = json.Unmarshal(b, &schema)
	if schema.Properties["name"] == nil || schema.Properties["email"] == nil || !slices.Contains(schema.Required, "name") || !slices.Contains(schema.Required, "email") {
		k.t.Errorf("elicitation schema %s, want required name and email", b)
	}
	k.checkInputPath("elicit")
}

func checkRoots(k *conn) {
	if got := text(k.call("roots", nil, nil)); got != rootURI {
		k.t.Errorf("roots: got %q, want %q", got, rootURI)
	}
	k.checkInputPath("roots")
}

// checkPingClient: on a session the server pings the client over its GET
// stream (from whichever node runs the call) and the SDK answers; a
// stateless request has no channel to the client, so the tool fails.
func checkPingClient(k *conn) {
	res, err := k.cs.CallTool(k.ctx(), &mcp.CallToolParams{Name: "ping_client"})
	if err != nil {
		k.t.Fatalf("CallTool ping_client: %v", err)
	}
	if k.era.modern {
		if !res.IsError || !strings.Contains(text(res), "session") {
			k.t.Errorf("ping_client on 2026-07-28: got %q (isError %v), want an isError result: no session", text(res), res.IsError)
		}
		return
	}
	if res.IsError || !strings.HasPrefix(text(res), "pong after ") {
		k.dumpWire()
		k.t.Errorf("ping_client: got %q (isError %v), want pong after <duration>", text(res), res.IsError)
	}
}

// checkCounter subscribes to demo://counter, bumps it and waits for
// notifications/resources/updated. On one node the value read back is
// the one bump_counter returned; a cluster's nodes count separately.
func checkCounter(k *conn) {
	const uri = "demo://counter"
	if err := k.cs.Subscribe(k.ctx(), &mcp.SubscribeParams{URI: uri}); err != nil {
		k.t.Fatalf("Subscribe %s: %v", uri, err)
	}
	before := k.rec.updatedCount(uri)
	bumped := text(k.call("bump_counter", nil, nil))
	n, err := strconv.Atoi(bumped)
	if err != nil || n < 1 {
		k.t.Errorf("bump_counter: got %q, want a positive count", bumped)
	}
	k.waitFor("notifications/resources/updated for "+uri, func() bool { return k.rec.updatedCount(uri) > before })
	res, err := k.cs.ReadResource(k.ctx(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		k.t.Fatalf("ReadResource %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		k.t.Fatalf("ReadResource %s: %d contents, want 1", uri, len(res.Contents))
	}
	v, err := strconv.Atoi(res.Contents[0].Text)
	switch {
	case err != nil:
		k.t.Errorf("counter reads %q, want a number", res.Contents[0].Text)
	case !k.s.cluster && v != n:
		k.t.Errorf("counter reads %d, want %d (what bump_counter returned)", v, n)
	}
	if err := k.cs.Unsubscribe(k.ctx(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		k.t.Errorf("Unsubscribe %s: %v", uri, err)
	}
}

// checkToggle adds and removes the run-time tool "extra" and waits for
// notifications/tools/list_changed each time. A cluster's nodes keep
// their own registries (each toggle changes the node that ran it), so
// there only the notification is checked.
func checkToggle(k *conn) {
	before := k.rec.toolsChangedCount()
	got := text(k.call("toggle_extra_tool", nil, nil))
	k.waitFor("notifications/tools/list_changed", func() bool { return k.rec.toolsChangedCount() > before })
	if k.s.cluster {
		if got != "added" && got != "removed" {
			k.t.Errorf("toggle_extra_tool: got %q, want added or removed", got)
		}
		return
	}
	if got != "added" {
		k.t.Fatalf("toggle_extra_tool: got %q, want added", got)
	}
	if names := k.toolNames(); !slices.Contains(names, "extra") {
		k.t.Errorf("tools/list after adding: %v lacks extra", names)
	}
	if got := text(k.call("extra", nil, nil)); got != "extra" {
		k.t.Errorf("extra: got %q, want %q", got, "extra")
	}
	before = k.rec.toolsChangedCount()
	if got := text(k.call("toggle_extra_tool", nil, nil)); got != "removed" {
		k.t.Fatalf("toggle_extra_tool: got %q, want removed", got)
	}
	k.waitFor("notifications/tools/list_changed", func() bool { return k.rec.toolsChangedCount() > before })
	if names := k.toolNames(); slices.Contains(names, "extra") {
		k.t.Errorf("tools/list after removing: %v still has extra", names)
	}
}

func checkPrompts(k *conn) {
	res, err := k.cs.ListPrompts(k.ctx(), nil)
	if err != nil {
		k.t.Fatalf("ListPrompts: %v", err)
	}
	if !slices.ContainsFunc(res.Prompts, func(p *mcp.Prompt) bool { return p.Name == "greet" }) {
		k.t.Errorf("prompts/list lacks greet")
	}
	gp, err := k.cs.GetPrompt(k.ctx(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Grace"}})
	if err != nil {
		k.t.Fatalf("GetPrompt greet: %v", err)
	}
	if len(gp.Messages) != 1 {
		k.t.Fatalf("GetPrompt greet: %d messages, want 1", len(gp.Messages))
	}
	if tc, ok := gp.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Write a warm greeting for Grace." {
		k.t.Errorf("GetPrompt greet: message %+v, want the greeting for Grace", gp.Messages[0].Content)
	}
	cr, err := k.cs.Complete(k.ctx(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "g"},
	})
	if err != nil {
		k.t.Fatalf("Complete: %v", err)
	}
	if !slices.Equal(cr.Completion.Values, []string{"Grace"}) {
		k.t.Errorf("completion of %q: got %v, want [Grace]", "g", cr.Completion.Values)
	}
}

func checkResources(k *conn) {
	res, err := k.cs.ListResources(k.ctx(), nil)
	if err != nil {
		k.t.Fatalf("ListResources: %v", err)
	}
	if !slices.ContainsFunc(res.Resources, func(r *mcp.Resource) bool { return r.URI == "demo://counter" }) {
		k.t.Errorf("resources/list lacks demo://counter")
	}
	tr, err := k.cs.ListResourceTemplates(k.ctx(), nil)
	if err != nil {
		k.t.Fatalf("ListResourceTemplates: %v", err)
	}
	if !slices.ContainsFunc(tr.ResourceTemplates, func(r *mcp.ResourceTemplate) bool { return r.URITemplate == "demo://greeting/{name}" }) {
		k.t.Errorf("resources/templates/list lacks demo://greeting/{name}")
	}
	rr, err := k.cs.ReadResource(k.ctx(), &mcp.ReadResourceParams{URI: "demo://greeting/Linus"})
	if err != nil {
		k.t.Fatalf("ReadResource demo://greeting/Linus: %v", err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].Text != "Hello, Linus!" {
		k.t.Errorf("ReadResource demo://greeting/Linus: got %+v, want Hello, Linus!", rr.Contents)
	}
}

// checkResume cuts the SSE response of a progress call after three
// notifications. The SDK must resume with GET + Last-Event-ID, and every
// step, the log message and the result must arrive exactly once.
func checkResume(k *conn) {
	const steps, cutAfter = 8, 3
	k.wire.armCut(func(r rpcSummary) bool { return r.Method == "tools/call" && r.Tool == "progress" }, cutAfter)
	k.progressCall("resume-"+k.era.name, steps, 50)
	cuts := k.wire.cutsMade()
	if len(cuts) != 1 {
		k.t.Fatalf("the wire cut %d responses, want 1", len(cuts))
	}
	if cuts[0].LastEventID == "" {
		k.t.Fatalf("no event id before the cut: the stream is not resumable")
	}
	var resumed []exchange
	for _, ex := range k.wire.exchanges() {
		if ex.Method == http.MethodGet && ex.LastEventID != "" {
			resumed = append(resumed, ex)
		}
	}
	if len(resumed) == 0 || resumed[0].LastEventID != cuts[0].LastEventID || resumed[0].Status != http.StatusOK {
		k.dumpWire()
		k.t.Errorf("resumption: got %v, want GET with Last-Event-ID %s -> 200", resumed, cuts[0].LastEventID)
	}
}

// checkClose closes the session: on a handshake-era revision the SDK
// sends DELETE, after which the session id gets 404 on every node; a
// stateless session sends nothing.
func checkClose(k *conn) {
	id := k.cs.ID()
	if err := k.cs.Close(); err != nil {
		k.t.Errorf("Close: %v", err)
	}
	var deletes []exchange
	for _, ex := range k.wire.exchanges() {
		if ex.Method == http.MethodDelete {
			deletes = append(deletes, ex)
		}
	}
	if k.era.modern {
		if len(deletes) != 0 {
			k.t.Errorf("stateless close sent %v, want no DELETE", deletes)
		}
		return
	}
	if len(deletes) != 1 || deletes[0].SessionID != id || deletes[0].Status/100 != 2 {
		k.t.Fatalf("close: got DELETEs %v, want one for session %s answered 2xx", deletes, id)
	}
	urls := []string{k.url}
	if k.s.cluster {
		urls = append(urls, k.c.NodeURLs()...)
	}
	for _, u := range urls {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			if st, body := rawRequest(k.t, method, u, id, k.era.want); st != http.StatusNotFound {
				k.t.Errorf("%s %s with the deleted session id: got %d %s, want 404", method, u, st, body)
			}
		}
	}
}

// rawRequest sends a ping POST (or a GET) on session id without the SDK
// and returns the status and the start of the body (read for at most a
// second: a GET that wrongly succeeds is a stream that stays open).
func rawRequest(t *testing.T, method, url, id, version string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	timer := time.AfterFunc(time.Second, cancel)
	defer timer.Stop()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, strings.TrimSpace(string(b))
}
