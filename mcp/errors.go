package mcp

import (
	"errors"
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Error is a JSON-RPC error object: a protocol error of the request being
// served. It has three fields:
//
//	Code    int64           // the JSON-RPC error code (see the Code constants)
//	Message string          // a short description for the client
//	Data    json.RawMessage // optional structured detail (nil for none)
//
// A handler (tool, prompt, resource) that returns a *Error, possibly
// wrapped with fmt.Errorf("...: %w", err), answers the request with that
// JSON-RPC error instead of a result; a typed tool does not turn it into
// an isError result. Any other error a handler returns reaches the client
// as an isError tool result or an internal error without its text.
//
// errors.As(err, &e) with e of type *Error finds it in a chain, and
// errors.Is compares codes: errors.Is(err, &Error{Code: CodeInvalidParams})
// holds for any error with that code, also one decoded from the wire.
// Build one with NewError.
type Error = jsonrpc.Error

// JSON-RPC error codes: the standard ones and those MCP defines.
const (
	// The codes of JSON-RPC 2.0.
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeResourceNotFound is resources/read's not-found code up to
	// 2025-11-25 (2026-07-28 uses CodeInvalidParams); return
	// ErrResourceNotFound to get the right one for the request.
	CodeResourceNotFound = -32002
	// CodeURLElicitationRequired (2025-11-25); see URLElicitationRequired.
	CodeURLElicitationRequired = -32042
	// CodeHeaderMismatch (2026-07-28): HTTP headers disagree with the body.
	CodeHeaderMismatch = -32020
	// CodeMissingClientCapability (2026-07-28): data.requiredCapabilities.
	CodeMissingClientCapability = -32021
	// CodeUnsupportedProtocolVersion (2026-07-28): data.supported and
	// data.requested.
	CodeUnsupportedProtocolVersion = -32022

	// The cluster's codes: what a client sees when shared state or a
	// node fails (see "What a client sees when a node dies" in the
	// package documentation). Each is worth a retry.

	// CodeUnavailable: the shared state (Redis) could not be reached, a
	// stream's event could not be recorded, or the bus between nodes is
	// reconnecting; retry the request (HTTP 503 carries Retry-After).
	CodeUnavailable = -31000
	// CodeRequestTimeout: a server→client request (sampling,
	// elicitation, roots, ping) got no reply in time.
	CodeRequestTimeout = -31001
	// CodeConnectionClosed: the connection a request depended on went
	// away and nothing resumed it.
	CodeConnectionClosed = -31002
	// CodeNodeLost: the node running the request stopped before its
	// response was recorded; data.node names it. The request did not
	// complete there: retry it (a task-augmented call survives instead).
	CodeNodeLost = -31003
	// CodeCancelled: the request was cancelled (by the client, or as its
	// session ended).
	CodeCancelled = -31004
	// CodeDraining: the node is shutting down; send the request again,
	// the balancer picks another node.
	CodeDraining = -31005
)

// ErrNoStateKeys is NewHTTPHandler's error for a shared backend (not the
// in-memory one) with no ServerOptions.StateKeys: a 2026-07-28 request
// that asks the client for input is retried on any node, which must be
// able to open the requestState this node sealed. Give every node the
// same keys (cmd/server: --state-key or --state-key-file).
var ErrNoStateKeys = errors.New("mcp: ServerOptions.StateKeys is empty but the backend is shared: every node of a cluster needs the same state keys")

// IsRetryable reports whether err (a handler's, or one a client decoded
// from a response) is one of the cluster's codes that a client should
// answer by sending the request again: CodeUnavailable, CodeNodeLost or
// CodeDraining.
func IsRetryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeUnavailable, CodeNodeLost, CodeDraining:
		return true
	}
	return false
}

// NewError returns a protocol error. data, when not nil, is marshalled to
// JSON into the data member (a json.RawMessage is used as is).
func NewError(code int64, message string, data any) *Error {
	return jsonrpc.NewError(code, message, data)
}

// ErrResourceNotFound, returned (possibly wrapped) by a resource handler,
// becomes the revision's resource-not-found error: CodeResourceNotFound
// up to 2025-11-25, CodeInvalidParams on 2026-07-28, with data.uri.
var ErrResourceNotFound = &Error{Code: CodeResourceNotFound, Message: "resource not found"}

// UnsupportedVersionError is the CodeUnsupportedProtocolVersion error for
// a revision the server does not implement, listing the supported ones in
// data.supported.
func UnsupportedVersionError(requested string) *Error {
	return unsupportedVersion(requested, SupportedVersions)
}

// unsupportedVersion names the revisions supported where the request was
// made: a per-request (stateless) request lists only ModernVersions, so a
// session revision sent per request is explained rather than listed.
func unsupportedVersion(requested string, supported []string) *Error {
	msg := fmt.Sprintf("unsupported protocol version %q", requested)
	if IsSupportedVersion(requested) {
		msg = fmt.Sprintf("protocol version %q is served on sessions (send initialize), not per request", requested)
	}
	return NewError(CodeUnsupportedProtocolVersion, msg,
		map[string]any{"supported": supported, "requested": requested})
}
