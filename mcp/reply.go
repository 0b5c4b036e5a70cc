package mcp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// resolveReply routes a reply that the caller of ctx posted on session
// sid, which loadSession found bound to that caller (see
// coordinator.Node.RouteReply). It returns nil when the reply was
// settled or received by its owner (or its id is not one this cluster
// minted: such replies are ignored), or the HTTP status and error to
// answer with: 503 while the owner holds its lease but cannot be
// reached, 410 when it is gone.
func (h *HTTPHandler) resolveReply(ctx context.Context, sid string, msg *jsonrpc.Message) (int, error) {
	err := h.node.RouteReply(ctx, sid, PrincipalFromContext(ctx).ID(), msg)
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, coordinator.ErrOwnerUnreachable):
		return http.StatusServiceUnavailable, err
	case errors.Is(err, coordinator.ErrOwnerGone) && errors.As(err, &je):
		return http.StatusGone, je
	}
	return statusOf(err, false), rpcError(err)
}

// writeReplyError answers a reply that could not be delivered; a 503
// tells the client when to send it again.
func (h *HTTPHandler) writeReplyError(w http.ResponseWriter, status int, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(h.opts.RetryHint.Seconds(), 1)))))
	}
	writeError(w, status, jsonrpc.ID{}, err)
}
