package mcp_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/auth"
)

// The callers of the access tests: ada is an administrator with every
// scope, bob a user with the base scope only.
var accessTokens = tokenTable{
	"ada-token":     {Issuer: "https://as.example.test", Subject: "ada", Scopes: []string{"mcp", "files:write", "docs:secret", "admin"}},
	"bob-token":     {Issuer: "https://as.example.test", Subject: "bob", Scopes: []string{"mcp"}},
	"mallory-token": {Issuer: "https://as.example.test", Subject: "mallory", Scopes: []string{"mcp", "admin"}},
}

// tokenTable is a TokenVerifier over a fixed table of opaque tokens.
type tokenTable map[string]*mcp.Principal

func (tt tokenTable) Verify(_ context.Context, tok string) (*auth.Principal, error) {
	if p := tt[tok]; p != nil {
		return p, nil
	}
	return nil, auth.ErrInvalidToken
}

const accessMetadataURL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"

// adminOnly are the features the filter shows to ada alone.
var adminOnly = map[string]bool{
	mcp.KindTool + ":admin_report":    true,
	mcp.KindPrompt + ":audit":         true,
	mcp.KindResource + ":user://{id}": true,
}

// adminFilter shows adminOnly features to ada only.
func adminFilter(_ context.Context, req *mcp.Request, kind, name string) bool {
	p := req.Principal()
	return !adminOnly[kind+":"+name] || p != nil && p.Subject == "ada"
}

// accessServer registers tools, prompts, resources and templates, some
// admin-only (by the filter) and some needing scopes bob lacks. Without
// hidden, the admin-only ones are not registered at all: the server a
// caller who may not see them must be unable to tell apart.
func accessServer(hidden bool, opts *mcp.ServerOptions) *mcp.Server {
	if opts == nil {
		opts = &mcp.ServerOptions{}
	}
	opts.FeatureFilter = adminFilter
	s := mcp.NewServer(mcp.Implementation{Name: "access", Version: "1.0.0"}, opts)
	text := func(name string) mcp.TypedToolHandler[struct{}, string] {
		return func(context.Context, *mcp.Request, struct{}) (string, error) { return name + " ran", nil }
	}
	mcp.AddTool(s, mcp.Tool{Name: "alpha"}, text("alpha"))
	mcp.AddTool(s, mcp.Tool{Name: "beta"}, text("beta"))
	mcp.AddTool(s, mcp.Tool{Name: "write_file", RequiredScopes: []string{"files:write"}}, text("write_file"))
	// A handler's own finer check: a typed tool passes the error on.
	mcp.AddTool(s, mcp.Tool{Name: "rotate_keys"}, func(_ context.Context, req *mcp.Request, _ struct{}) (string, error) {
		if !req.Principal().HasScopes("admin") {
			return "", fmt.Errorf("rotate: %w", &mcp.InsufficientScopeError{Scopes: []string{"admin"}})
		}
		return "rotated", nil
	})
	prompt := func(context.Context, *mcp.Request, map[string]string) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("hi")}}}, nil
	}
	s.AddPrompt(mcp.Prompt{Name: "greet"}, prompt)
	s.AddPrompt(mcp.Prompt{Name: "draft", RequiredScopes: []string{"files:write"}}, prompt)
	read := func(_ context.Context, _ *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, Text: "content of " + uri}}}, nil
	}
	s.AddResource(mcp.Resource{URI: "doc://public"}, read)
	s.AddResource(mcp.Resource{URI: "doc://secret", RequiredScopes: []string{"docs:secret"}}, read)
	s.AddResourceTemplate(mcp.ResourceTemplate{URITemplate: "note://{id}"}, read)
	if hidden {
		mcp.AddTool(s, mcp.Tool{Name: "admin_report"}, text("admin_report"))
		s.AddPrompt(mcp.Prompt{Name: "audit"}, prompt)
		s.AddResourceTemplate(mcp.ResourceTemplate{URITemplate: "user://{id}"}, read)
	}
	return s
}

// serveWithAuth serves s behind the bearer middleware of mcp/auth with
// accessTokens, and returns the endpoint URL.
func serveWithAuth(t testing.TB, s *mcp.Server) string {
	t.Helper()
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := &auth.Resource{URI: "https://mcp.example.test/mcp", AuthorizationServers: []string{"https://as.example.test"}, Scopes: []string{"mcp"}}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(res.Middleware(accessTokens, zerolog.Nop())(h))
	t.Cleanup(func() { ts.CloseClientConnections(); h.Close(); ts.Close() })
	return ts.URL
}

