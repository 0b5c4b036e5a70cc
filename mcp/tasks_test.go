package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// taskNode serves task tools behind a middleware that makes the
// X-Test-Subject header the request's principal.
func taskNode(t *testing.T, opts mcp.HTTPOptions) string {
	t.Helper()
	s := mcp.NewServer(mcp.Implementation{Name: "tasks", Version: "1"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "block", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	mcp.AddTool(s, mcp.Tool{Name: "big", TaskSupport: mcp.TaskOptional}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		return strings.Repeat("x", 4096), nil
	})
	h, err := s.NewHTTPHandler(&opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sub := r.Header.Get("X-Test-Subject"); sub != "" {
			r = r.WithContext(mcp.WithPrincipal(r.Context(), &mcp.Principal{Issuer: "https://issuer", Subject: sub}))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// taskRPC sends a 2026-07-28 request of a client that negotiated tasks,
// as subject (none when empty), and returns the final message.
func taskRPC(t *testing.T, url, subject, method, name string, params map[string]any) *jsonrpc.Message {
	t.Helper()
	cl := mcptest.New(t, url)
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcp.ExtensionTasks: map[string]any{}}},
	}
	_, body := mcptest.Request(t, cl, method, params)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, body, func(r *http.Request) {
		mcptest.ModernHeaders(method, name)(r)
		if subject != "" {
			r.Header.Set("X-Test-Subject", subject)
		}
	}, nil)
	if err != nil || resp.Final() == nil {
		t.Fatalf("%s: %v %+v", method, err, resp)
	}
	return resp.Final()
}

func taskIDOf(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	var r struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || r.ResultType != "task" || len(r.TaskID) < 20 {
		t.Fatalf("want a CreateTaskResult with an unguessable id, got %s %v", m.Result, m.Error)
	}
	return r.TaskID
}

// A task answers only its principal: to any other, on every task method,
// it is exactly an unknown task.
func TestTaskBoundToPrincipal(t *testing.T) {
	url := taskNode(t, mcp.HTTPOptions{})
	id := taskIDOf(t, taskRPC(t, url, "alice", "tools/call", "block", map[string]any{"name": "block"}))
	if m := taskRPC(t, url, "alice", "tasks/get", id, map[string]any{"taskId": id}); m.Error != nil {
		t.Fatalf("alice's own task: %v", m.Error)
	}
	for _, who := range []string{"mallory", ""} {
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			params := map[string]any{"taskId": id}
			unknown := map[string]any{"taskId": "no-such-task"}
			if method == "tasks/update" {
				params["inputResponses"] = map[string]any{}
				unknown["inputResponses"] = map[string]any{}
			}
			got := taskRPC(t, url, who, method, id, params)
			want := taskRPC(t, url, who, method, "no-such-task", unknown)
			if got.Error == nil || want.Error == nil || got.Error.Code != jsonrpc.CodeInvalidParams ||
				got.Error.Message != want.Error.Message || string(got.Error.Data) != string(want.Error.Data) {
				t.Fatalf("%s by %q: got %v, want as unknown %v", method, who, got.Error, want.Error)
			}
		}
	}
	// The cancel by another principal did nothing.
	var r struct{ Status string }
	_ = json.Unmarshal(taskRPC(t, url, "alice", "tasks/get", id, map[string]any{"taskId": id}).Result, &r)
	if r.Status != "working" {
		t.Fatalf("after others' attempts: status %q", r.Status)
	}
	taskRPC(t, url, "alice", "tasks/cancel", id, map[string]any{"taskId": id})
}

// The bounds: live tasks per owner, the result size, the TTL range.
func TestTaskBounds(t *testing.T) {
	url := taskNode(t, mcp.HTTPOptions{MaxTasksPerOwner: 2, MaxTaskResultBytes: 1024, MaxTaskTTL: time.Hour})
	for range 2 {
		taskIDOf(t, taskRPC(t, url, "bob", "tools/call", "block", map[string]any{"name": "block"}))
	}
	m := taskRPC(t, url, "bob", "tools/call", "block", map[string]any{"name": "block"})
	if m.Error == nil || !strings.Contains(m.Error.Message, "at most 2") {
		t.Fatalf("third task of bob: %s %v, want the bound's error", m.Result, m.Error)
	}
	taskIDOf(t, taskRPC(t, url, "carol", "tools/call", "block", map[string]any{"name": "block"}))

	id := taskIDOf(t, taskRPC(t, url, "carol", "tools/call", "big", map[string]any{"name": "big"}))
	var r struct {
		Status string
		Error  *jsonrpc.Error
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Status != "failed" && time.Now().Before(deadline) {
		_ = json.Unmarshal(taskRPC(t, url, "carol", "tasks/get", id, map[string]any{"taskId": id}).Result, &r)
	}
	if r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "over the bound of 1024") {
		t.Fatalf("a result past the bound: %q %v", r.Status, r.Error)
	}

	m = taskRPC(t, url, "dave", "tools/call", "block", map[string]any{"name": "block", "task": map[string]any{"ttl": 2 * 3600 * 1000}})
	if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "at most 3600000 ms") {
		t.Fatalf("a TTL past the range: %v", m.Error)
	}
}
