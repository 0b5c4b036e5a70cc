package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// logSink collects the JSON lines of a logger.
type logSink struct{ mcptest.LogBuffer }

func (s *logSink) lines(t testing.TB) []map[string]any { return s.JSONLines(t) }

func (s *logSink) logger() *zerolog.Logger {
	l := zerolog.New(s).Level(zerolog.DebugLevel)
	return &l
}

// Every request gets one access line at info with the HTTP and MCP
// methods, the status, the duration in milliseconds, the node and the
// request id; a session shows only as a short hash, never in clear; the
// access lines can be turned off.
func TestAccessLog(t *testing.T) {
	for _, off := range []bool{false, true} {
		var sink logSink
		n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{NodeID: "n1", Zerolog: sink.logger(), NoAccessLog: off}})
		c := session(t, n.url, mcp.Version20251125, nil)
		resp := post(t, c, n.url, "tools/list", map[string]any{}, header("X-Request-Id", "rid-42"))
		if resp.Status != http.StatusOK {
			t.Fatalf("tools/list: %d", resp.Status)
		}
		if strings.Contains(sink.String(), c.Session) {
			t.Fatalf("the session id appears in clear in the log:\n%s", sink.String())
		}
		var access []map[string]any
		for _, m := range sink.lines(t) {
			if m["message"] == "request" {
				access = append(access, m)
			}
		}
		if off {
			if len(access) != 0 {
				t.Fatalf("NoAccessLog: %d access lines logged", len(access))
			}
			continue
		}
		if len(access) != 3 {
			t.Fatalf("got %d access lines for 3 requests (initialize, initialized, tools/list):\n%s", len(access), sink.String())
		}
		if access[1]["mcp_method"] != "notifications/initialized" {
			t.Errorf("a notification's line has mcp_method %v", access[1]["mcp_method"])
		}
		m := access[2]
		want := map[string]any{"level": "info", "node": "n1", "request_id": "rid-42", "http_method": "POST", "mcp_method": "tools/list", "status": float64(200)}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("access line field %s = %v, want %v (line %v)", k, m[k], v, m)
			}
		}
		if d, ok := m["duration_ms"].(float64); !ok || d < 0 || d > 10000 {
			t.Errorf("access line duration_ms = %v, want a number of milliseconds", m["duration_ms"])
		}
		if _, ok := m["duration"]; ok {
			t.Error("access line has a duration without its unit")
		}
		if s, _ := m["session"].(string); !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(s) {
			t.Errorf("access line session = %q, want a 12-hex-digit tag", s)
		}
		if access[0]["session"] != nil {
			t.Errorf("initialize carries no session header, yet its line has session %v", access[0]["session"])
		}
	}
}

// The Redis backend's own warnings and go-redis's messages reach the
// logger given in redisbackend.Options as JSON lines.
func TestRedisBackendLogs(t *testing.T) {
	rs := redistest.Start(t)
	var sink logSink
	be, err := redisbackend.Open(context.Background(), rs.URL(), &redisbackend.Options{Zerolog: sink.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	// The backend's pub/sub connection is up; losing Redis is logged.
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{StateKeys: testStateKeys})
	h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rs.Kill()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var backend, client bool
		for _, m := range sink.lines(t) {
			backend = backend || m["component"] == "cluster.redis" && m["level"] == "warn"
			client = client || m["component"] == "go-redis"
		}
		if backend && client {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis died: backend warning %v, go-redis message %v; log:\n%s", backend, client, sink.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A batch's access line names its methods, however its requests run.
func TestAccessLogBatch(t *testing.T) {
	var sink logSink
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Zerolog: sink.logger()}})
	c := session(t, n.url, mcp.Version20250326, nil)
	batch := `[{"jsonrpc":"2.0","id":11,"method":"ping"},{"jsonrpc":"2.0","id":12,"method":"tools/list"},{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}]`
	resp, err := c.PostRaw(context.Background(), n.url, []byte(batch), nil, nil)
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("batch: %v %v", err, resp)
	}
	var got []string
	for _, m := range sink.lines(t) {
		if m["message"] == "request" && m["http_method"] == "POST" {
			got = append(got, m["mcp_method"].(string))
		}
	}
	if len(got) != 3 || got[2] != "ping,tools/list,tools/call" {
		t.Fatalf("access lines name %q, want initialize, notifications/initialized and the batch's methods", got)
	}
}

// A node whose anonymous requests name a client in X-Forwarded-For but
// come from a peer it does not trust (a proxy left out of
// TrustedProxies) warns once, naming --trusted-proxies: every client
// behind that proxy shares one caller's limits. Trusting the peer, or
// requests without the header, give no warning.
func TestUntrustedProxyWarnsOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		trusted []string
		xff     bool
		warn    int
	}{
		{"untrusted proxy", nil, true, 1},
		{"trusted proxy", []string{"127.0.0.1", "::1"}, true, 0},
		{"no proxy", nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sink logSink
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Zerolog: sink.logger(), TrustedProxies: c.trusted, NoAccessLog: true}})
			cl := session(t, n.url, mcp.Version20251125, nil)
			for i := range 5 {
				mod := header()
				if c.xff {
					mod = header("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
				}
				if resp := post(t, cl, n.url, "tools/list", map[string]any{}, mod); resp.Status != http.StatusOK {
					t.Fatalf("tools/list: %d", resp.Status)
				}
			}
			warned := 0
			for _, m := range sink.lines(t) {
				if msg, _ := m["message"].(string); strings.Contains(msg, "--trusted-proxies") {
					warned++
				}
			}
			if warned != c.warn {
				t.Errorf("%d warnings naming --trusted-proxies, want %d:\n%s", warned, c.warn, sink.String())
			}
		})
	}
}
