package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Standard JSON-RPC 2.0 error codes and the codes MCP defines.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeResourceNotFound is MCP's resource-not-found code up to 2025-11-25.
	CodeResourceNotFound = -32002
	// CodeURLElicitationRequired (2025-11-25 only).
	CodeURLElicitationRequired = -32042
	// CodeHeaderMismatch (2026-07-28): HTTP headers disagree with the body.
	CodeHeaderMismatch = -32020
	// CodeMissingClientCapability (2026-07-28): data.requiredCapabilities.
	CodeMissingClientCapability = -32021
	// CodeUnsupportedProtocolVersion (2026-07-28): data.{supported,requested}.
	CodeUnsupportedProtocolVersion = -32022

	// Implementation-defined codes. They sit outside the range the
	// 2026-07-28 allocation policy reserves for the spec.
	CodeUnavailable      = -31000 // shared state unreachable; retry later
	CodeRequestTimeout   = -31001 // a server→client request got no reply in time
	CodeConnectionClosed = -31002 // the channel a request depended on went away
	CodeNodeLost         = -31003 // the node running the request died
	CodeCancelled        = -31004 // the request was cancelled
	CodeDraining         = -31005 // the node is shutting down
)

// Error is a JSON-RPC error object. It implements error, and errors.Is
// compares codes, so a sentinel such as ErrMethodNotFound matches any
// error with the same code, also after the error crossed a process
// boundary and was decoded again.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// Is reports whether target is a *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && e != nil && t != nil && t.Code == e.Code
}

// Sentinels for errors.Is. Never mutate them; use NewError or Errorf to
// build errors to send.
var (
	ErrParse                      = &Error{Code: CodeParseError, Message: "parse error"}
	ErrInvalidRequest             = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrMethodNotFound             = &Error{Code: CodeMethodNotFound, Message: "method not found"}
	ErrInvalidParams              = &Error{Code: CodeInvalidParams, Message: "invalid params"}
	ErrInternal                   = &Error{Code: CodeInternalError, Message: "internal error"}
	ErrResourceNotFound           = &Error{Code: CodeResourceNotFound, Message: "resource not found"}
	ErrURLElicitationRequired     = &Error{Code: CodeURLElicitationRequired, Message: "URL elicitation required"}
	ErrHeaderMismatch             = &Error{Code: CodeHeaderMismatch, Message: "header mismatch"}
	ErrMissingClientCapability    = &Error{Code: CodeMissingClientCapability, Message: "missing required client capability"}
	ErrUnsupportedProtocolVersion = &Error{Code: CodeUnsupportedProtocolVersion, Message: "unsupported protocol version"}
	ErrUnavailable                = &Error{Code: CodeUnavailable, Message: "service unavailable"}
	ErrRequestTimeout             = &Error{Code: CodeRequestTimeout, Message: "request timed out"}
	ErrConnectionClosed           = &Error{Code: CodeConnectionClosed, Message: "connection closed"}
	ErrNodeLost                   = &Error{Code: CodeNodeLost, Message: "node lost"}
	ErrCancelled                  = &Error{Code: CodeCancelled, Message: "request cancelled"}
	ErrDraining                   = &Error{Code: CodeDraining, Message: "server is shutting down"}
)

// NewError builds an error with the given code and message. data, when
// not nil, is marshalled into the data member.
func NewError(code int64, message string, data any) *Error {
	e := &Error{Code: code, Message: message}
	if data != nil {
		if raw, ok := data.(json.RawMessage); ok {
			e.Data = raw
		} else if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// Errorf builds an error with a formatted message.
func Errorf(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError converts any error to a *Error, the form in which errors are
// sent: a *Error anywhere in the chain is returned (bounded, see
// Bounded); anything else becomes an internal error whose message does
// not leak details.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Bounded()
	}
	return &Error{Code: CodeInternalError, Message: "internal error"}
}

// Bounds of an error as sent: messages and data often quote the input,
// which may be megabytes long.
const (
	// MaxMessageBytes bounds Error.Message.
	MaxMessageBytes = 512
	// MaxDataBytes bounds the encoded Error.Data.
	MaxDataBytes = 2048
	// maxDataString bounds each string inside Data when it is shortened.
	maxDataString = 256
)

// Bounded returns e, or a copy of e whose message is cut to
// MaxMessageBytes and whose data is cut to MaxDataBytes: long strings in
// the data are shortened, and data still too long is replaced by
// {"truncated":true}. Shortened text ends with "…".
func (e *Error) Bounded() *Error {
	if e == nil || len(e.Message) <= MaxMessageBytes && len(e.Data) <= MaxDataBytes {
		return e
	}
	out := *e
	out.Message = Truncate(e.Message, MaxMessageBytes)
	if len(e.Data) > MaxDataBytes {
		out.Data = json.RawMessage(`{"truncated":true}`)
		var v any
		if json.Unmarshal(e.Data, &v) == nil {
			if b, err := json.Marshal(shorten(v)); err == nil && len(b) <= MaxDataBytes {
				out.Data = b
			}
		}
	}
	return &out
}

// Truncate cuts s to at most n bytes on a UTF-8 boundary, ending it with
// "…" when anything was cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// shorten cuts every string in a decoded JSON value to maxDataString.
func shorten(v any) any {
	switch x := v.(type) {
	case string:
		return Truncate(x, maxDataString)
	case map[string]any:
		for k, e := range x {
			x[k] = shorten(e)
		}
	case []any:
		for i, e := range x {
			x[i] = shorten(e)
		}
	}
	return v
}
