package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
)

// front is a reverse proxy that adds "Authorization: Bearer <token>" to
// every request it passes on, for clients that cannot send a token
// themselves (the conformance suite). The token comes from the provider
// by client credentials, with the front's resource as audience, and is
// fetched again before it expires. A request that already carries an
// Authorization header keeps it.
type front struct {
	p        *authtest.Provider
	client   *authtest.Client
	resource string

	mu      sync.Mutex
	token   string
	expires time.Time
}

// bearer returns a token that is valid for a while yet.
func (f *front) bearer(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.token != "" && time.Until(f.expires) > f.p.TokenLifetime/2 {
		return f.token, nil
	}
	tok, err := f.p.ClientCredentials(ctx, f.client.ID, f.client.Secret, f.resource, f.client.Scopes...)
	if err != nil {
		return "", err
	}
	f.token, f.expires = tok, time.Now().Add(f.p.TokenLifetime)
	return tok, nil
}

// handler proxies to upstream (scheme://host:port), keeping the client's
// Host header (the node checks it against DNS rebinding) and streaming
// Server-Sent Events as they come.
func (f *front) handler(upstream *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = pr.In.Host
			if pr.In.Header.Get("Authorization") != "" {
				return
			}
			if tok, err := f.bearer(pr.In.Context()); err == nil {
				pr.Out.Header.Set("Authorization", "Bearer "+tok)
			}
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "front: "+err.Error(), http.StatusBadGateway)
		},
	}
}

// startFront serves the front on listen until ctx ends. clientID names a
// confidential --client; upstream is the base URL requests go to.
func startFront(ctx context.Context, p *authtest.Provider, clients []*authtest.Client, clientID, listen, upstream, resource string) (string, error) {
	var c *authtest.Client
	for _, x := range clients {
		if x.ID == clientID {
			c = x
		}
	}
	if c == nil || c.Secret == "" {
		return "", fmt.Errorf("--front-client %q is no confidential --client", clientID)
	}
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--front-upstream %q: want http(s)://host:port", upstream)
	}
	if resource == "" {
		return "", errors.New("--front-listen needs --resource (the tokens' audience)")
	}
	f := &front{p: p, client: c, resource: resource}
	if _, err := f.bearer(ctx); err != nil {
		return "", fmt.Errorf("front: first token: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: f.handler(u), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return "http://" + ln.Addr().String(), nil
}
