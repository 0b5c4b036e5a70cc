package redisbackend_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// connectedClients is the server's connected_clients, read by probe.
func connectedClients(t *testing.T, probe *redis.Client) string {
	t.Helper()
	info, err := probe.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			return v
		}
	}
	t.Fatalf("no connected_clients in INFO clients:\n%s", info)
	return ""
}

// A backend made by New serves a node on the caller's client and leaves
// the client open when it closes: the caller owns it.
func TestNewLeavesTheClientToItsOwner(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer client.Close()
	be, err := redisbackend.New(ctx, client, &redisbackend.Options{Prefix: "own"})
	if err != nil {
		t.Fatal(err)
	}
	if be.Name() != "redis" {
		t.Fatalf("Name() = %q, want redis", be.Name())
	}
	// A shared backend needs the cluster's state keys: without them the
	// node is refused, naming the field.
	bare := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	if h, err := bare.NewHTTPHandler(&mcp.HTTPOptions{Backend: be}); !errors.Is(err, mcp.ErrNoStateKeys) || !strings.Contains(err.Error(), "StateKeys") {
		if h != nil {
			h.Close()
		}
		t.Fatalf("a node on Redis without state keys: %v, want ErrNoStateKeys", err)
	}
	s := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{StateKeys: [][]byte{make([]byte, 32)}})
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("node on a caller's client not ready: %v", err)
	}
	h.Close()
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("the caller's client after the backend closed: %v", err)
	}
}

// A backend made by Open owns the client it made: closing the backend
// closes the client's connections.
func TestOpenClosesItsClient(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	probe := redis.NewClient(&redis.Options{Addr: rs.Addr(), PoolSize: 1})
	defer probe.Close()
	before := connectedClients(t, probe)
	be, err := redisbackend.Open(ctx, rs.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := connectedClients(t, probe); got == before {
		t.Fatalf("connected_clients stayed %s with the backend open", got)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for connectedClients(t, probe) != before {
		if time.Now().After(deadline) {
			t.Fatalf("connected_clients %s after Close, want %s: the backend left its client open", connectedClients(t, probe), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An unreachable Redis is an error worth retrying; a bad URL or a nil
// client is not.
func TestConstructorErrors(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	if _, err := redisbackend.New(ctx, client, nil); !errors.Is(err, mcp.ErrBackendUnavailable) {
		t.Errorf("New on an unreachable Redis: %v, want ErrBackendUnavailable", err)
	}
	if _, err := redisbackend.Open(ctx, "redis://"+addr, nil); !errors.Is(err, mcp.ErrBackendUnavailable) {
		t.Errorf("Open on an unreachable Redis: %v, want ErrBackendUnavailable", err)
	}
	for _, url := range []string{"", "http://127.0.0.1:6379", "redis-sentinel://127.0.0.1:26379"} {
		if _, err := redisbackend.Open(ctx, url, nil); err == nil || errors.Is(err, mcp.ErrBackendUnavailable) {
			t.Errorf("Open(%q): %v, want a configuration error", url, err)
		}
	}
	if _, err := redisbackend.New(ctx, nil, nil); err == nil || errors.Is(err, mcp.ErrBackendUnavailable) {
		t.Errorf("New with a nil client: %v, want a configuration error", err)
	}
}

// Open traces Redis commands without their arguments (a session's
// commands carry its id, a bearer credential, and its data) and without
// the caller's file and line, which cost a stack walk per command.
func TestOpenTracesCommandsWithoutArguments(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	rs := redistest.Start(t)
	be, err := redisbackend.Open(context.Background(), rs.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no Redis command was traced")
	}
	for _, s := range spans {
		for _, a := range s.Attributes() {
			if k := string(a.Key); k == "db.statement" || k == "db.query.text" || strings.HasPrefix(k, "code.") {
				t.Errorf("span %q has %s = %q", s.Name(), k, a.Value.String())
			}
		}
	}
}

// Open with no tracer provider installed adds no hook to its client: a
// span per command through OpenTelemetry's default provider costs
// allocations on every command for nothing recorded. A provider set
// after Open thus sees no Redis span. It runs in a process of its own:
// once any test has installed a provider, the default one delegates to
// it for the rest of the process.
func TestOpenWithoutTracerAddsNoHook(t *testing.T) {
	if !inFreshProcess(t) {
		return
	}
	rs := redistest.Start(t)
	ctx := context.Background()
	be, err := redisbackend.Open(ctx, rs.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{StateKeys: [][]byte{make([]byte, 32)}})
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	h.Close()
	for _, sp := range exp.GetSpans() {
		for _, a := range sp.Attributes {
			if a.Key == "db.system" || a.Key == "db.system.name" {
				t.Fatalf("Redis command traced without a tracer at Open: span %q", sp.Name)
			}
		}
	}
}

// inFreshProcess runs t alone in a new process of the test binary, with
// OpenTelemetry's globals as a program starts with them. It reports
// whether the caller is that process (and should go on).
func inFreshProcess(t *testing.T) bool {
	t.Helper()
	const env = "REDISBACKEND_FRESH_PROCESS"
	if os.Getenv(env) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a process of its own: %v\n%s", err, out)
	}
	return false
}
