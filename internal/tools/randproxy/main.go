// Command randproxy is a minimal HTTP reverse proxy that sends every request
// to a backend chosen uniformly at random. It exists to test a multi-node
// mcpcluster deployment the hard way: consecutive requests of one MCP session
// (initialize, tools/call, the standalone GET stream, DELETE) land on
// different nodes, so the nodes must share session state through their
// backend rather than rely on sticky routing.
//
// Responses are streamed without buffering (every write is flushed), so
// Server-Sent Events pass through as they are produced. The incoming Host and
// Origin headers are forwarded unchanged, so DNS-rebinding protection on the
// nodes sees what the client sent.
//
// Usage:
//
//	randproxy --listen 127.0.0.1:8080 --backends 127.0.0.1:9001,127.0.0.1:9002
//
// Backends may be given as host:port or as http:// URLs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on (host:port)")
	backends := flag.String("backends", "", "comma-separated backends (host:port or http://host:port)")
	verbose := flag.Bool("v", false, "log every proxied request and the backend chosen")
	flag.Parse()

	targets, err := parseBackends(*backends)
	if err != nil {
		fmt.Fprintln(os.Stderr, "randproxy:", err)
		os.Exit(2)
	}

	logger := log.New(os.Stderr, "randproxy: ", log.LstdFlags|log.Lmicroseconds)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Fatalf("listen: %v", err)
	}
	srv := &http.Server{
		Handler:           newProxy(targets, logger, *verbose),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	logger.Printf("listening on %s, %d backends: %s", ln.Addr(), len(targets), *backends)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Fatalf("serve: %v", err)
		}
	case <-ctx.Done():
		// Open SSE streams never finish on their own, so close instead of a
		// graceful shutdown.
		_ = srv.Close()
	}
}

// parseBackends turns "a,b,c" into backend URLs.
func parseBackends(s string) ([]*url.URL, error) {
	var out []*url.URL
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "://") {
			part = "http://" + part
		}
		u, err := url.Parse(part)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", part, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("backend %q: scheme must be http or https", part)
		}
		if u.Host == "" {
			return nil, fmt.Errorf("backend %q: missing host", part)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.New("--backends must name at least one backend")
	}
	return out, nil
}

// newProxy returns a handler that forwards each request to a uniformly random
// target.
//
// The request body stays readable after the response has begun (full
// duplex). Without that, Go's HTTP/1 server discards the unread rest of a
// request body when the response headers go out; a backend that answers
// as soon as it has the body (a subscriptions/listen acknowledgement) can
// do so before the proxy's transport has read the body's end, the
// transport's next read of the body then fails, and the transport closes
// the backend connection: the stream ends right after its first event.
func newProxy(targets []*url.URL, logger *log.Logger, verbose bool) http.Handler {
	rp := reverseProxy(targets, logger, verbose)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			logger.Printf("%s %s: full duplex: %v", r.Method, r.URL.RequestURI(), err)
		}
		rp.ServeHTTP(w, r)
	})
}

func reverseProxy(targets []*url.URL, logger *log.Logger, verbose bool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := targets[rand.IntN(len(targets))]
			pr.SetURL(t)
			// SetURL rewrites Host to the target's; keep the client's so the
			// backend's Host/Origin validation sees the original request.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			if verbose {
				logger.Printf("%s %s -> %s (session %q)", pr.In.Method, pr.In.URL.RequestURI(), t.Host, pr.In.Header.Get("Mcp-Session-Id"))
			}
		},
		// Negative: flush after every write, so SSE events are not held back.
		FlushInterval: -1,
		ErrorLog:      logger,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return // the client went away; nothing to report
			}
			logger.Printf("%s %s: backend error: %v", r.Method, r.URL.RequestURI(), err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}
