package mcp

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The node-wide operations of an HTTPHandler: requests and notifications
// sent to a session from any node, and the graceful shutdown.

// RequestOnSession sends a server→client request (ping, elicitation
// outside a request, ...) on the GET stream of session, from any node,
// and waits for the reply. It fails at once when no GET stream of the
// session is open, and promptly when the stream closes before the reply.
func (h *HTTPHandler) RequestOnSession(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	res, err := h.srv.send(ctx, &Request{sessionID: session}, method, params, func(ctx context.Context) (json.RawMessage, error) {
		// Only the session's own caller may answer.
		st, err := h.sessions.Load(ctx, session)
		if err != nil {
			return nil, err
		}
		return h.node.RequestOnGet(ctx, session, st.Principal, method, params, h.srv.opts.requestTimeout())
	})
	if errors.Is(err, coordinator.ErrNoGetStream) || isGone(err) {
		return nil, ErrNoChannel
	}
	return res, rpcError(err)
}

// Ping checks a session's client over its GET stream.
func (h *HTTPHandler) Ping(ctx context.Context, session string) error {
	_, err := h.RequestOnSession(ctx, session, "ping", nil)
	return err
}

// NotifySession pushes a notification onto one session's GET stream.
func (h *HTTPHandler) NotifySession(ctx context.Context, session, method string, params any) error {
	msg, err := jsonrpc.Notification(method, params)
	if err != nil {
		return err
	}
	data, _ := jsonrpc.Encode(msg)
	_, err = h.srv.send(ctx, &Request{sessionID: session}, method, msg.Params, func(ctx context.Context) (json.RawMessage, error) {
		return nil, h.node.AppendGet(ctx, session, data)
	})
	return rpcError(err)
}

// Drain starts a graceful shutdown: new work is refused, open streams get
// a retry hint and are closed so clients resume on other nodes,
// subscriptions/listen streams end with their result, and Drain waits
// until running requests finish or ctx ends.
func (h *HTTPHandler) Drain(ctx context.Context) {
	h.node.Drain(ctx)
	h.gets.wait(ctx, false)
}

// Draining reports whether Drain was called.
func (h *HTTPHandler) Draining() bool { return errors.Is(h.node.Refusal(), jsonrpc.ErrDraining) }
