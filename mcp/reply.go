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

// A client's reply to a server→client request may land on any node; the
// coordinator forwards it over the bus to the process that waits for it.
// The bus delivers only to connected subscribers, so a reply the waiting
// process did not receive (its bus connection is down during a failover
// or a network cut, or the process is gone) must not be accepted with
// 202: the handler would wait for it until its timeout while the client
// believes it answered.

// resolveReply routes a reply that arrived on session sid. It returns
// nil when the reply was settled here or received by its owner (or its
// id is not one this cluster minted: such replies are ignored), or the
// HTTP status and error to answer with.
func (h *HTTPHandler) resolveReply(ctx context.Context, sid string, msg *jsonrpc.Message) (int, error) {
	_, err := h.coord.Resolve(ctx, sid, msg)
	if err == nil {
		return 0, nil
	}
	if !errors.Is(err, coordinator.ErrUndelivered) {
		return statusOf(err, false), rpcError(err)
	}
	owner, _ := coordinator.Owner(msg.ID)
	alive, aerr := h.be.Members.Alive(ctx, owner)
	switch {
	case aerr != nil:
		return statusOf(aerr, false), rpcError(aerr)
	case alive:
		// The owner holds its lease, so it is running: its bus
		// connection is down, and comes back (or the lease lapses).
		h.log.Warn().Str("owner", owner).Msg("reply not received by its node: the client is asked to retry")
		return http.StatusServiceUnavailable, jsonrpc.NewError(jsonrpc.CodeUnavailable,
			"the node waiting for this reply cannot be reached right now; send it again shortly", nil)
	default:
		// The process that sent the request is gone (a node restarted with
		// the same id is another process): nothing waits for the reply,
		// and the request's stream ends with a node-lost error.
		return http.StatusGone, jsonrpc.NewError(jsonrpc.CodeNodeLost,
			"the node that sent this request stopped; the request is no longer pending",
			map[string]any{"node": coordinator.NodeOf(owner)})
	}
}

// writeReplyError answers a reply that could not be delivered; a 503
// tells the client when to send it again.
func (h *HTTPHandler) writeReplyError(w http.ResponseWriter, status int, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(h.opts.RetryHint.Seconds(), 1)))))
	}
	writeError(w, status, jsonrpc.ID{}, err)
}