// era is one way of calling: on a legacy session or stateless.
type era struct {
	name   string
	modern bool
}

var eras = []era{{"2025-11-25 session", false}, {"2026-07-28 stateless", true}}

// caller sends requests of one era with one token.
type caller struct {
	t   testing.TB
	c   *mcptest.Client
	url string
	era era
}

func newCaller(t testing.TB, url string, e era, token string) *caller {
	t.Helper()
	c := mcptest.New(t, url)
	c.Header.Set("Authorization", "Bearer "+token)
	if !e.modern {
		c.Initialize(mcp.Version20251125, nil)
	}
	return &caller{t: t, c: c, url: url, era: e}
}

func (cl *caller) call(method string, params map[string]any) *mcptest.Response {
	cl.t.Helper()
	if cl.era.modern {
		return postModern(cl.t, cl.c, cl.url, method, params, nil)
	}
	return post(cl.t, cl.c, cl.url, method, params, nil)
}

// names lists the names (or URIs) of every page of a list method,
// following nextCursor, and returns them with the size of each page.
func (cl *caller) names(method, key string) ([]string, []int) {
	cl.t.Helper()
	var names []string
	var sizes []int
	cursor := ""
	for range 100 {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page map[string]json.RawMessage
		cl.call(method, params).Result(cl.t, &page)
		var items []struct {
			Name        string `json:"name"`
			URI         string `json:"uri"`
			URITemplate string `json:"uriTemplate"`
		}
		if err := json.Unmarshal(page[key], &items); err != nil {
			cl.t.Fatalf("%s: %s: %v", method, page[key], err)
		}
		for _, it := range items {
			names = append(names, cmp.Or(it.URI, it.URITemplate, it.Name))
		}
		sizes = append(sizes, len(items))
		cursor = ""
		if c, ok := page["nextCursor"]; ok {
			_ = json.Unmarshal(c, &cursor)
		}
		if cursor == "" {
			return names, sizes
		}
	}
	cl.t.Fatalf("%s: more than 100 pages", method)
	return nil, nil
}

// TestFeatureFilterLists: each caller's lists hold only what it may
// see: the filter's admin-only features for ada alone, and features
// whose scopes bob lacks for ada alone; on a session and stateless.
func TestFeatureFilterLists(t *testing.T) {
	url := serveWithAuth(t, accessServer(true, nil))
	want := map[string]map[string][]string{
		"ada": {
			"tools/list":               {"admin_report", "alpha", "beta", "rotate_keys", "write_file"},
			"prompts/list":             {"audit", "draft", "greet"},
			"resources/list":           {"doc://public", "doc://secret"},
			"resources/templates/list": {"note://{id}", "user://{id}"},
		},
		"bob": {
			"tools/list":               {"alpha", "beta", "rotate_keys"},
			"prompts/list":             {"greet"},
			"resources/list":           {"doc://public"},
			"resources/templates/list": {"note://{id}"},
		},
	}
	keys := map[string]string{"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}
	for _, e := range eras {
		for who, lists := range want {
			cl := newCaller(t, url, e, who+"-token")
			for method, names := range lists {
				got, _ := cl.names(method, keys[method])
				if !slices.Equal(got, names) {
					t.Errorf("%s, %s: %s = %v, want %v", e.name, who, method, got, names)
				}
			}
		}
	}
}

// TestHiddenFeatureAnswersAsUnknown: a call, get or read of a feature
// the filter hides from the caller gets the very answer (status,
// headers, body) a server without the feature gives.
func TestHiddenFeatureAnswersAsUnknown(t *testing.T) {
	with := serveWithAuth(t, accessServer(true, nil))
	without := serveWithAuth(t, accessServer(false, nil))
	probes := []struct {
		method string
		params map[string]any
	}{
		{"tools/call", map[string]any{"name": "admin_report", "arguments": map[string]any{}}},
		{"prompts/get", map[string]any{"name": "audit"}},
		{"resources/read", map[string]any{"uri": "user://7"}},
	}
	for _, e := range eras {
		a, b := newCaller(t, with, e, "bob-token"), newCaller(t, without, e, "bob-token")
		for _, p := range probes {
			ra, rb := a.call(p.method, p.params), b.call(p.method, p.params)
			if ra.Status != rb.Status || !bytes.Equal(ra.Body, rb.Body) || ra.Header.Get("Content-Type") != rb.Header.Get("Content-Type") || ra.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%s %s: hidden answered %d %q, absent %d %q", e.name, p.method, ra.Status, ra.Body, rb.Status, rb.Body)
			}
			if f := ra.Final(); f == nil || f.Error == nil {
				t.Errorf("%s %s: hidden feature answered %q, want an error", e.name, p.method, ra.Body)
			}
		}
		// The one who may see them uses them.
		ada := newCaller(t, with, e, "ada-token")
		if got := resultText(t, ada.call("tools/call", probes[0].params)); got != "admin_report ran" {
			t.Errorf("%s: ada's admin_report answered %q", e.name, got)
		}
		ada.call("prompts/get", probes[1].params).Result(t, nil)
		ada.call("resources/read", probes[2].params).Result(t, nil)
	}
}

