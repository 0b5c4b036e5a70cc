package gosdk

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The clients scripts/cluster.sh --auth registers with its provider.
const (
	oauthPublicClient = "app"
	oauthRedirect     = "http://127.0.0.1:1/callback"
	oauthSvcClient    = "svc"
	oauthSvcSecret    = "svc-secret"
)

// TestOAuthThroughNginx runs the Go SDK client's OAuth support against
// three nodes on Redis behind nginx with authorization on
// (scripts/cluster.sh --auth): the client meets a 401, finds the
// Protected Resource Metadata and the authorization server's metadata,
// runs the authorization code flow with PKCE as the pre-registered public
// client (the provider's login step approves at once), and calls tools
// with the token, on 2025-06-18, 2025-11-25 and 2026-07-28. A client
// holding a token without the required scope gets 403 insufficient_scope
// and authorizes again with the scope the challenge names (step-up); so
// does one whose token lacks the scope one tool needs (add: mcp:math,
// --auth-tool-scopes), on calling that tool.
//
// Run by go test, it starts the cluster with scripts/cluster.sh and runs
// itself inside it (--run); the cluster gives it MCP_CLUSTER_URL and
// MCP_CLUSTER_ISSUER.
func TestOAuthThroughNginx(t *testing.T) {
	endpoint, issuer := os.Getenv("MCP_CLUSTER_URL"), os.Getenv("MCP_CLUSTER_ISSUER")
	if endpoint == "" {
		runInAuthCluster(t)
		return
	}
	if issuer == "" {
		t.Fatal("MCP_CLUSTER_URL without MCP_CLUSTER_ISSUER: run scripts/cluster.sh with --auth")
	}
	spread := watchAccessLog(t)
	eras := []struct{ name, pin, want string }{
		{"2025-06-18", "2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25", "2025-11-25"},
		{"2026-07-28", "", "2026-07-28"},
	}
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ua := &userAgent{redirect: oauthRedirect}
			h := newOAuthHandler(t, ua, nil)
			cs := connectOAuth(t, endpoint, h, e.pin)
			if got := cs.InitializeResult().ProtocolVersion; got != e.want {
				t.Errorf("negotiated %s, want %s", got, e.want)
			}
			callEcho(t, cs, 6)
			auths := ua.seen()
			if len(auths) != 1 {
				t.Fatalf("the client authorized %d times, want once: %v", len(auths), auths)
			}
			a := auths[0]
			if !strings.HasPrefix(a.String(), issuer+"/") {
				t.Errorf("authorization at %s, not at the issuer %s", a, issuer)
			}
			if a.Query().Get("resource") != endpoint || a.Query().Get("code_challenge_method") != "S256" || a.Query().Get("client_id") != oauthPublicClient {
				t.Errorf("authorization request %s: want resource %s, PKCE S256 and client %s", a, endpoint, oauthPublicClient)
			}
			if !slices.Contains(strings.Fields(a.Query().Get("scope")), "mcp:tools") {
				t.Errorf("authorization request scope %q lacks mcp:tools (the 401 challenge names it)", a.Query().Get("scope"))
			}
		})
	}

	// Step-up: the client starts with a token of scope mcp:read only.
	t.Run("step-up", func(t *testing.T) {
		cc := clientcredentials.Config{
			ClientID: oauthSvcClient, ClientSecret: oauthSvcSecret, TokenURL: issuer + "/oauth/token",
			Scopes: []string{"mcp:read"}, EndpointParams: url.Values{"resource": {endpoint}},
		}
		narrow, err := cc.Token(t.Context())
		if err != nil {
			t.Fatalf("a token of scope mcp:read: %v", err)
		}
		// Sent as is, the narrow token gets 403 insufficient_scope naming
		// the scope the endpoint needs.
		status, challenge := probe(t, endpoint, narrow.AccessToken)
		if status != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(challenge, `scope="mcp:tools"`) {
			t.Fatalf("the narrow token: got %d %q, want 403 insufficient_scope with scope mcp:tools", status, challenge)
		}
		ua := &userAgent{redirect: oauthRedirect}
		h := newOAuthHandler(t, ua, oauth2.StaticTokenSource(narrow))
		cs := connectOAuth(t, endpoint, h, "2025-11-25")
		callEcho(t, cs, 3)
		auths := ua.seen()
		if len(auths) != 1 {
			t.Fatalf("the client authorized %d times, want once (after the 403): %v", len(auths), auths)
		}
		if got := strings.Fields(auths[0].Query().Get("scope")); !slices.Contains(got, "mcp:tools") {
			t.Errorf("the step-up asked for scope %v, want mcp:tools from the 403 challenge", got)
		}
	})

	// Step-up for one tool: add needs mcp:math besides mcp:tools. The
	// client's token has mcp:tools only (what the 401 asked for): add is
	// not listed, and calling it gets 403 insufficient_scope; the SDK
	// authorizes again for the scopes it holds plus the challenge's and
	// the call goes through.
	for _, pin := range []string{"2025-11-25", ""} {
		name := "per-tool step-up " + pin
		if pin == "" {
			name = "per-tool step-up 2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			ua := &userAgent{redirect: oauthRedirect}
			cs := connectOAuth(t, endpoint, newOAuthHandler(t, ua, nil), pin)
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			if hasTool(t, ctx, cs, "add") {
				t.Fatal("tools/list shows add to a token without mcp:math")
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil {
				t.Fatalf("tools/call add after step-up: %v", err)
			}
			if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["sum"] != 5.0 {
				t.Fatalf("tools/call add: got %+v", res)
			}
			auths := ua.seen()
			if len(auths) != 2 {
				t.Fatalf("the client authorized %d times, want twice (the 401, then the tool's 403): %v", len(auths), auths)
			}
			if got := strings.Fields(auths[1].Query().Get("scope")); !slices.Contains(got, "mcp:math") || !slices.Contains(got, "mcp:tools") {
				t.Errorf("the step-up asked for scope %v, want mcp:math (the challenge) and mcp:tools (held)", got)
			}
			if !hasTool(t, ctx, cs, "add") {
				t.Error("tools/list does not show add after the step-up")
			}
		})
	}

	// nginx spread the authorized calls over every node, and refused
	// nothing but the requests without a token or with the narrow one.
	byStatus, upstreams := spread()
	nodes := strings.Fields(os.Getenv("MCP_CLUSTER_NODES"))
	t.Logf("through nginx: statuses %v, authorized requests per node %v", byStatus, upstreams)
	for _, n := range nodes {
		if upstreams[n] == 0 {
			t.Errorf("no authorized request reached node %s (%v)", n, upstreams)
		}
	}
	if byStatus["401"] == 0 || byStatus["403"] == 0 {
		t.Errorf("statuses %v: want 401s (no token yet) and a 403 (the narrow token)", byStatus)
	}
	for status, n := range byStatus {
		if status >= "400" && status != "401" && status != "403" {
			t.Errorf("%d requests answered %s through nginx", n, status)
		}
	}
}

