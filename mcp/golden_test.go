package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

var update = flag.Bool("update", false, "rewrite the expected server lines of testdata/golden/*.txtar")

// goldenReadTimeout bounds the wait for one server line. It only decides
// how long a broken test takes to fail.
const goldenReadTimeout = 5 * time.Second

// TestGolden runs the wire-level golden tests of the protocol core over
// stdio. Each testdata/golden/*.txtar file is one rule. Its comment
// describes the rule and may set options, one per line:
//
//	option page-size=2          ServerOptions.PageSize
//	option max-line-bytes=256   StdioOptions.MaxLineBytes
//	option request-timeout=1s   ServerOptions.RequestTimeout
//	option list-ttl=5s          ServerOptions.ListTTL
//	option instructions=text    ServerOptions.Instructions
//	option server-info=full     the server has a title, description, icons and website
//	option only-tools=a,b       every other tool is removed before the script runs
//
// Each section named "script" or "script <label>" is one conversation
// with a fresh server over a fresh connection, one line at a time:
//
//	> {json}   a line the client sends (verbatim, so it may be malformed)
//	< {json}   the next line the server must send, compared as JSON
//	<* {json}  a run of these is a group of lines the server must send
//	           next, in any order
//	# text     a comment; blank lines are ignored too
//
// Server lines are normalised before the comparison: the value of every
// "requestState" member (a sealed, time-dependent token) becomes the
// string "<requestState>". A client line may use that placeholder to send
// back the token the server last issued, byte for byte, or
// "<requestState:tampered>" to send it with one character changed.
//
// The server→client requests of a session use the ids "srv-1", "srv-2",
// ... in order, so a client line answers them by those ids.
//
// After the script the client closes its end; the server must then stop
// without writing anything more.
//
// go test ./mcp -run TestGolden -update rewrites every expected server line
// with what the server sent (normalised), keeping the script's shape: the
// number and kind of lines, the client lines and the comments.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runGolden(t, file)
		})
	}
}

// scriptLine is one line of a script.
type scriptLine struct {
	kind byte   // '>', '<', '*' (unordered), or 0 for a comment or blank line
	text string // the JSON (or raw text) for '>', '<' and '*'; the whole line otherwise
	num  int    // line number in the file, for messages
}

// goldenOptions are the server and transport settings of one file.
type goldenOptions struct {
	server    mcp.ServerOptions
	stdio     mcp.StdioOptions
	fullInfo  bool
	onlyTools []string
}

func parseGoldenOptions(t *testing.T, comment []byte) goldenOptions {
	t.Helper()
	o := goldenOptions{server: mcp.ServerOptions{RequestTimeout: goldenReadTimeout}}
	for _, line := range strings.Split(string(comment), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "option ")
		if !ok {
			continue
		}
		key, val, _ := strings.Cut(rest, "=")
		atoi := func() int {
			n, err := strconv.Atoi(val)
			if err != nil {
				t.Fatalf("option %s: %v", key, err)
			}
			return n
		}
		switch key {
		case "page-size":
			o.server.PageSize = atoi()
		case "max-line-bytes":
			o.stdio.MaxLineBytes = atoi()
		case "request-timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				t.Fatalf("option %s: %v", key, err)
			}
			o.server.RequestTimeout = d
		case "list-ttl":
			d, err := time.ParseDuration(val)
			if err != nil {
				t.Fatalf("option %s: %v", key, err)
			}
			o.server.ListTTL = d
		case "instructions":
			o.server.Instructions = val
		case "server-info":
			o.fullInfo = val == "full"
		case "only-tools":
			o.onlyTools = strings.Split(val, ",")
		default:
			t.Fatalf("unknown option %q", key)
		}
	}
	return o
}