// TestScopeStepUp: a feature the filter admits but whose scopes the
// caller lacks is answered 403 with an insufficient_scope challenge
// naming every scope it needs and the metadata URL (step-up), with the
// JSON-RPC error of the request; with the scopes it runs.
func TestScopeStepUp(t *testing.T) {
	url := serveWithAuth(t, accessServer(true, nil))
	probes := []struct {
		method string
		params map[string]any
		scope  string
	}{
		{"tools/call", map[string]any{"name": "write_file", "arguments": map[string]any{}}, "files:write"},
		{"prompts/get", map[string]any{"name": "draft"}, "files:write"},
		{"resources/read", map[string]any{"uri": "doc://secret"}, "docs:secret"},
		{"tools/call", map[string]any{"name": "rotate_keys", "arguments": map[string]any{}}, "admin"},
	}
	for _, e := range eras {
		bob, ada := newCaller(t, url, e, "bob-token"), newCaller(t, url, e, "ada-token")
		for _, p := range probes {
			resp := bob.call(p.method, p.params)
			rpcErr := wantRPCError(t, resp, http.StatusForbidden, mcp.CodeInsufficientScope)
			want := fmt.Sprintf(`Bearer error="insufficient_scope", scope="mcp %s", resource_metadata=%q`, p.scope, accessMetadataURL)
			if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, want) {
				t.Errorf("%s %s: WWW-Authenticate %q, want it to start with %q", e.name, p.method, got, want)
			}
			if !strings.Contains(string(rpcErr.Data), p.scope) || resp.Final().ID.String() == "" {
				t.Errorf("%s %s: error %s lacks the scope or the request id", e.name, p.method, resp.Body)
			}
			ada.call(p.method, p.params).Result(t, nil)
		}
	}
}

// TestFeatureFilterPagination: cursors run over the filtered list: each
// page is full but the last, and the pages together are exactly what
// the caller may see, in order.
func TestFeatureFilterPagination(t *testing.T) {
	s := mcp.NewServer(mcp.Implementation{Name: "paged", Version: "1.0.0"}, &mcp.ServerOptions{
		PageSize: 2,
		// bob sees the tools with an even number.
		FeatureFilter: func(_ context.Context, req *mcp.Request, kind, name string) bool {
			return req.Principal().Subject == "ada" || (name[len(name)-1]-'0')%2 == 0
		},
	})
	var all, bobs []string
	for i := range 11 {
		name := fmt.Sprintf("t%02d", i)
		var scopes []string
		if i == 4 {
			scopes = []string{"files:write"} // bob lacks it
		}
		mcp.AddTool(s, mcp.Tool{Name: name, RequiredScopes: scopes}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
		all = append(all, name)
		if i%2 == 0 && i != 4 {
			bobs = append(bobs, name)
		}
	}
	url := serveWithAuth(t, s)
	for _, e := range eras {
		for who, want := range map[string][]string{"ada": all, "bob": bobs} {
			got, sizes := newCaller(t, url, e, who+"-token").names("tools/list", "tools")
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s: pages hold %v, want %v", e.name, who, got, want)
			}
			for i, n := range sizes {
				if n != 2 && i != len(sizes)-1 || n == 0 {
					t.Errorf("%s, %s: page sizes %v, want full pages of 2 but the last", e.name, who, sizes)
					break
				}
			}
		}
	}
}

