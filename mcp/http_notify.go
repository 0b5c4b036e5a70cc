package mcp

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The cluster work of the HTTP transport is internal/coordinator's Node
// (h.node): this file hands it the server's list_changed and
// resources/updated notifications, and answers readiness from it.

func (h *HTTPHandler) listChanged(_ context.Context, method string) {
	h.fanOut(method, "")
}

func (h *HTTPHandler) resourceUpdated(_ context.Context, uri string) {
	h.fanOut("notifications/resources/updated", uri)
}

// fanOut sends a list_changed or resources/updated notification to the
// sessions and listen streams of the whole cluster (see Node.FanOut).
func (h *HTTPHandler) fanOut(method, uri string) {
	data, _ := jsonrpc.Encode(plainNotification(method, uri))
	h.node.FanOut(method, uri, data)
}

// Ready reports whether the node should receive traffic: not draining,
// the bus up, and the shared store answering.
func (h *HTTPHandler) Ready(ctx context.Context) error { return h.node.Ready(ctx) }