func parseScript(t *testing.T, data []byte, firstLine int) []scriptLine {
	t.Helper()
	var lines []scriptLine
	for i, raw := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		l := scriptLine{text: raw, num: firstLine + i}
		switch {
		case strings.TrimSpace(raw) == "" || strings.HasPrefix(raw, "#"):
		case strings.HasPrefix(raw, "<* "):
			l.kind, l.text = '*', raw[3:]
		case strings.HasPrefix(raw, "< "):
			l.kind, l.text = '<', raw[2:]
		case strings.HasPrefix(raw, "> "):
			l.kind, l.text = '>', raw[2:]
		default:
			t.Fatalf("line %d: want '> ', '< ', '<* ', '#' or a blank line, got %q", l.num, raw)
		}
		lines = append(lines, l)
	}
	return lines
}

func runGolden(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse(data)
	opts := parseGoldenOptions(t, ar.Comment)
	n := 0
	for i := range ar.Files {
		f := &ar.Files[i]
		if f.Name != "script" && !strings.HasPrefix(f.Name, "script ") {
			continue
		}
		n++
		marker := []byte("-- " + f.Name + " --\n")
		firstLine := bytes.Count(data[:bytes.Index(data, marker)], []byte("\n")) + 2
		lines := parseScript(t, f.Data, firstLine)
		label := strings.TrimSpace(strings.TrimPrefix(f.Name, "script"))
		if label == "" {
			label = "script"
		}
		t.Run(label, func(t *testing.T) {
			p := startGoldenServer(t, opts)
			updated := p.run(lines)
			p.finish()
			if *update && !t.Failed() {
				f.Data = formatScript(updated)
			}
		})
	}
	if n == 0 {
		t.Fatalf("%s: no script section", file)
	}
	if *update && !t.Failed() {
		if out := txtar.Format(ar); !bytes.Equal(out, data) {
			if err := os.WriteFile(file, out, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated %s", file)
		}
	}
}

func formatScript(lines []scriptLine) []byte {
	var b strings.Builder
	for _, l := range lines {
		switch l.kind {
		case '>':
			b.WriteString("> " + l.text)
		case '<':
			b.WriteString("< " + l.text)
		case '*':
			b.WriteString("<* " + l.text)
		default:
			b.WriteString(l.text)
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// goldenPeer is the client side of one stdio connection.
type goldenPeer struct {
	t      *testing.T
	in     *io.PipeWriter // what the client writes
	lines  chan string    // what the server wrote, line by line
	served chan error     // ServeStdio's result
	tokens map[string]string
}

func startGoldenServer(t *testing.T, o goldenOptions) *goldenPeer {
	t.Helper()
	impl := mcp.Implementation{Name: "golden", Version: "1.0.0"}
	if o.fullInfo {
		impl.Title = "Golden Server"
		impl.Description = "Serves the golden tests."
		impl.WebsiteURL = "https://example.com/golden"
		impl.Icons = []mcp.Icon{{Src: "https://example.com/golden.png", MimeType: "image/png"}}
	}
	srv := mcp.NewServer(impl, &o.server)
	demo.Register(srv)
	registerGoldenTools(srv)
	if o.onlyTools != nil {
		var drop []string
		for _, name := range srv.ToolNames() {
			keep := false
			for _, k := range o.onlyTools {
				keep = keep || k == name
			}
			if !keep {
				drop = append(drop, name)
			}
		}
		srv.RemoveTools(drop...)
	}

	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	p := &goldenPeer{t: t, in: serverIn, lines: make(chan string, 1024), served: make(chan error, 1), tokens: map[string]string{}}
	go func() {
		err := srv.ServeStdio(context.Background(), clientOut, clientIn, &o.stdio)
		clientIn.Close()
		p.served <- err
	}()
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(serverOut)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { serverIn.Close(); serverOut.Close() })
	return p
}

// run plays the script and returns it with the expected server lines
// replaced by the normalised lines the server sent.
func (p *goldenPeer) run(lines []scriptLine) []scriptLine {
	t := p.t
	out := make([]scriptLine, len(lines))
	copy(out, lines)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch l.kind {
		case '>':
			text := p.substitute(l.text)
			if _, err := io.WriteString(p.in, text+"\n"); err != nil {
				t.Fatalf("line %d: write: %v", l.num, err)
			}
		case '<':
			got, ok := p.next(l.num)
			if !ok {
				return out
			}
			if !jsonEqual(l.text, got) {
				out[i].text = got
				p.mismatch(l, got)
			}
		case '*':
			j := i
			for j < len(lines) && (lines[j].kind == '*' || lines[j].kind == 0) {
				j++
			}
			p.unordered(lines[i:j], out[i:j])
			i = j - 1
		}
	}
	return out
}

// unordered matches a group of '*' lines (comments may sit among them)
// against as many server lines, in any order.
func (p *goldenPeer) unordered(want, out []scriptLine) {
	var slots []int
	for k, l := range want {
		if l.kind == '*' {
			slots = append(slots, k)
		}
	}
	var got []string
	for range slots {
		g, ok := p.next(want[slots[0]].num)
		if !ok {
			return
		}
		got = append(got, g)
	}
	used := make([]bool, len(got))
	var free []int
	for _, k := range slots {
		found := false
		for n, g := range got {
			if !used[n] && jsonEqual(want[k].text, g) {
				used[n], found = true, true
				break
			}
		}
		if !found {
			free = append(free, k)
		}
	}
	for n, g := range got {
		if used[n] {
			continue
		}
		k := free[0]
		free = free[1:]
		out[k].text = g
		p.mismatch(want[k], g)
	}
}

func (p *goldenPeer) mismatch(l scriptLine, got string) {
	if *update {
		return
	}
	p.t.Errorf("line %d: server sent\n\t%s\nwant\n\t%s", l.num, got, l.text)
}

// next returns the server's next line, normalised.
func (p *goldenPeer) next(num int) (string, bool) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Errorf("line %d: the server closed its output", num)
			return "", false
		}
		return p.normalise(line), true
	case <-time.After(goldenReadTimeout):
		p.t.Errorf("line %d: no line from the server within %v", num, goldenReadTimeout)
		return "", false
	}
}

