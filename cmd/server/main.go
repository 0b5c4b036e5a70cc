// Command server runs one mcpcluster node: an MCP server over Streamable
// HTTP (or stdio) with a built-in tool pack. Without --redis-url it is a
// complete single-node server on the in-memory backend; with it, any
// number of nodes behind a load balancer serve the same clients.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/conformance"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if mode, arg, ok := modeArgs(args); ok {
		if mode == "version" {
			fmt.Fprint(stdout, versionText())
			return 0
		}
		return healthcheck(ctx, arg, stderr)
	}
	cfg, err := loadConfig(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "server: invalid configuration:\n%v\n", err)
		return 2
	}
	if cfg.NodeID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cfg.NodeID = "node-" + hex.EncodeToString(b)
	}
	baseLog := newLogger(cfg, stderr)
	log := baseLog.With().Str("node", cfg.NodeID).Logger()
	so := cfg.serverOptions()
	so.Instructions = "A reference mcpcluster node serving the " + cfg.Tools + " tool pack."
	so.StateKeys = cfg.stateKeys
	so.Zerolog = &baseLog
	srv := mcp.NewServer(mcp.Implementation{Name: "mcpcluster", Title: "mcpcluster reference node", Version: buildVersion()}, &so)
	switch cfg.Tools {
	case "conformance":
		conformance.Register(srv)
	default:
		demo.Register(srv)
	}
	if uris, err := addSkills(srv, cfg.SkillsDir); err != nil {
		fmt.Fprintf(stderr, "server: invalid configuration:\n--skills-dir (MCP_SKILLS_DIR): %v\n", err)
		return 2
	} else if len(uris) > 0 {
		log.Info().Strs("skills", uris).Msg("serving the skills of --skills-dir")
	}
	// ping_client needs the HTTP handler, which exists only later: the
	// tool is registered now so that start-up sends no list_changed.
	var httpHandler *mcp.HTTPHandler
	if !cfg.Stdio && cfg.Tools == "demo" {
		mcp.AddTool(srv, mcp.Tool{Name: "ping_client", Description: "Pings this session's client over its GET stream (a server-initiated request, from whichever node runs the call) and reports the round-trip time."},
			func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
				if httpHandler == nil || req.SessionID() == "" {
					return "", errors.New("ping_client needs a session over HTTP")
				}
				start := time.Now()
				if err := httpHandler.Ping(ctx, req.SessionID()); err != nil {
					return "", err
				}
				return "pong after " + time.Since(start).Round(time.Microsecond).String(), nil
			})
	}
	if err := requireToolScopes(srv, cfg.ToolScopes); err != nil {
		fmt.Fprintf(stderr, "server: invalid configuration:\n--auth-tool-scopes: %v (the %s tool pack has %s)\n", err, cfg.Tools, strings.Join(srv.ToolNames(), ", "))
		return 2
	}
	if cfg.Stdio {
		sto := cfg.stdioOptions()
		if err := srv.ServeStdio(ctx, stdin, stdout, &sto); err != nil && !errors.Is(err, context.Canceled) {
			log.Error().Err(err).Msg("stdio ended")
			return 1
		}
		return 0
	}
	return serveHTTP(ctx, cfg, srv, baseLog, stdout, &httpHandler)
}