// watchAccessLog notes where nginx's access log ends now; the function it
// returns counts the requests to the MCP endpoint logged since, by status
// and, for the ones a node answered with 2xx, by node.
func watchAccessLog(t *testing.T) func() (byStatus, upstreams map[string]int) {
	t.Helper()
	file := os.Getenv("MCP_CLUSTER_ACCESS_LOG")
	if file == "" {
		t.Fatal("MCP_CLUSTER_ACCESS_LOG is not set: run scripts/cluster.sh --run")
	}
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return func() (map[string]int, map[string]int) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		byStatus, upstreams := map[string]int{}, map[string]int{}
		// $remote_addr "$request" $status upstream=$upstream_addr rt=...
		for _, line := range strings.Split(string(b[len(before):]), "\n") {
			_, rest, ok := strings.Cut(line, `"`)
			req, rest, ok2 := strings.Cut(rest, `" `)
			f := strings.Fields(rest)
			if !ok || !ok2 || len(f) < 2 || !strings.Contains(req, " /mcp ") {
				continue
			}
			byStatus[f[0]]++
			if strings.HasPrefix(f[0], "2") {
				upstreams[strings.TrimPrefix(f[1], "upstream=")]++
			}
		}
		return byStatus, upstreams
	}
}

// runInAuthCluster starts scripts/cluster.sh --auth and runs this test
// binary inside it.
func runInAuthCluster(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "cluster.sh")
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--auth",
		"--run", fmt.Sprintf("%q -test.run '^TestOAuthThroughNginx$' -test.v -test.count=1", self))
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/cluster.sh --auth --run ...:\n%s", out)
	if err != nil {
		t.Fatalf("the OAuth flows through nginx failed: %v", err)
	}
	for _, want := range []string{"--- PASS: TestOAuthThroughNginx/2025-06-18", "--- PASS: TestOAuthThroughNginx/2026-07-28",
		"--- PASS: TestOAuthThroughNginx/step-up", "--- PASS: TestOAuthThroughNginx/per-tool_step-up_2025-11-25", "--- PASS: TestOAuthThroughNginx/per-tool_step-up_2026-07-28"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the run's output lacks %q", want)
		}
	}
}

