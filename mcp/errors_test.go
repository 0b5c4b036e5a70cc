package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// A tool handler returns a protocol error through the public API: a
// *mcp.Error, wrapped or not, reaches the client as that JSON-RPC error
// (code, message, data) rather than as an isError result; errors.As and
// errors.Is by code work on the errors the package returns.
func TestPublicProtocolError(t *testing.T) {
	n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) {
		mcp.AddTool(s, mcp.Tool{Name: "refuse"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
			return "", fmt.Errorf("refusing: %w", mcp.NewError(mcp.CodeInvalidParams, "no such account", map[string]any{"field": "account"}))
		})
	}})
	c := mcptest.New(t, n.url)
	resp := postModern(t, c, n.url, "tools/call", toolCall("refuse", nil, false), nil)
	e := wantRPCError(t, resp, http.StatusOK, mcp.CodeInvalidParams)
	if e.Message != "no such account" || string(e.Data) != `{"field":"account"}` {
		t.Fatalf("got error %q data %s, want the handler's message and data", e.Message, e.Data)
	}

	var pe *mcp.Error
	if err := fmt.Errorf("wrapped: %w", mcp.UnsupportedVersionError("1999-01-01")); !errors.As(err, &pe) || pe.Code != mcp.CodeUnsupportedProtocolVersion {
		t.Fatalf("errors.As on UnsupportedVersionError: %v", err)
	}
	var data struct{ Supported []string }
	if err := json.Unmarshal(pe.Data, &data); err != nil || len(data.Supported) != len(mcp.SupportedVersions) {
		t.Fatalf("data %s does not list the supported versions", pe.Data)
	}
	if !errors.Is(fmt.Errorf("x: %w", mcp.NewError(mcp.CodeResourceNotFound, "gone", nil)), mcp.ErrResourceNotFound) {
		t.Fatal("errors.Is does not match ErrResourceNotFound by code")
	}
	if errors.Is(mcp.NewError(mcp.CodeInvalidParams, "x", nil), mcp.ErrResourceNotFound) {
		t.Fatal("errors.Is matches a different code")
	}
}
