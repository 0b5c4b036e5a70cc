package mcp

import (
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
)

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
