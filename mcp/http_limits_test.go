package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// The endpoint's limits, on every revision: a body over MaxBodyBytes gets
// 413, a method other than POST/GET/DELETE 405 with Allow, a
// Content-Type other than application/json 415, malformed JSON 400 with
// -32700 and a JSON value that is not a message 400 with -32600; every
// one with a JSON-RPC error body.
func TestLimits(t *testing.T) {
	const maxBody = 2048
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxBodyBytes: maxBody}})
	for _, v := range mcp.SupportedVersions {
		t.Run(v, func(t *testing.T) {
			c := mcptest.New(t, n.url)
			var mod func(*http.Request)
			if v == mcp.Version20260728 {
				mod = mcptest.ModernHeaders("tools/call", "echo")
			} else {
				c.Initialize(v, nil)
			}
			params := toolCall("echo", map[string]any{"text": "x"}, false)
			if v == mcp.Version20260728 {
				params = modernParams(params, nil)
			}
			good, _ := encodeRequest(t, c, "tools/call", params)
			bigParams := toolCall("echo", map[string]any{"text": strings.Repeat("a", maxBody)}, false)
			if v == mcp.Version20260728 {
				bigParams = modernParams(bigParams, nil)
			}
			big, _ := encodeRequest(t, c, "tools/call", bigParams)
			cases := []struct {
				name   string
				method string
				body   []byte
				mod    func(*http.Request)
				status int
				code   int64
				allow  bool
			}{
				{"ok", http.MethodPost, good, nil, http.StatusOK, 0, false},
				{"ok charset", http.MethodPost, good, header("Content-Type", "application/json; charset=utf-8"), http.StatusOK, 0, false},
				{"too large", http.MethodPost, big, nil, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, false},
				{"PUT", http.MethodPut, good, nil, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, true},
				{"PATCH", http.MethodPatch, good, nil, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, true},
				{"no content type", http.MethodPost, good, header("Content-Type", ""), http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, false},
				{"text/plain", http.MethodPost, good, header("Content-Type", "text/plain"), http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, false},
				{"form", http.MethodPost, good, header("Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, false},
				{"malformed JSON", http.MethodPost, []byte(`{"jsonrpc":"2.0","id":1,`), nil, http.StatusBadRequest, jsonrpc.CodeParseError, false},
				{"not a message", http.MethodPost, []byte(`{"hello":"world"}`), nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, false},
				{"empty", http.MethodPost, []byte{}, nil, http.StatusBadRequest, jsonrpc.CodeParseError, false},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, err := c.Raw(context.Background(), tc.method, n.url, tc.body, chain(mod, tc.mod))
					if err != nil {
						t.Fatal(err)
					}
					if tc.status == http.StatusOK {
						if got := resultText(t, resp); got != "x" {
							t.Fatalf("got %q", got)
						}
						return
					}
					wantRPCError(t, resp, tc.status, tc.code)
					if tc.allow && resp.Header.Get("Allow") != "GET, POST, DELETE" {
						t.Fatalf("got Allow %q, want GET, POST, DELETE", resp.Header.Get("Allow"))
					}
				})
			}
		})
	}
}
