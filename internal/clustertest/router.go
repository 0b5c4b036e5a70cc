package clustertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
)

// Router is a load balancer without stickiness: every HTTP request (POST,
// GET, DELETE) goes to the next backend round robin, or to a random one.
// Like a balancer with health checks, it skips a backend that refuses the
// connection and tries the next. Responses stream through unbuffered, so
// SSE works.
type Router struct {
	URL string

	backends []*url.URL
	random   bool
	next     atomic.Uint64
	srv      *httptest.Server
	mu       sync.Mutex
	hits     map[string]int
}

// NewRouter starts a router in front of the given endpoint URLs.
func NewRouter(urls []string, random bool) *Router {
	r := &Router{random: random, hits: map[string]int{}}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		r.backends = append(r.backends, pu)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			b := pr.In.Context().Value(backendKey{}).(*url.URL)
			pr.SetURL(b)
			pr.Out.URL.Path = b.Path
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "router: "+err.Error(), http.StatusBadGateway)
		},
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.serve(w, req, proxy)
	}))
	r.URL = r.srv.URL
	return r
}

type backendKey struct{}

func (r *Router) pick(attempt int) *url.URL {
	n := len(r.backends)
	if r.random {
		return r.backends[rand.IntN(n)]
	}
	return r.backends[int(r.next.Add(1)-1+uint64(attempt))%n]
}

func (r *Router) serve(w http.ResponseWriter, req *http.Request, proxy *httputil.ReverseProxy) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "router: reading body", http.StatusBadRequest)
		return
	}
	// Skip backends that refuse connections (killed nodes).
	var target *url.URL
	for attempt := 0; attempt < 3*len(r.backends); attempt++ {
		b := r.pick(attempt)
		if reachable(b.Host) {
			target = b
			break
		}
	}
	if target == nil {
		http.Error(w, "router: no backend reachable", http.StatusBadGateway)
		return
	}
	r.mu.Lock()
	r.hits[target.String()]++
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	ctx := req.Context()
	proxy.ServeHTTP(w, req.WithContext(withBackend(ctx, target)))
}

// Hits returns how many requests each backend received.
func (r *Router) Hits() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.hits))
	for k, v := range r.hits {
		out[k] = v
	}
	return out
}

// Close stops the router and cuts its connections.
func (r *Router) Close() {
	r.srv.CloseClientConnections()
	r.srv.Close()
}

func reachable(host string) bool {
	c, err := net.Dial("tcp", host)
	if err != nil {
		return !errors.Is(err, syscall.ECONNREFUSED)
	}
	c.Close()
	return true
}

func withBackend(ctx context.Context, u *url.URL) context.Context {
	return context.WithValue(ctx, backendKey{}, u)
}