func newLogger(cfg *Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func serveHTTP(ctx context.Context, cfg *Config, srv *mcp.Server, log zerolog.Logger, stdout io.Writer, handlerOut **mcp.HTTPHandler) int {
	shutdownTracing, err := setupTracing(ctx, "mcpcluster", cfg.NodeID)
	if err != nil {
		log.Error().Err(err).Msg("tracing set-up failed")
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(sctx)
	}()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error().Err(err).Msg("listen failed: set --addr (MCP_ADDR) to a free address")
		return 1
	}
	url := fmt.Sprintf("http://%s%s", ln.Addr(), cfg.Path)
	backendName := "memory"
	if cfg.RedisURL != "" {
		backendName = "redis"
	}
	nodeLog := log.With().Str("node", cfg.NodeID).Logger()

	// The probes answer at once; the MCP endpoint and /metrics serve once
	// the backend is up (see startup.go).
	var g gate
	r := chi.NewRouter()
	probes(r, &g)
	if cfg.MetricsAddr == "" {
		r.Handle("/metrics", http.HandlerFunc(g.metrics))
	}
	mcpHandler, ok := protect(r, cfg, ln.Addr(), nodeLog)
	if !ok {
		_ = ln.Close()
		return 1
	}
	r.Handle(cfg.Path, traceHTTP(mcpHandler(http.HandlerFunc(g.serveMCP)), cfg.Path))
	hs := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 2)
	// Serving starts once the node is up, or at the first failed attempt
	// to reach the backend: in the usual case nothing ever sees a 503.
	var serveOnce sync.Once
	serve := func() { serveOnce.Do(func() { go func() { errc <- hs.Serve(ln) }() }) }
	// /metrics on a listener of its own (the Kubernetes convention): the
	// MCP endpoint's clients cannot read it, and scrapes never queue
	// behind MCP traffic. It is up before the node says it listens.
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			log.Error().Err(err).Msg("metrics listen failed: set --metrics-addr (MCP_METRICS_ADDR) to a free address, or to empty to serve /metrics on --addr")
			_ = ln.Close()
			return 1
		}
		mr := chi.NewRouter()
		probes(mr, &g)
		mr.Handle("/metrics", http.HandlerFunc(g.metrics))
		if cfg.Pprof {
			mr.Mount("/debug", middleware.Profiler())
		}
		ms := &http.Server{Handler: mr, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", mln.Addr())
		go func() { errc <- ms.Serve(mln) }()
		defer ms.Close()
	}

	open := func(actx context.Context) (*mcp.Backend, *mcp.HTTPHandler, error) {
		backend, err := openBackend(actx, cfg, &nodeLog)
		if err != nil {
			return nil, nil, err
		}
		ho := cfg.httpOptions()
		ho.Backend = backend
		ho.Zerolog = &log // the handler adds the node id
		h, err := newHTTPHandler(srv, &ho)
		if err != nil {
			_ = backend.Close()
			return nil, nil, err
		}
		return backend, h, nil
	}
	backend, h, err := awaitBackend(ctx, cfg, nodeLog, open, func() {
		serve()
		fmt.Fprintf(stdout, "mcpcluster node %s started on %s, waiting for its backend (%s); not ready until it answers\n", cfg.NodeID, url, backendName)
	})
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = ln.Close() // when serving never started
		if ctx.Err() != nil {
			nodeLog.Info().Msg("stopped before the backend was reachable")
			return 0
		}
		nodeLog.Error().Err(err).Msg("cannot start the MCP endpoint")
		return 1
	}
	defer backend.Close()
	*handlerOut = h
	g.h.Store(h)
	serve()
	log = nodeLog
	fmt.Fprintf(stdout, "mcpcluster node %s listening on %s (backend %s, tools %s)\n", h.NodeID(), url, backend.Name(), cfg.Tools)
	log.Info().Str("url", url).Str("backend", backend.Name()).Msg("listening")
	select {
	case err := <-errc:
		log.Error().Err(err).Msg("server stopped")
		h.Close()
		return 1
	case <-ctx.Done():
	}
	// Pre-stop: readiness fails so balancers stop routing here, and
	// connections are no longer kept alive, but every request is served.
	g.stopping.Store(true)
	hs.SetKeepAlivesEnabled(false)
	if cfg.DrainDelay > 0 {
		log.Info().Float64("delay_ms", telemetry.Ms(cfg.DrainDelay)).Msg("stopping: not ready, still serving")
		select {
		case <-time.After(cfg.DrainDelay):
		case err := <-errc:
			log.Error().Err(err).Msg("server stopped")
		}
	}
	// Drain: the listener closes, so a balancer that still sends a request
	// here gets a refused connection and tries another node (nothing was
	// sent, so even a POST is retried); streams get a retry hint and close;
	// in-flight calls have the grace period.
	log.Info().Float64("grace_ms", telemetry.Ms(cfg.DrainTimeout)).Msg("draining")
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	shut := make(chan struct{})
	go func() { _ = hs.Shutdown(dctx); close(shut) }()
	h.Drain(dctx)
	select {
	case <-shut:
	case <-dctx.Done():
	}
	h.Close()
	log.Info().Msg("stopped")
	return 0
}

// newHTTPHandler is srv.NewHTTPHandler; a seam for tests.
var newHTTPHandler = (*mcp.Server).NewHTTPHandler

// probes serves /healthz (the process serves HTTP) and /readyz (the
// node takes traffic) on r.
func probes(r chi.Router, g *gate) {
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	r.Get("/readyz", g.ready)
}

func openBackend(ctx context.Context, cfg *Config, log *zerolog.Logger) (*mcp.Backend, error) {
	if cfg.RedisURL == "" {
		return mcp.NewMemoryBackendWith(mcp.MemoryOptions{MaxSubscriptions: cfg.MaxSubs}), nil
	}
	return openRedis(ctx, cfg, log)
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// isLoopback reports whether a listen address is on a loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// healthcheck GETs url and exits 0 on a 2xx: the probe of images that
// have no shell or curl.
func healthcheck(ctx context.Context, url string, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "healthcheck: %s\n", resp.Status)
		return 1
	}
	return 0
}