// finish ends the input and checks that the server stops without writing
// anything more.
func (p *goldenPeer) finish() {
	t := p.t
	p.in.Close()
	select {
	case err := <-p.served:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(goldenReadTimeout):
		t.Fatalf("ServeStdio did not return after end of input")
	}
	for line := range p.lines {
		t.Errorf("unexpected line after the script: %s", line)
	}
}

// volatile matches members whose values change from run to run.
var volatile = regexp.MustCompile(`"(requestState)":"((?:[^"\\]|\\.)*)"`)

func (p *goldenPeer) normalise(line string) string {
	return volatile.ReplaceAllStringFunc(line, func(m string) string {
		sub := volatile.FindStringSubmatch(m)
		p.tokens[sub[1]] = sub[2]
		return fmt.Sprintf("%q:%q", sub[1], "<"+sub[1]+">")
	})
}

var placeholder = regexp.MustCompile(`"<(\w+)(:tampered)?>"`)

func (p *goldenPeer) substitute(line string) string {
	return placeholder.ReplaceAllStringFunc(line, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		v, ok := p.tokens[sub[1]]
		if !ok {
			p.t.Fatalf("%s: the server has not sent a %s yet", m, sub[1])
		}
		if sub[2] != "" {
			b := []byte(v)
			mid := len(b) / 2
			if b[mid] == 'A' {
				b[mid] = 'B'
			} else {
				b[mid] = 'A'
			}
			v = string(b)
		}
		return `"` + v + `"`
	})
}