// userAgent stands in for the user's browser: it opens the authorization
// URL, follows the provider's redirects (its login step approves at once)
// until the redirect URI, and hands back the code, state and issuer.
type userAgent struct {
	redirect string
	mu       sync.Mutex
	urls     []*url.URL
}

func (ua *userAgent) seen() []*url.URL {
	ua.mu.Lock()
	defer ua.mu.Unlock()
	return slices.Clone(ua.urls)
}

func (ua *userAgent) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, err
	}
	ua.mu.Lock()
	ua.urls = append(ua.urls, u)
	ua.mu.Unlock()
	browser := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), ua.redirect) || len(via) > 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := browser.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	back, err := resp.Location()
	if err != nil || !strings.HasPrefix(back.String(), ua.redirect) {
		return nil, fmt.Errorf("authorization: status %d, no redirect to %s (%v)", resp.StatusCode, ua.redirect, err)
	}
	q := back.Query()
	if q.Get("code") == "" {
		return nil, fmt.Errorf("authorization refused: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// newOAuthHandler is the SDK's authorization code handler for the
// pre-registered public client, starting from initial when not nil.
func newOAuthHandler(t *testing.T, ua *userAgent, initial oauth2.TokenSource) *auth.AuthorizationCodeHandler {
	t.Helper()
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: oauthPublicClient},
		RedirectURL:              oauthRedirect,
		AuthorizationCodeFetcher: ua.fetch,
		InitialTokenSource:       initial,
		AcceptUnadvertisedIss:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// connectOAuth connects an SDK client with h (pin "" lets it discover
// the newest revision) and closes it at the end of the test.
func connectOAuth(t *testing.T, endpoint string, h auth.OAuthHandler, pin string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpcluster-gosdk-oauth", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callEcho lists the tools and calls echo n times (nginx spreads the
// calls over the nodes, each of which verifies the token).
func callEcho(t *testing.T, cs *mcp.ClientSession, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if !slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "echo" }) {
		t.Fatalf("tools/list has no echo")
	}
	for i := range n {
		text := fmt.Sprintf("oauth %d", i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil {
			t.Fatalf("tools/call echo #%d: %v", i, err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); res.IsError || !ok || tc.Text != text {
			t.Fatalf("tools/call echo #%d: got %+v", i, res.Content)
		}
	}
}

// hasTool reports whether tools/list shows name.
func hasTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string) bool {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
}

// probe POSTs a ping with token and returns the status and the
// WWW-Authenticate header.
func probe(t *testing.T, endpoint, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}
