package redisbackend_test

import (
	"context"
	"errors"
	"net"
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