// jsonEqual compares two lines as JSON values; numbers compare by their
// text, so 1 and 1.0 differ.
func jsonEqual(a, b string) bool {
	va, err1 := decodeJSON(a)
	vb, err2 := decodeJSON(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// Test-only tools, registered next to the demo pack.

// StyledOut is the structured output of styled.
type StyledOut struct {
	OK bool `json:"ok"`
}

func registerGoldenTools(s *mcp.Server) {
	// styled carries every field that some revision does not know.
	mcp.AddTool(s, mcp.Tool{
		Name: "styled", Title: "Styled", Description: "Has a title, icons, an output schema and _meta.",
		Icons: []mcp.Icon{{Src: "https://example.com/styled.png", MimeType: "image/png"}},
		Meta:  mcp.Meta{"com.example/kind": "test"},
	}, func(context.Context, *mcp.Request, struct{}) (StyledOut, error) { return StyledOut{OK: true}, nil })

	// link returns a resource_link block (2025-06-18+); the block and the
	// result carry _meta.
	s.AddToolRaw(mcp.Tool{Name: "link", Description: "Returns a resource link."},
		func(context.Context, *mcp.Request, json.RawMessage) (*mcp.CallToolResult, error) {
			c := mcp.ResourceLink(demo.CounterURI, "counter", "text/plain")
			c.Meta = mcp.Meta{"com.example/origin": "golden"}
			return &mcp.CallToolResult{Content: []mcp.Content{c}, Meta: mcp.Meta{"com.example/trace": "t-1"}}, nil
		})

	// wait reports progress once, then runs until it is cancelled.
	mcp.AddTool(s, mcp.Tool{Name: "wait", Description: "Reports progress 1, then waits until cancelled."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			if err := req.Progress(ctx, 1, 0, "waiting"); err != nil {
				return "", err
			}
			<-ctx.Done()
			return "", ctx.Err()
		})

	// log_levels logs one message at each of four levels.
	mcp.AddTool(s, mcp.Tool{Name: "log_levels", Description: "Logs at debug, info, warning and error."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			for _, l := range []mcp.LogLevel{mcp.LevelDebug, mcp.LevelInfo, mcp.LevelWarning, mcp.LevelError} {
				if err := req.Log(ctx, l, "golden", "a "+string(l)+" message"); err != nil {
					return "", err
				}
			}
			return "logged", nil
		})

	// url_elicit asks for a URL-mode elicitation (2025-11-25+).
	mcp.AddTool(s, mcp.Tool{Name: "url_elicit", Description: "Sends the user to a URL."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Please sign in.",
				URL: "https://example.com/consent", ElicitationID: "el-1"})
			if err != nil {
				return "", err
			}
			return "the user chose to " + res.Action, nil
		})

	// url_required needs a URL-mode elicitation completed first: -32042
	// on 2025-11-25 (the client retries with connected=true), an
	// input_required round on 2026-07-28 (the retry carries the answer);
	// then it reports the completion.
	mcp.AddTool(s, mcp.Tool{Name: "url_required", Description: "Needs the user to connect an account first."},
		func(ctx context.Context, req *mcp.Request, in struct {
			Connected bool `json:"connected,omitempty"`
		}) (string, error) {
			if in.Connected || len(req.InputResponses()) > 0 {
				if err := req.ElicitationComplete(ctx, "el-2"); err != nil {
					return "", err
				}
				return "connected", nil
			}
			return "", mcp.URLElicitationRequired(mcp.ElicitParams{Message: "Connect your account.",
				URL: "https://example.com/connect", ElicitationID: "el-2"})
		})

	// interview asks two things in sequence: a form elicitation, then a
	// sampling request.
	mcp.AddTool(s, mcp.Tool{Name: "interview", Description: "Elicits a topic, then samples a sentence about it."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			e, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "Pick a topic.", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}},
			}})
			if err != nil {
				return "", err
			}
			topic, _ := e.Content["topic"].(string)
			res, err := req.Sample(ctx, &mcp.CreateMessageParams{
				Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent("Say something about " + topic + ".")}}}, MaxTokens: 20})
			if err != nil {
				return "", err
			}
			return topic + ": " + res.Text(), nil
		})

	// A prompt and a resource that ask the client for input.
	s.AddPrompt(mcp.Prompt{Name: "ask_roots", Description: "Writes about the client's roots."},
		func(ctx context.Context, req *mcp.Request, _ map[string]string) (*mcp.GetPromptResult, error) {
			res, err := req.ListRoots(ctx)
			if err != nil {
				return nil, err
			}
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				{Role: "user", Content: mcp.TextContent(fmt.Sprintf("Describe %d roots.", len(res.Roots)))},
			}}, nil
		})
	s.AddResource(mcp.Resource{URI: "golden://consent", Name: "consent", MimeType: "text/plain"},
		func(ctx context.Context, req *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
			res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "May I?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			}})
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/plain", Text: res.Action}}}, nil
		})
}
