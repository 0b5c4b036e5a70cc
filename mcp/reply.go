package mcp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// resolveReply runs a reply that the caller of ctx posted on session
// sess, which loadSession found bound to that caller, through the
// receiving middleware and routes it (see coordinator.Node.RouteReply).
// It returns nil when the reply was settled or received by its owner (or
// its id is not one this cluster minted: such replies are ignored, or a
// middleware dropped it), or the HTTP status and error to answer with:
// 503 while the owner holds its lease but cannot be reached, 410 when it
// is gone.
func (h *HTTPHandler) resolveReply(ctx context.Context, sess *session.Session, msg *jsonrpc.Message) (int, error) {
	var err error
	h.srv.receiveMessage(ctx, msg, sess, "", func(ctx context.Context) {
		err = h.node.RouteReply(ctx, sess.ID, PrincipalFromContext(ctx).ID(), msg)
	})
	if err == nil {
		return 0, nil
	}
	// The node's errors are JSON-RPC errors: -31000 while the owner
	// cannot be reached, -31003 when it is gone.
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		switch je.Code {
		case jsonrpc.CodeUnavailable:
			return http.StatusServiceUnavailable, je
		case jsonrpc.CodeNodeLost:
			return http.StatusGone, je
		}
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
