// Command node is a complete mcpcluster node built on the public API
// only (packages mcp and mcp/redisbackend): typed tools that ask the
// client's model (sampling) and report progress, a resource and a
// prompt, registered by one function for both transports; over HTTP,
// /healthz, /readyz, /metrics and a graceful drain on SIGTERM.
//
// Every node of a deployment runs the same program with the same
// environment, behind a load balancer that meets the contract in the
// README ("Behind a load balancer"; examples/proxy is one):
//
//	MCP_REDIS_URL        the shared Redis (redis://host:6379); unset: one node in memory
//	MCP_STATE_KEY        64 hex digits, the same on every node (required with Redis)
//	MCP_TRUSTED_PROXIES  the balancers' addresses or CIDR ranges, comma-separated: their X-Forwarded-For is believed
//
// Run it:
//
//	export MCP_STATE_KEY=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n')
//	MCP_REDIS_URL=redis://127.0.0.1:6379 go run ./examples/node -addr 127.0.0.1:8081 -metrics-addr 127.0.0.1:7981
//	go run ./examples/node -stdio   # one client over stdin/stdout, as a desktop client launches it
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// AskIn is the input of the ask tool; its JSON Schema is inferred.
type AskIn struct {
	Question string `json:"question" jsonschema:"what to ask the client's model"`
}

// CountdownIn is the input of the countdown tool.
type CountdownIn struct {
	From    int `json:"from" jsonschema:"where to start, 1 to 100"`
	DelayMs int `json:"delayMs,omitempty" jsonschema:"pause between steps in milliseconds, at most 1000"`
}

// register adds the server's tools, resource and prompt. Every node runs
// it at start-up, whichever transport it serves.
func register(s *mcp.Server) {
	mcp.AddTool(s, mcp.Tool{Name: "ask", Description: "Asks the client's model a question (sampling) and returns its answer."},
		func(ctx context.Context, req *mcp.Request, in AskIn) (string, error) {
			res, err := req.Sample(ctx, &mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent(in.Question)}}},
				MaxTokens: 200,
			})
			if err != nil {
				return "", err
			}
			return res.Text(), nil
		})
	mcp.AddTool(s, mcp.Tool{Name: "countdown", Description: "Counts down to zero, reporting each step as progress."},
		func(ctx context.Context, req *mcp.Request, in CountdownIn) (string, error) {
			if in.From < 1 || in.From > 100 {
				return "", errors.New("from must be between 1 and 100")
			}
			delay := time.Duration(min(max(in.DelayMs, 0), 1000)) * time.Millisecond
			for i := range in.From {
				if err := req.Progress(ctx, float64(i+1), float64(in.From), fmt.Sprint(in.From-i)); err != nil {
					return "", err
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(delay):
				}
			}
			return "liftoff", nil
		})
	s.AddResource(mcp.Resource{URI: "example://readme", Name: "readme", Title: "About this server", MimeType: "text/markdown"},
		func(ctx context.Context, req *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/markdown",
				Text: "# Example node\n\n`ask` puts a question to your model; `countdown` reports progress.\n"}}}, nil
		})
	s.AddPrompt(mcp.Prompt{Name: "explain", Description: "Asks for a short explanation of a topic.",
		Arguments: []mcp.PromptArgument{{Name: "topic", Description: "what to explain", Required: true}}},
		func(ctx context.Context, req *mcp.Request, args map[string]string) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				{Role: "user", Content: mcp.TextContent("Explain " + args["topic"] + " in one paragraph.")}}}, nil
		})
}

func main() {
	stdio := flag.Bool("stdio", false, "serve one client over stdin and stdout instead of HTTP")
	addr := flag.String("addr", "127.0.0.1:8080", "listen address of /mcp, /healthz and /readyz")
	metricsAddr := flag.String("metrics-addr", "127.0.0.1:7979", "listen address of /metrics")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, log, *stdio, *addr, *metricsAddr); err != nil {
		log.Error("node stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, stdio bool, addr, metricsAddr string) error {
	keys, err := stateKeys()
	if err != nil {
		return err
	}
	s := mcp.NewServer(mcp.Implementation{Name: "example-node", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions: "Ask questions with ask; watch progress with countdown.",
		Logger:       log,
		StateKeys:    keys,
	})
	register(s)
	if stdio {
		if err := s.ServeStdio(ctx, os.Stdin, os.Stdout, nil); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	return serveHTTP(ctx, log, s, addr, metricsAddr)
}

// stateKeys reads MCP_STATE_KEY. A request that asks the client for input
// on 2026-07-28 carries its state sealed with this key, and its retry may
// land on any node: every node needs the same key. NewHTTPHandler refuses
// a shared backend without one (mcp.ErrNoStateKeys).
func stateKeys() ([][]byte, error) {
	v := os.Getenv("MCP_STATE_KEY")
	if v == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) != 32 {
		return nil, errors.New("MCP_STATE_KEY: want 64 hex digits (32 random bytes)")
	}
	return [][]byte{key}, nil
}

func serveHTTP(ctx context.Context, log *slog.Logger, s *mcp.Server, addr, metricsAddr string) error {
	backend := mcp.NewMemoryBackend()
	if url := os.Getenv("MCP_REDIS_URL"); url != "" {
		var err error
		if backend, err = redisbackend.Open(ctx, url, &redisbackend.Options{Logger: log}); err != nil {
			return err // errors.Is(err, mcp.ErrBackendUnavailable): Redis is not up (yet)
		}
	}
	defer backend.Close()
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{
		Backend:        backend,
		Logger:         log,
		TrustedProxies: strings.FieldsFunc(os.Getenv("MCP_TRUSTED_PROXIES"), func(r rune) bool { return r == ',' }),
	})
	if err != nil {
		return err
	}
	defer h.Close()

	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := h.Ready(ctx); err != nil { // draining, or Redis not answering
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	metrics := http.NewServeMux()
	metrics.Handle("GET /metrics", h.MetricsHandler())

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mln, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		_ = ln.Close()
		return err
	}
	// No ReadTimeout or WriteTimeout: they would cut SSE streams. The
	// handler bounds body reads itself (HTTPOptions.BodyReadTimeout).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	msrv := &http.Server{Handler: metrics, ReadHeaderTimeout: 10 * time.Second}
	defer msrv.Close()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() { errc <- msrv.Serve(mln) }()
	log.Info("serving", "mcp", "http://"+ln.Addr().String()+"/mcp", "metrics", "http://"+mln.Addr().String()+"/metrics",
		"node", h.NodeID(), "backend", backend.Name())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Drain: the listener closes, so a balancer's next connection is
	// refused and it tries another node (nothing was sent, so even a POST
	// is safe to retry); /readyz fails; open streams get a retry hint and
	// close, and their clients resume on other nodes; running calls get
	// until the deadline to finish. Behind a balancer that follows /readyz,
	// wait for it to notice before closing the listener.
	log.Info("draining")
	dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shut := make(chan struct{})
	go func() { _ = srv.Shutdown(dctx); close(shut) }()
	h.Drain(dctx)
	<-shut
	log.Info("stopped")
	return nil
}
