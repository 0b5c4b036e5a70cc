package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Start-up with a backend that is not there yet: the node listens at
// once (so /healthz answers and an orchestrator does not restart it),
// answers /readyz and the MCP endpoint with 503 while it retries with
// backoff, and serves once the backend answers. A pod whose Redis starts
// second becomes ready by itself instead of crash-looping.

// firstRetry is the wait after the first failed attempt; waits double up
// to --backend-retry-max.
const firstRetry = 100 * time.Millisecond

// attemptTimeout bounds one attempt to reach the backend.
const attemptTimeout = 5 * time.Second

// gate holds the MCP handler once the node is up.
type gate struct {
	h atomic.Pointer[mcp.HTTPHandler]
	// stopping is set on SIGTERM: /readyz fails from then on, while the
	// node still serves everything until --drain-delay has passed.
	stopping atomic.Bool
}

// serveMCP passes a request to the handler, or answers 503 with a
// JSON-RPC error while the node starts.
func (g *gate) serveMCP(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	writeStarting(w)
}

// ready answers /readyz.
func (g *gate) ready(w http.ResponseWriter, r *http.Request) {
	if g.stopping.Load() {
		http.Error(w, "not ready: stopping", http.StatusServiceUnavailable)
		return
	}
	h := g.h.Load()
	if h == nil {
		http.Error(w, "not ready: waiting for the backend", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.Ready(ctx); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// metrics answers /metrics.
func (g *gate) metrics(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		h.MetricsHandler().ServeHTTP(w, r)
		return
	}
	http.Error(w, "starting: waiting for the backend", http.StatusServiceUnavailable)
}

func writeStarting(w http.ResponseWriter) {
	b, _ := jsonrpc.Encode(jsonrpc.ErrorResponse(jsonrpc.ID{},
		jsonrpc.NewError(jsonrpc.CodeUnavailable, "the node is starting: its shared state is not reachable yet; retry later", nil)))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(b)
}

// awaitBackend opens the backend and the MCP handler, retrying while the
// backend is unreachable, until it succeeds, fails for good (a bad
// setting) or ctx ends. waiting runs once, after the first failure.
func awaitBackend(ctx context.Context, cfg *Config, log zerolog.Logger, open func(context.Context) (*mcp.Backend, *mcp.HTTPHandler, error), waiting func()) (*mcp.Backend, *mcp.HTTPHandler, error) {
	wait := firstRetry
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		be, h, err := open(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info().Int("attempts", attempt).Msg("backend reachable: serving")
			}
			return be, h, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !errors.Is(err, mcp.ErrBackendUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, err
		}
		if attempt == 1 {
			waiting()
		}
		// ±20% jitter, so that nodes started together do not retry in step.
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		log.Warn().Err(err).Int("attempt", attempt).Float64("retry_in_ms", telemetry.Ms(d)).Msg("backend unavailable: not ready, retrying")
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, cfg.BackendRetryMax)
	}
}
