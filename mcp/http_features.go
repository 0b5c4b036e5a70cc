package mcp

import "context"

// The enabled state of features as cluster state (see Server.SetEnabled
// and coordinator.Node.SwapFeature): the node reloads it into the server
// on a change, after a bus reconnect and on every heartbeat.

// swapFeature records the state and, when it changed, tells every node.
func (h *HTTPHandler) swapFeature(ctx context.Context, key string, on, unset bool) (bool, error) {
	was, err := h.node.Features.Swap(ctx, key, on, unset)
	return was, rpcError(err)
}

// toggleFeature flips the state and tells every node.
func (h *HTTPHandler) toggleFeature(ctx context.Context, key string, unset bool) (bool, error) {
	on, err := h.node.Features.Toggle(ctx, key, unset)
	return on, rpcError(err)
}

// loadFeatures reads the shared state into the server.
func (h *HTTPHandler) loadFeatures(ctx context.Context) {
	all, err := h.node.Features.All(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("loading the enabled state of features failed")
		}
		return
	}
	h.srv.setSharedFeatures(all)
}
