// Package jsonrpc implements JSON-RPC 2.0 framing as MCP uses it: requests,
// notifications, responses and errors; ids that are strings or integers;
// batches (only where the protocol revision allows them, which the caller
// decides); and error values that errors.Is can compare by code.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the only JSON-RPC version accepted.
const Version = "2.0"

// Kind classifies a message.
type Kind int

const (
	KindInvalid Kind = iota
	KindRequest
	KindNotification
	KindResponse
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is any JSON-RPC 2.0 message. Exactly one shape is valid at a
// time; Kind tells which.
type Message struct {
	ID     ID              // requests and responses
	Method string          // requests and notifications
	Params json.RawMessage // requests and notifications; may be nil
	Result json.RawMessage // successful responses
	Error  *Error          // error responses
}

// Kind reports which shape the message has.
func (m *Message) Kind() Kind {
	switch {
	case m.Method != "" && m.ID.IsValid():
		return KindRequest
	case m.Method != "":
		return KindNotification
	case m.ID.IsValid() || m.Error != nil:
		return KindResponse
	}
	return KindInvalid
}

// wire is the on-the-wire shape, used for both directions.
type wire struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   *Error           `json:"error,omitempty"`
}

// MarshalJSON encodes the message. A response with neither result nor
// error gets an empty result object. An error response whose id is
// unknown carries "id": null, as JSON-RPC requires.
func (m *Message) MarshalJSON() ([]byte, error) {
	w := wire{JSONRPC: Version, Method: m.Method, Params: m.Params, Result: m.Result, Error: m.Error}
	if m.ID.IsValid() || m.Method == "" {
		raw, _ := m.ID.MarshalJSON()
		rm := json.RawMessage(raw)
		w.ID = &rm
	}
	if m.Method == "" && m.Error == nil && m.Result == nil {
		w.Result = json.RawMessage("{}")
	}
	return json.Marshal(w)
}

// Request builds a request message. params is marshalled unless it is
// already a json.RawMessage or nil.
func Request(id ID, method string, params any) (*Message, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	return &Message{ID: id, Method: method, Params: p}, nil
}

// Notification builds a notification message.
func Notification(method string, params any) (*Message, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	return &Message{Method: method, Params: p}, nil
}

// Response builds a successful response.
func Response(id ID, result any) (*Message, error) {
	r, err := marshalParams(result)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = json.RawMessage("{}")
	}
	return &Message{ID: id, Result: r}, nil
}

// ErrorResponse builds an error response. id may be the zero ID (the
// request's id could not be read), which encodes as null.
func ErrorResponse(id ID, err error) *Message {
	return &Message{ID: id, Error: AsError(err)}
}

func marshalParams(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return json.RawMessage(p), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: marshal: %w", err)
	}
	return b, nil
}

// Encode marshals one message. It never fails for messages built by this
// package; a failure means a caller put invalid raw JSON into a field.
//
// MarshalJSON's output is already compact, valid and HTML-escaped (it
// comes from json.Marshal): Encode returns it as it is, where
// json.Marshal(m) would scan and copy every message once more.
func Encode(m *Message) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	return m.MarshalJSON()
}

// EncodeBatch marshals several messages as a JSON array.
func EncodeBatch(ms []*Message) ([]byte, error) { return json.Marshal(ms) }

