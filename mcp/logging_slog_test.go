package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// A program that logs with log/slog gets every line of the server, the
// HTTP handler and a handler's Request.Logger through its own handler,
// each line a JSON object with no key twice.
func TestSlogLinesHaveNoRepeatedKeys(t *testing.T) {
	var buf mcptest.LogBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := newNode(t, &nodeOptions{
		Server: mcp.ServerOptions{Logger: log},
		HTTP:   mcp.HTTPOptions{NodeID: "n1", Logger: log},
		Setup: func(s *mcp.Server) {
			mcp.AddTool(s, mcp.Tool{Name: "logs"}, func(_ context.Context, req *mcp.Request, _ struct{}) (string, error) {
				req.Logger().Info("from the handler", "answer", 42)
				return "ok", nil
			})
		},
	})
	c := session(t, n.url, mcp.Version20251125, nil)
	if resp := post(t, c, n.url, "tools/call", map[string]any{"name": "logs", "arguments": map[string]any{}}, nil); resp.Status != http.StatusOK {
		t.Fatalf("tools/call: %d", resp.Status)
	}
	var stdout strings.Builder
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"logs","arguments":{},` + stdioModernMeta + `}}` + "\n"
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: log})
	mcp.AddTool(srv, mcp.Tool{Name: "logs"}, func(_ context.Context, req *mcp.Request, _ struct{}) (string, error) {
		req.Logger().Info("from the handler", "answer", 42)
		return "ok", nil
	})
	if err := srv.ServeStdio(context.Background(), strings.NewReader(in), &stdout, nil); err != nil {
		t.Fatal(err)
	}

	var handler, access int
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(buf.String())), []byte("\n")) {
		if dup := repeatedKeys(t, line); len(dup) > 0 {
			t.Errorf("keys %v repeated in %s", dup, line)
		}
		var m map[string]any
		_ = json.Unmarshal(line, &m)
		switch m["msg"] {
		case "from the handler":
			handler++
			if m["answer"] != float64(42) {
				t.Errorf("the handler's line lost its attribute: %s", line)
			}
		case "request":
			access++
			if m["node"] != "n1" || m["level"] != "INFO" {
				t.Errorf("access line %s: want node n1 at INFO", line)
			}
		}
	}
	if handler != 2 || access == 0 {
		t.Fatalf("%d lines of the handler (want 2: HTTP and stdio), %d access lines, in:\n%s", handler, access, buf.String())
	}
}

// repeatedKeys returns the keys an object of the JSON line (or one
// nested in it) has more than once.
func repeatedKeys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	var dup []string
	var walk func() // reads one value
	walk = func() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("not JSON: %s (%v)", line, err)
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				key, _ := k.(string)
				if seen[key] {
					dup = append(dup, key)
				}
				seen[key] = true
				walk()
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				walk()
			}
			_, _ = dec.Token()
		}
	}
	walk()
	return dup
}
