package mcp

import "context"

// The enabled state of features as cluster state (see Server.SetEnabled
// and coordinator.Node.SetFeature): the node reloads it into the server
// on a change, after a bus reconnect and on every heartbeat.

// setFeature records the state and tells every node.
func (h *HTTPHandler) setFeature(ctx context.Context, key string, on bool) (bool, error) {
	changed, err := h.node.SetFeature(ctx, key, on)
	return changed, rpcError(err)
}

// loadFeatures reads the shared state into the server.
func (h *HTTPHandler) loadFeatures(ctx context.Context) {
	all, err := h.node.Features(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("loading the enabled state of features failed")
		}
		return
	}
	h.srv.setSharedFeatures(all)
}
