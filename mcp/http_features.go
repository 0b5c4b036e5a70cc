package mcp

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// The enabled state of features as cluster state (see Server.SetEnabled):
// the handler keeps it in the backend's Registry, tells every node with a
// "reg" bus message, and reloads it on that message, after a bus
// reconnect and on every heartbeat, so a lost message delays a node by
// one heartbeat at most.

// setFeature records the state and tells every node.
func (h *HTTPHandler) setFeature(ctx context.Context, key string, on bool) (bool, error) {
	changed, err := h.be.Registry.Set(ctx, key, on)
	if err != nil {
		return false, rpcError(err)
	}
	if changed {
		if err := h.node.Publish(ctx, coordinator.RegistryChanged{}); err != nil {
			h.log.Warn().Err(err).Msg("feature change not broadcast; nodes see it at their next heartbeat")
		}
	}
	return changed, nil
}

// loadFeatures reads the shared state into the server.
func (h *HTTPHandler) loadFeatures(ctx context.Context) {
	all, err := h.be.Registry.All(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("loading the enabled state of features failed")
		}
		return
	}
	h.srv.setSharedFeatures(all)
}