// TestFeatureFilterStdio: on stdio there is no principal: the filter
// sees nil, a feature with scopes is hidden, and calling it is answered
// as an unknown tool, not with a step-up nobody could take.
func TestFeatureFilterStdio(t *testing.T) {
	var mu sync.Mutex
	var seen []*mcp.Principal
	s := mcp.NewServer(mcp.Implementation{Name: "stdio", Version: "1.0.0"}, &mcp.ServerOptions{
		FeatureFilter: func(_ context.Context, req *mcp.Request, kind, name string) bool {
			mu.Lock()
			seen = append(seen, req.Principal())
			mu.Unlock()
			return name != "hidden"
		},
	})
	noop := func(context.Context, *mcp.Request, struct{}) (string, error) { return "ran", nil }
	mcp.AddTool(s, mcp.Tool{Name: "open"}, noop)
	mcp.AddTool(s, mcp.Tool{Name: "hidden"}, noop)
	mcp.AddTool(s, mcp.Tool{Name: "scoped", RequiredScopes: []string{"files:write"}}, noop)
	c := startStdio(t, s, nil)
	ask := func(id int, method, params string) stdioLine {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, stdioModernMeta))
		return c.next(method)
	}
	if l := ask(1, "tools/list", ""); !strings.Contains(l.raw, `"name":"open"`) || strings.Contains(l.raw, "hidden") || strings.Contains(l.raw, "scoped") {
		t.Errorf("tools/list = %s, want only open", l.raw)
	}
	// The same id and name for each, so the answers must be equal.
	unknown := ask(2, "tools/call", `"name":"nosuch","arguments":{},`)
	for _, name := range []string{"scoped", "hidden"} {
		l := ask(2, "tools/call", `"name":"nosuch","arguments":{},`)
		got := strings.ReplaceAll(ask(2, "tools/call", `"name":"`+name+`","arguments":{},`).raw, name, "nosuch")
		if got != unknown.raw || l.raw != unknown.raw || unknown.Error == nil || !strings.Contains(unknown.Error.Message, "unknown tool") {
			t.Errorf("%s answered %s, an unknown tool %s", name, got, unknown.raw)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || slices.ContainsFunc(seen, func(p *mcp.Principal) bool { return p != nil }) {
		t.Errorf("the filter saw principals %v, want only nil", seen)
	}
}

// guard is a method middleware that refuses by principal: a blocked
// subject gets a JSON-RPC error for anything, and tools/call of purge
// needs the admin scope (a step-up). It records who it saw.
func guard(seen *[]string, mu *sync.Mutex) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			p := req.Principal()
			mu.Lock()
			*seen = append(*seen, method+" "+p.ID())
			mu.Unlock()
			if p != nil && p.Subject == "mallory" {
				return nil, mcp.NewError(-32001, "caller is blocked", nil)
			}
			var call struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(req.Params, &call)
			if method == "tools/call" && call.Name == "purge" && !p.HasScopes("admin") {
				return nil, &mcp.InsufficientScopeError{Scopes: []string{"admin"}}
			}
			return next(ctx, method, req)
		}
	}
}