// DecodeError describes why a value is not a valid message. ID is the id
// of the offending message when it could be read, so the reply can carry
// it; except for a response (a value with "result" or "error" and no
// "method"), whose id names one of the receiver's own requests: a reply
// carrying it would look like the answer to that request, so ID is the
// zero ID (null in a reply).
type DecodeError struct {
	ID  ID
	Err *Error
}

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Decode parses one JSON value that must be a single message (not a
// batch). Malformed JSON gives -32700; a JSON value that is not a
// JSON-RPC 2.0 message gives -32600. The returned error is a *DecodeError.
func Decode(data []byte) (*Message, error) {
	data = trimJSONSpace(data)
	// An object is checked by decodeValue (once); anything else is
	// judged here.
	if (len(data) == 0 || data[0] != '{') && !json.Valid(data) {
		return nil, errMalformed()
	}
	return decodeValue(data, false)
}

func errMalformed() error {
	return &DecodeError{Err: Errorf(CodeParseError, "parse error: malformed JSON")}
}

// DecodeBatch parses a body that may be a single message or a batch
// array. It returns the members; batch reports whether the body was an
// array. A malformed body returns (nil, false, *DecodeError with -32700);
// an empty array is an invalid request. For a batch, members that are not
// valid messages are returned as errs[i] (non-nil) with msgs[i] nil, so
// each bad member gets its own error reply.
func DecodeBatch(data []byte) (msgs []*Message, errs []error, batch bool, err error) {
	return DecodeBatchMax(data, 0)
}

// BatchTooLargeError is DecodeBatchMax's answer to a batch of more than
// Max members.
type BatchTooLargeError struct{ Members, Max int }

func (e *BatchTooLargeError) Error() string {
	return fmt.Sprintf("a batch has at most %d members, not %d", e.Max, e.Members)
}

// RPC is the error a client gets for the batch: -32600 naming the bound.
func (e *BatchTooLargeError) RPC() *Error { return NewError(CodeInvalidRequest, e.Error(), nil) }

// DecodeBatchMax is DecodeBatch with a bound on the members of a batch
// (0: none): a larger batch is refused with *BatchTooLargeError before
// any member is decoded, so an oversized batch costs one scan of the
// body rather than a decode of every member.
func DecodeBatchMax(data []byte, max int) (msgs []*Message, errs []error, batch bool, err error) {
	data = trimJSONSpace(data)
	if !json.Valid(data) {
		return nil, nil, false, errMalformed()
	}
	if len(data) == 0 || data[0] != '[' {
		m, err := decodeValue(data, true)
		if err != nil {
			return nil, nil, false, err
		}
		return []*Message{m}, []error{nil}, false, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, nil, true, &DecodeError{Err: Errorf(CodeParseError, "parse error: %v", err)}
	}
	if len(raws) == 0 {
		return nil, nil, true, &DecodeError{Err: Errorf(CodeInvalidRequest, "invalid request: empty batch")}
	}
	if max > 0 && len(raws) > max {
		return nil, nil, true, &BatchTooLargeError{Members: len(raws), Max: max}
	}
	msgs = make([]*Message, len(raws))
	errs = make([]error, len(raws))
	for i, r := range raws {
		msgs[i], errs[i] = decodeValue(r, true)
	}
	return msgs, errs, true, nil
}

// trimJSONSpace trims the white space JSON allows (not Unicode spaces).
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// IsBatch reports whether data (after leading white space) is a JSON array.
func IsBatch(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '['
}

func invalid(id ID, format string, args ...any) error {
	return &DecodeError{ID: id, Err: Errorf(CodeInvalidRequest, "invalid request: "+format, args...)}
}

// isVersion reports whether the JSON value v is the string "2.0".
func isVersion(v []byte) bool {
	if string(v) == `"`+Version+`"` {
		return true
	}
	s, err := UnquoteString(v)
	return err == nil && s == Version
}

// msgMembers are the members of a message object that decoding reads,
// as raw JSON (nil: absent); a name given twice is its last value, as in
// a map.
type msgMembers struct {
	id, method, params, result, err, version []byte
}

func (f *msgMembers) set(name, v []byte) {
	switch string(name) {
	case "id":
		f.id = v
	case "method":
		f.method = v
	case "params":
		f.params = v
	case "result":
		f.result = v
	case "error":
		f.err = v
	case "jsonrpc":
		f.version = v
	}
}

// decodeValue decodes a value that is valid JSON unless it starts with
// '{' and valid is false (then it checks: malformed JSON gives -32700).
func decodeValue(data []byte, valid bool) (*Message, error) {
	if len(data) == 0 || data[0] != '{' {
		return nil, invalid(ID{}, "a message must be a JSON object")
	}
	if !valid && !json.Valid(data) {
		return nil, errMalformed()
	}
	// The message keeps its params, result and error data as slices of
	// one copy of the value, which the caller may reuse.
	data = bytes.Clone(data)
	var f msgMembers
	for name, v := range Members(data) {
		f.set(name, v)
	}
	var m Message
	// Read the id first so every later error can carry it.
	rawID, hasID := f.id, f.id != nil
	if hasID {
		if err := m.ID.UnmarshalJSON(rawID); err != nil {
			if string(bytes.TrimSpace(rawID)) == "null" {
				// A null id is only legal on an error response whose
				// request id was unreadable.
				if f.err == nil {
					return nil, invalid(ID{}, "id must not be null")
				}
			} else {
				return nil, invalid(ID{}, "id must be a string or an integer")
			}
		}
	}
	rawMethod, isRequest := f.method, f.method != nil
	hasResult, hasError := f.result != nil, f.err != nil
	replyID := m.ID
	if !isRequest && (hasResult || hasError) {
		replyID = ID{} // a response: see DecodeError
	}
	if v := f.version; v == nil || !isVersion(v) {
		return nil, invalid(replyID, `"jsonrpc" must be "2.0"`)
	}
	if isRequest {
		var err error
		if m.Method, err = UnquoteString(rawMethod); err != nil || m.Method == "" {
			return nil, invalid(replyID, `"method" must be a non-empty string`)
		}
		if hasResult {
			return nil, invalid(replyID, "a request must not carry a result")
		}
		if hasError {
			return nil, invalid(replyID, "a request must not carry an error")
		}
		if p := f.params; p != nil {
			if p[0] != '{' && p[0] != '[' {
				if string(p) != "null" {
					return nil, invalid(replyID, `"params" must be an object or an array`)
				}
			} else {
				m.Params = p
			}
		}
		return &m, nil
	}
	// A response.
	res, rawErr := f.result, f.err
	switch {
	case hasResult && hasError:
		return nil, invalid(replyID, "a response must not carry both result and error")
	case hasResult:
		if !m.ID.IsValid() {
			return nil, invalid(ID{}, "a result must carry an id")
		}
		m.Result = res
	case hasError:
		var e struct {
			Code    *int64          `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rawErr, &e); err != nil || e.Code == nil || e.Message == nil {
			return nil, invalid(replyID, "malformed error object: needs code and message")
		}
		m.Error = &Error{Code: *e.Code, Message: *e.Message, Data: e.Data}
	default:
		return nil, invalid(replyID, `a message needs "method", "result" or "error"`)
	}
	return &m, nil
}

// IsDecodeError reports whether err came from Decode/DecodeBatch and, if so,
// returns it.
func IsDecodeError(err error) (*DecodeError, bool) {
	var de *DecodeError
	ok := errors.As(err, &de)
	return de, ok
}
