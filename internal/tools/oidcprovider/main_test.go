package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp/auth"
)

// TestProgramIssuesVerifiableTokens runs the program, gets a token with
// client credentials over plain HTTP, and verifies it the way a node does.
func TestProgramIssuesVerifiableTokens(t *testing.T) {
	const resource = "http://127.0.0.1:8080/mcp"
	ctx, cancel := context.WithCancel(t.Context())
	var out mcptest.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--resource", resource, "--client", "svc:s3cret:mcp:tools,mcp:admin", "--client", "app::mcp:tools", "--redirect", "http://127.0.0.1:1/cb"}, &out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var issuer string
	for deadline := time.Now().Add(10 * time.Second); issuer == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`issuer (\S+)`).FindStringSubmatch(out.String()); m != nil {
			issuer = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatal("the program printed no issuer")
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp:tools mcp:admin"}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("svc", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`"access_token":"([^"]+)"`).FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("token endpoint: %d %s", resp.StatusCode, body)
	}
	v, err := auth.NewJWTVerifier(auth.JWTOptions{Issuer: issuer, Audience: resource})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(t.Context(), m[1])
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "svc" || !slices.Equal(p.Scopes, []string{"mcp:tools", "mcp:admin"}) {
		t.Errorf("got %q %v", p.Subject, p.Scopes)
	}
}

func TestParseClient(t *testing.T) {
	tests := []struct {
		in     string
		ok     bool
		secret string
		scopes []string
	}{
		{"svc:s:mcp:tools,b", true, "s", []string{"mcp:tools", "b"}},
		{"app::a", true, "", []string{"a"}},
		{"app::", true, "", nil},
		{"app:s", false, "", nil},
		{":s:a", false, "", nil},
	}
	for _, tt := range tests {
		c, err := parseClient(tt.in)
		if (err == nil) != tt.ok || err == nil && (c.Secret != tt.secret || !slices.Equal(c.Scopes, tt.scopes)) {
			t.Errorf("parseClient(%q) = %+v, %v", tt.in, c, err)
		}
	}
}

// TestFrontAddsVerifiableToken runs the program with its token-injecting
// front before a recording upstream: a request without Authorization
// reaches it with a bearer token a node accepts for the front's resource
// and with the client's Host; one with Authorization keeps its own.
func TestFrontAddsVerifiableToken(t *testing.T) {
	type seen struct{ authz, host, path string }
	got := make(chan seen, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("Authorization"), r.Host, r.URL.Path}
	}))
	t.Cleanup(up.Close)
	const resource = "http://127.0.0.1:8080/mcp"
	ctx, cancel := context.WithCancel(t.Context())
	var out mcptest.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--resource", resource, "--client", "conf:conf-secret:mcp:tools",
			"--front-listen", "127.0.0.1:0", "--front-upstream", up.URL, "--front-client", "conf"}, &out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var issuer, frontURL string
	for deadline := time.Now().Add(10 * time.Second); frontURL == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`issuer (\S+)\nfront (\S+)`).FindStringSubmatch(out.String()); m != nil {
			issuer, frontURL = m[1], m[2]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program printed no front: %q", out.String())
		}
	}
	send := func(authz string) seen {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, frontURL+"/mcp", strings.NewReader("{}"))
		req.Host = "client.example:1234"
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	s := send("")
	if s.host != "client.example:1234" || s.path != "/mcp" {
		t.Errorf("upstream saw Host %q path %q, want the client's Host and /mcp", s.host, s.path)
	}
	tok, ok := strings.CutPrefix(s.authz, "Bearer ")
	if !ok {
		t.Fatalf("upstream saw Authorization %q, want a bearer token", s.authz)
	}
	v, err := auth.NewJWTVerifier(auth.JWTOptions{Issuer: issuer, Audience: resource})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(t.Context(), tok); err != nil || p.Subject != "conf" || !slices.Equal(p.Scopes, []string{"mcp:tools"}) {
		t.Fatalf("the injected token: %+v, %v", p, err)
	}
	if s := send("Bearer mine"); s.authz != "Bearer mine" {
		t.Errorf("a request with its own token reached upstream with %q", s.authz)
	}
}
