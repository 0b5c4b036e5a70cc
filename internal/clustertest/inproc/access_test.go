package inproc_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/auth"
)

// bearers is a TokenVerifier over fixed opaque tokens: "full" has every
// scope, "base" only the resource's.
type bearers map[string]*mcp.Principal

func (b bearers) Verify(_ context.Context, tok string) (*auth.Principal, error) {
	if p := b[tok]; p != nil {
		return p, nil
	}
	return nil, auth.ErrInvalidToken
}

var accessBearers = bearers{
	"full": {Issuer: "https://as.example.test", Subject: "root", Scopes: []string{"mcp", "write"}},
	"base": {Issuer: "https://as.example.test", Subject: "user", Scopes: []string{"mcp"}},
}

// accessCluster is three nodes with the same tools and FeatureFilter,
// each behind the bearer middleware: t00..t09, of which the filter shows
// "user" the even ones, and t04 needs the write scope "user" lacks.
// It returns the endpoint of each node.
func accessCluster(t *testing.T) []string {
	res := &auth.Resource{URI: "https://mcp.example.test/mcp", AuthorizationServers: []string{"https://as.example.test"}, Scopes: []string{"mcp"}}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	c := inproc.New(t, inproc.Options{
		Server: mcp.ServerOptions{
			PageSize: 2,
			FeatureFilter: func(_ context.Context, req *mcp.Request, _, name string) bool {
				return req.Principal().Subject == "root" || (name[len(name)-1]-'0')%2 == 0
			},
		},
		Setup: func(_ int, s *mcp.Server) {
			for i := range 10 {
				name := fmt.Sprintf("t%02d", i)
				var scopes []string
				if i == 4 {
					scopes = []string{"write"}
				}
				mcp.AddTool(s, mcp.Tool{Name: name, RequiredScopes: scopes}, func(context.Context, *mcp.Request, struct{}) (string, error) {
					return name + " ran", nil
				})
			}
		},
	})
	var urls []string
	for _, n := range c.Nodes {
		ts := httptest.NewServer(res.Middleware(accessBearers, zerolog.Nop())(n.Handler))
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		urls = append(urls, ts.URL+"/mcp")
	}
	return urls
}

// accessClient sends requests of one era with one token, to the node it
// is told.
type accessClient struct {
	t      *testing.T
	c      *mcptest.Client
	modern bool
}

func newAccessClient(t *testing.T, urls []string, modern bool, token string) *accessClient {
	c := mcptest.New(t, urls...)
	c.Header.Set("Authorization", "Bearer "+token)
	if !modern {
		c.Initialize(mcp.Version20251125, nil) // on the first node
	}
	return &accessClient{t: t, c: c, modern: modern}
}

// at sends method with params to url, with id.
func (a *accessClient) at(url string, id int64, method string, params map[string]any) *mcptest.Response {
	a.t.Helper()
	var mod func(*http.Request)
	if a.modern {
		params["_meta"] = mcptest.ModernMeta()
		name, _ := params["name"].(string)
		mod = mcptest.ModernHeaders(method, name)
	}
	msg, err := jsonrpc.Request(jsonrpc.IntID(id), method, params)
	if err != nil {
		a.t.Fatal(err)
	}
	b, _ := jsonrpc.Encode(msg)
	ctx, cancel := context.WithTimeout(context.Background(), soon)
	defer cancel()
	resp, err := a.c.PostRaw(ctx, url, b, mod, nil)
	if err != nil {
		a.t.Fatalf("%s at %s: %v", method, url, err)
	}
	return resp
}

// TestFeatureFilterAcrossNodes: the filter is node configuration, the
// same on every node, so a caller's tools/list pages chain across nodes
// (each page from the next node) to exactly what it may see; a hidden
// tool is answered as an unknown one by every node, byte for byte; and a
// tool it lacks the scope for is a 403 step-up on every node. On a
// session and stateless.
func TestFeatureFilterAcrossNodes(t *testing.T) {
	urls := accessCluster(t)
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "stateless"}[modern], func(t *testing.T) {
			for token, want := range map[string][]string{
				"full": {"t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09"},
				"base": {"t00", "t02", "t06", "t08"},
			} {
				a := newAccessClient(t, urls, modern, token)
				var got []string
				cursor := ""
				for page := 0; page < 10; page++ {
					params := map[string]any{}
					if cursor != "" {
						params["cursor"] = cursor
					}
					var res struct {
						Tools      []mcp.Tool `json:"tools"`
						NextCursor string     `json:"nextCursor"`
					}
					a.at(urls[page%len(urls)], int64(page+10), "tools/list", params).Result(t, &res)
					for _, tl := range res.Tools {
						got = append(got, tl.Name)
					}
					if cursor = res.NextCursor; cursor == "" {
						break
					}
					if len(res.Tools) != 2 {
						t.Errorf("%s: page %d holds %d tools, want 2", token, page, len(res.Tools))
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: pages across the nodes hold %v, want %v", token, got, want)
				}
			}

			user := newAccessClient(t, urls, modern, "base")
			call := func(url, name string) *mcptest.Response {
				return user.at(url, 7, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
			}
			absent := call(urls[0], "t99")
			for _, url := range urls {
				hidden := call(url, "t03")
				if hidden.Status != absent.Status || strings.ReplaceAll(string(hidden.Body), "t03", "t99") != string(absent.Body) {
					t.Errorf("%s: hidden t03 answered %d %s, absent t99 %d %s", url, hidden.Status, hidden.Body, absent.Status, absent.Body)
				}
				stepUp := call(url, "t04")
				if f := stepUp.Final(); stepUp.Status != http.StatusForbidden || f == nil || f.Error == nil || f.Error.Code != mcp.CodeInsufficientScope ||
					!strings.Contains(stepUp.Header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="mcp write"`) {
					t.Errorf("%s: t04 without the scope answered %d %s %q", url, stepUp.Status, stepUp.Body, stepUp.Header.Get("WWW-Authenticate"))
				}
				var res mcp.CallToolResult
				call(url, "t02").Result(t, &res)
				if len(res.Content) != 1 || res.Content[0].Text != "t02 ran" {
					t.Errorf("%s: visible t02 answered %+v", url, res)
				}
			}
			if f := absent.Final(); f == nil || f.Error == nil || !strings.Contains(f.Error.Message, "unknown tool") {
				t.Errorf("an absent tool answered %s", absent.Body)
			}
		})
	}
}
