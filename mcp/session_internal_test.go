package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Sessions as they are found in the store: written by the release before
// the versioned codec (still served), by a newer release (503: another
// node may read it) or damaged (500), each answered with a JSON-RPC error
// body for the request.
func TestStoredSessionRecords(t *testing.T) {
	s := NewServer(Implementation{Name: "t", Version: "1"}, nil)
	h, err := s.NewHTTPHandler(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	format1 := func(edit func(map[string]string)) map[string]string {
		f := map[string]string{"v": "2025-06-18", "caps": `{"sampling":{}}`, "info": `{"name":"old","version":"1"}`, "c": "2026-11-21T10:00:00Z", "p": "", "lvl": "info"}
		if edit != nil {
			edit(f)
		}
		return f
	}
	for _, c := range []struct {
		name   string
		fields map[string]string
		status int
		code   int64 // 0: a result
	}{
		{"format 1", format1(nil), http.StatusOK, 0},
		{"newer format", format1(func(f map[string]string) { f["f"] = "3" }), http.StatusServiceUnavailable, jsonrpc.CodeUnavailable},
		{"caps not JSON", format1(func(f map[string]string) { f["caps"] = `{"sampling":` }), http.StatusInternalServerError, jsonrpc.CodeInternalError},
		{"caps of the wrong shape", format1(func(f map[string]string) { f["caps"] = `{"roots":5}` }), http.StatusInternalServerError, jsonrpc.CodeInternalError},
		{"unknown log level", format1(func(f map[string]string) { f["lvl"] = "loud" }), http.StatusInternalServerError, jsonrpc.CodeInternalError},
	} {
		t.Run(c.name, func(t *testing.T) {
			sid := newSessionID()
			if err := h.opts.Backend.b.Sessions.Create(t.Context(), sid, c.fields, time.Minute, 0, cluster.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(headerSession, sid)
			req.Header.Set(headerVersion, Version20250618)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("status: got %d, want %d (%s)", rec.Code, c.status, rec.Body)
			}
			var resp struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			switch {
			case c.code == 0 && (resp.Error != nil || resp.Result == nil):
				t.Fatalf("got %s, want a result", rec.Body)
			case c.code != 0 && (resp.Error == nil || resp.Error.Code != c.code):
				t.Fatalf("got %s, want error code %d", rec.Body, c.code)
			case string(resp.ID) != "7":
				t.Fatalf("got id %s, want 7", resp.ID)
			}
		})
	}
}
