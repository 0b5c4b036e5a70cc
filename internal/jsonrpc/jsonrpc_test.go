package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// decodeCase is one line for Decode: the message it must give, or the
// error code (and the id the error reply carries) it must fail with.
type decodeCase struct {
	name     string
	in       string
	kind     jsonrpc.Kind
	id       jsonrpc.ID
	method   string
	params   string // "" for none
	result   string // "" for none
	errCode  int64  // of msg.Error for error responses
	failCode int64  // non-zero: Decode must fail with this code
}

func TestDecode(t *testing.T) {
	tests := []decodeCase{
		// Ids.
		{name: "string id", in: `{"jsonrpc":"2.0","id":"a","method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.StringID("a"), method: "m"},
		{name: "empty string id", in: `{"jsonrpc":"2.0","id":"","method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.StringID(""), method: "m"},
		{name: "int id", in: `{"jsonrpc":"2.0","id":42,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(42), method: "m"},
		{name: "negative id", in: `{"jsonrpc":"2.0","id":-7,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(-7), method: "m"},
		{name: "zero id", in: `{"jsonrpc":"2.0","id":0,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(0), method: "m"},
		{name: "big int id", in: `{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1<<63 - 1), method: "m"},
		{name: "integral float id", in: `{"jsonrpc":"2.0","id":3.0,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(3), method: "m"},
		{name: "exponent id", in: `{"jsonrpc":"2.0","id":1e3,"method":"m"}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1000), method: "m"},
		{name: "fractional id", in: `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "huge float id", in: `{"jsonrpc":"2.0","id":1e300,"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "null id on a request", in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "array id", in: `{"jsonrpc":"2.0","id":[1],"method":"m"}`, failCode: jsonrpc.CodeInvalidRequest},

		// Version.
		{name: "missing jsonrpc", in: `{"id":1,"method":"m"}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "jsonrpc 1.0", in: `{"jsonrpc":"1.0","id":1,"method":"m"}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "jsonrpc number", in: `{"jsonrpc":2.0,"id":"x","method":"m"}`, id: jsonrpc.StringID("x"), failCode: jsonrpc.CodeInvalidRequest},

		// Requests and notifications.
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kind: jsonrpc.KindNotification, method: "notifications/initialized"},
		{name: "object params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1), method: "m", params: `{"a":1}`},
		{name: "array params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1), method: "m", params: `[1,2]`},
		{name: "null params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1), method: "m"},
		{name: "string params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "number params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "empty method", in: `{"jsonrpc":"2.0","id":1,"method":""}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "method not a string", in: `{"jsonrpc":"2.0","id":1,"method":5}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "request with result", in: `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "request with error", in: `{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":"x"}}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},
		{name: "white space", in: " \t{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\r\n", kind: jsonrpc.KindRequest, id: jsonrpc.IntID(1), method: "m"},

		// Responses.
		{name: "result", in: `{"jsonrpc":"2.0","id":"srv-1","result":{"ok":true}}`, kind: jsonrpc.KindResponse, id: jsonrpc.StringID("srv-1"), result: `{"ok":true}`},
		{name: "null result", in: `{"jsonrpc":"2.0","id":1,"result":null}`, kind: jsonrpc.KindResponse, id: jsonrpc.IntID(1), result: `null`},
		{name: "error", in: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope","data":{"x":1}}}`, kind: jsonrpc.KindResponse, id: jsonrpc.IntID(1), errCode: jsonrpc.CodeMethodNotFound},
		{name: "error with null id", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, kind: jsonrpc.KindResponse, errCode: jsonrpc.CodeParseError},
		{name: "result without id", in: `{"jsonrpc":"2.0","result":{}}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "result with null id", in: `{"jsonrpc":"2.0","id":null,"result":{}}`, failCode: jsonrpc.CodeInvalidRequest},
		// The id of a bad response is the receiver's own: the reply must
		// not carry it.
		{name: "result and error", in: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "error without code", in: `{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "error code not a number", in: `{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"x"}}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "response with bad version", in: `{"jsonrpc":"1.0","id":1,"result":{}}`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "neither", in: `{"jsonrpc":"2.0","id":1}`, id: jsonrpc.IntID(1), failCode: jsonrpc.CodeInvalidRequest},

		// Not messages.
		{name: "malformed", in: `{"jsonrpc":"2.0"`, failCode: jsonrpc.CodeParseError},
		{name: "empty", in: ``, failCode: jsonrpc.CodeParseError},
		{name: "trailing garbage", in: `{"jsonrpc":"2.0","method":"m"} x`, failCode: jsonrpc.CodeParseError},
		{name: "number", in: `42`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "string", in: `"m"`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "null", in: `null`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "array", in: `[{"jsonrpc":"2.0","method":"m"}]`, failCode: jsonrpc.CodeInvalidRequest},
		{name: "empty object", in: `{}`, failCode: jsonrpc.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := jsonrpc.Decode([]byte(tt.in))
			if tt.failCode != 0 {
				de, ok := jsonrpc.IsDecodeError(err)
				if !ok {
					t.Fatalf("Decode(%s): got (%+v, %v), want a *DecodeError", tt.in, msg, err)
				}
				if de.Err.Code != tt.failCode {
					t.Errorf("Decode(%s): got code %d, want %d", tt.in, de.Err.Code, tt.failCode)
				}
				if de.ID != tt.id {
					t.Errorf("Decode(%s): got error id %v, want %v", tt.in, de.ID, tt.id)
				}
				if !errors.Is(err, &jsonrpc.Error{Code: tt.failCode}) {
					t.Errorf("Decode(%s): errors.Is by code %d failed", tt.in, tt.failCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", tt.in, err)
			}
			if got := msg.Kind(); got != tt.kind {
				t.Errorf("got kind %v, want %v", got, tt.kind)
			}
			if msg.ID != tt.id {
				t.Errorf("got id %v, want %v", msg.ID, tt.id)
			}
			if msg.Method != tt.method {
				t.Errorf("got method %q, want %q", msg.Method, tt.method)
			}
			if string(msg.Params) != tt.params {
				t.Errorf("got params %s, want %s", msg.Params, tt.params)
			}
			if string(msg.Result) != tt.result {
				t.Errorf("got result %s, want %s", msg.Result, tt.result)
			}
			switch {
			case tt.errCode == 0 && msg.Error != nil:
				t.Errorf("got error %v, want none", msg.Error)
			case tt.errCode != 0 && (msg.Error == nil || msg.Error.Code != tt.errCode):
				t.Errorf("got error %v, want code %d", msg.Error, tt.errCode)
			}
		})
	}
}

func TestIDsOfDifferentTypesDiffer(t *testing.T) {
	if jsonrpc.StringID("1") == jsonrpc.IntID(1) {
		t.Errorf(`StringID("1") == IntID(1)`)
	}
	if (jsonrpc.ID{}).IsValid() {
		t.Errorf("the zero ID is valid")
	}
	for _, id := range []jsonrpc.ID{jsonrpc.StringID("1"), jsonrpc.StringID(""), jsonrpc.StringID("n:1"), jsonrpc.IntID(1), jsonrpc.IntID(-5)} {
		got, err := jsonrpc.ParseKey(id.Key())
		if err != nil || got != id {
			t.Errorf("ParseKey(%q): got (%v, %v), want %v", id.Key(), got, err, id)
		}
	}
	for _, k := range []string{"", "x", "x:1", "n:", "n:1.5"} {
		if _, err := jsonrpc.ParseKey(k); err == nil {
			t.Errorf("ParseKey(%q): got no error", k)
		}
	}
}

func TestEncode(t *testing.T) {
	mustMsg := func(m *jsonrpc.Message, err error) *jsonrpc.Message {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name string
		msg  *jsonrpc.Message
		want string
	}{
		{"request", mustMsg(jsonrpc.Request(jsonrpc.IntID(1), "tools/list", map[string]any{"cursor": "c"})),
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}`},
		{"request with string id and no params", mustMsg(jsonrpc.Request(jsonrpc.StringID("srv-1"), "roots/list", nil)),
			`{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}`},
		{"request with raw params", mustMsg(jsonrpc.Request(jsonrpc.IntID(2), "m", json.RawMessage(`[1,2]`))),
			`{"jsonrpc":"2.0","id":2,"method":"m","params":[1,2]}`},
		{"notification", mustMsg(jsonrpc.Notification("notifications/initialized", nil)),
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"response", mustMsg(jsonrpc.Response(jsonrpc.IntID(3), map[string]any{"ok": true})),
			`{"jsonrpc":"2.0","id":3,"result":{"ok":true}}`},
		{"empty response", mustMsg(jsonrpc.Response(jsonrpc.StringID("a"), nil)),
			`{"jsonrpc":"2.0","id":"a","result":{}}`},
		{"bare response", &jsonrpc.Message{ID: jsonrpc.IntID(4)},
			`{"jsonrpc":"2.0","id":4,"result":{}}`},
		{"error response", jsonrpc.ErrorResponse(jsonrpc.IntID(5), jsonrpc.NewError(jsonrpc.CodeInvalidParams, "bad", map[string]any{"field": "x"})),
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad","data":{"field":"x"}}}`},
		{"error response without id", jsonrpc.ErrorResponse(jsonrpc.ID{}, jsonrpc.ErrParse),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{"error response hides internal errors", jsonrpc.ErrorResponse(jsonrpc.IntID(6), errors.New("db password is hunter2")),
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32603,"message":"internal error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := jsonrpc.Encode(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
			back, err := jsonrpc.Decode(b)
			if err != nil {
				t.Fatalf("Decode(Encode(m)): %v", err)
			}
			if again, _ := jsonrpc.Encode(back); string(again) != tt.want {
				t.Errorf("Encode(Decode(Encode(m))): got %s, want %s", again, tt.want)
			}
		})
	}
}

func TestErrorsIsByCode(t *testing.T) {
	sent := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid params: name is required", map[string]any{"field": "name"})
	b, err := jsonrpc.Encode(jsonrpc.ErrorResponse(jsonrpc.IntID(1), sent))
	if err != nil {
		t.Fatal(err)
	}
	received, err := jsonrpc.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same code", sent, jsonrpc.ErrInvalidParams, true},
		{"after a round trip", received.Error, jsonrpc.ErrInvalidParams, true},
		{"wrapped", fmt.Errorf("calling: %w", received.Error), jsonrpc.ErrInvalidParams, true},
		{"other code", sent, jsonrpc.ErrMethodNotFound, false},
		{"Errorf", jsonrpc.Errorf(jsonrpc.CodeResourceNotFound, "no %s", "x"), jsonrpc.ErrResourceNotFound, true},
		{"plain error", errors.New("x"), jsonrpc.ErrInternal, false},
		{"MCP code", jsonrpc.NewError(jsonrpc.CodeMissingClientCapability, "m", nil), jsonrpc.ErrMissingClientCapability, true},
		{"nil target", sent, (*jsonrpc.Error)(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v): got %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
	if got := jsonrpc.AsError(fmt.Errorf("x: %w", sent)); got != sent {
		t.Errorf("AsError of a wrapped *Error: got %v, want it unwrapped", got)
	}
	if got := jsonrpc.AsError(nil); got != nil {
		t.Errorf("AsError(nil): got %v", got)
	}
	if got := jsonrpc.AsError(errors.New("secret")); got.Code != jsonrpc.CodeInternalError || strings.Contains(got.Message, "secret") {
		t.Errorf("AsError of a plain error: got %+v", got)
	}
}

func TestDecodeBatch(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		batch    bool
		members  int
		bad      []int // indexes of members that must be errors
		failCode int64
	}{
		{"single", `{"jsonrpc":"2.0","id":1,"method":"m"}`, false, 1, nil, 0},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"s","result":{}}]`, true, 3, nil, 0},
		{"bad members", `[{"jsonrpc":"2.0","id":1,"method":"m"},42,{"jsonrpc":"1.0","id":2,"method":"m"}]`, true, 3, []int{1, 2}, 0},
		{"empty batch", `[]`, true, 0, nil, jsonrpc.CodeInvalidRequest},
		{"malformed", `[{"jsonrpc":"2.0"`, false, 0, nil, jsonrpc.CodeParseError},
		{"bad single", `{"jsonrpc":"2.0"}`, false, 0, nil, jsonrpc.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, errs, batch, err := jsonrpc.DecodeBatch([]byte(tt.in))
			if tt.failCode != 0 {
				if de, ok := jsonrpc.IsDecodeError(err); !ok || de.Err.Code != tt.failCode {
					t.Fatalf("got %v, want code %d", err, tt.failCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if batch != tt.batch || len(msgs) != tt.members || len(errs) != tt.members {
				t.Fatalf("got batch=%v with %d members (%d errs), want batch=%v with %d", batch, len(msgs), len(errs), tt.batch, tt.members)
			}
			for i := range msgs {
				wantBad := false
				for _, b := range tt.bad {
					wantBad = wantBad || b == i
				}
				if (errs[i] != nil) != wantBad || (msgs[i] == nil) != wantBad {
					t.Errorf("member %d: got (%v, %v), want bad=%v", i, msgs[i], errs[i], wantBad)
				}
			}
			if jsonrpc.IsBatch([]byte(tt.in)) != tt.batch {
				t.Errorf("IsBatch: got %v, want %v", !tt.batch, tt.batch)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"<hi>"}}}`,
		`{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":[1]}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"m","params":null}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","error":{"code":1,"message":"\u00ff"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"},42]`,
		`{"jsonrpc":"2.0","id":-0,"method":"\ud800"}`,
		`{"id":1}`, `42`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _, _ = jsonrpc.DecodeBatch(data) // must not panic
		m1, err := jsonrpc.Decode(data)
		if err != nil {
			de, ok := jsonrpc.IsDecodeError(err)
			if !ok {
				t.Fatalf("Decode(%q): error %v is not a *DecodeError", data, err)
			}
			// -32700 exactly when the body is not JSON.
			if parse := de.Err.Code == jsonrpc.CodeParseError; parse == json.Valid(data) {
				t.Fatalf("Decode(%q): code %d, but json.Valid is %v", data, de.Err.Code, !parse)
			}
			return
		}
		if m1.Kind() == jsonrpc.KindInvalid {
			t.Fatalf("Decode(%q) accepted a message of no kind: %+v", data, m1)
		}
		b1, err := jsonrpc.Encode(m1)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", data, err)
		}
		m2, err := jsonrpc.Decode(b1)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = Decode(%s): %v", data, b1, err)
		}
		if m1.Kind() != m2.Kind() || m1.ID != m2.ID || m1.Method != m2.Method ||
			!sameJSON(m1.Params, m2.Params) || !sameJSON(m1.Result, m2.Result) || !sameError(m1.Error, m2.Error) {
			t.Fatalf("round trip of %q through %s:\ngot  %+v\nwant %+v", data, b1, m2, m1)
		}
		if b2, _ := jsonrpc.Encode(m2); string(b2) != string(b1) {
			t.Fatalf("encoding is not stable: %s, then %s", b1, b2)
		}
	})
}

// sameJSON compares raw JSON values by meaning (nil only equals nil).
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, err1 := decodeAny(a)
	vb, err2 := decodeAny(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

func sameError(a, b *jsonrpc.Error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Code == b.Code && a.Message == b.Message && sameJSON(a.Data, b.Data)
}

func decodeAny(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