// TestMiddlewareRefusesByPrincipal: receiving middleware sees the
// verified principal and can refuse: with a JSON-RPC error of its
// choosing, or with InsufficientScopeError, which over HTTP behind the
// bearer middleware is a 403 step-up challenge; on a session and
// stateless.
func TestMiddlewareRefusesByPrincipal(t *testing.T) {
	s := mcp.NewServer(mcp.Implementation{Name: "guarded", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "purge"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "purged", nil })
	var mu sync.Mutex
	var seen []string
	s.AddReceivingMiddleware(guard(&seen, &mu))
	url := serveWithAuth(t, s)
	purge := map[string]any{"name": "purge", "arguments": map[string]any{}}
	for _, e := range eras {
		var refused *mcptest.Response
		if e.modern {
			refused = newCaller(t, url, e, "mallory-token").call("tools/list", nil)
		} else { // initialize is refused already
			c := mcptest.New(t, url)
			c.Header.Set("Authorization", "Bearer mallory-token")
			refused = c.Call("initialize", map[string]any{"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "m", "version": "1"}}, nil)
		}
		if rpcErr := wantRPCError(t, refused, http.StatusOK, -32001); rpcErr.Message != "caller is blocked" || refused.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: mallory got %q", e.name, refused.Body)
		}
		bob := newCaller(t, url, e, "bob-token")
		resp := bob.call("tools/call", purge)
		wantRPCError(t, resp, http.StatusForbidden, mcp.CodeInsufficientScope)
		if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, `error="insufficient_scope", scope="mcp admin"`) {
			t.Errorf("%s: bob's purge challenge is %q", e.name, got)
		}
		if got := resultText(t, newCaller(t, url, e, "ada-token").call("tools/call", purge)); got != "purged" {
			t.Errorf("%s: ada's purge answered %q", e.name, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, "initialize https://as.example.test#mallory") || !slices.Contains(seen, "tools/call https://as.example.test#bob") || !slices.Contains(seen, "tools/call https://as.example.test#ada") {
		t.Errorf("the middleware saw %v", seen)
	}
}

// TestRequireScopes: scopes set after registration (for a tool pack)
// hide the feature from a caller without them and make a call a
// step-up; clearing them shows it again.
func TestRequireScopes(t *testing.T) {
	s := accessServer(false, nil)
	url := serveWithAuth(t, s)
	if err := s.RequireScopes(mcp.KindTool, "nosuch", "x"); err == nil {
		t.Error("RequireScopes of an unregistered tool succeeded")
	}
	for _, kind := range []string{mcp.KindTool, mcp.KindPrompt, mcp.KindResource} {
		name := map[string]string{mcp.KindTool: "alpha", mcp.KindPrompt: "greet", mcp.KindResource: "note://{id}"}[kind]
		if err := s.RequireScopes(kind, name, "extra"); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range eras {
		bob := newCaller(t, url, e, "bob-token")
		for method, want := range map[string][]string{"tools/list": {"beta", "rotate_keys"}, "prompts/list": nil, "resources/templates/list": nil} {
			if got, _ := bob.names(method, map[string]string{"tools/list": "tools", "prompts/list": "prompts", "resources/templates/list": "resourceTemplates"}[method]); !slices.Equal(got, want) {
				t.Errorf("%s: %s = %v, want %v", e.name, method, got, want)
			}
		}
		resp := bob.call("resources/read", map[string]any{"uri": "note://1"})
		wantRPCError(t, resp, http.StatusForbidden, mcp.CodeInsufficientScope)
		if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, `scope="mcp extra"`) {
			t.Errorf("%s: challenge %q", e.name, got)
		}
	}
	if err := s.RequireScopes(mcp.KindTool, "alpha"); err != nil {
		t.Fatal(err)
	}
	if got, _ := newCaller(t, url, eras[1], "bob-token").names("tools/list", "tools"); !slices.Equal(got, []string{"alpha", "beta", "rotate_keys"}) {
		t.Errorf("after clearing: tools/list = %v", got)
	}
}

// ExampleInsufficientScopeError shows a receiving middleware that
// refuses by the caller's principal and scopes, and a tool that declares
// the scopes it needs. On stdio there is no principal: the middleware
// refuses the delete with a clear JSON-RPC error naming the scope, and
// the scoped tool is neither listed nor callable. Over HTTP behind the
// bearer middleware of mcp/auth, the same refusal is a 403 with
// `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`.
func ExampleInsufficientScopeError() {
	s := mcp.NewServer(mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "delete_file"},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "deleted", nil })
	mcp.AddTool(s, mcp.Tool{Name: "write_file", RequiredScopes: []string{"files:write"}},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "written", nil })
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			if method == "tools/call" && strings.Contains(string(req.Params), `"delete_file"`) &&
				!req.Principal().HasScopes("files:delete") {
				return nil, &mcp.InsufficientScopeError{Scopes: []string{"files:delete"}}
			}
			return next(ctx, method, req)
		}
	})

	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), clientOut, clientIn, nil) }()
	replies := bufio.NewReader(serverOut)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for i, params := range []string{`"name":"delete_file","arguments":{}`, `"name":"write_file","arguments":{}`} {
		fmt.Fprintf(serverIn, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,%s}}`+"\n", i+1, params, meta)
		reply, _ := replies.ReadString('\n')
		fmt.Print(reply)
	}
	serverIn.Close()
	// Output:
	// {"jsonrpc":"2.0","id":1,"error":{"code":-31403,"message":"insufficient scope: the access token lacks a scope this request needs","data":{"scopes":["files:delete"]}}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown tool \"write_file\"","data":{"field":"name"}}}
}
