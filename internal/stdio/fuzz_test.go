package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/synctest"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// FuzzReadLoop feeds arbitrary input to the read loop, in both batch modes
// and with a call waiting for id 1, and checks that it terminates without
// panicking and that the callbacks only ever see what they are promised.
func FuzzReadLoop(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n\n \r\n",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":"1","method":"ping"}` + "\n" + `{"jsonrpc":"2.0","method":"n"}`,
		`[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","method":"a"},{}]` + "\n",
		"[]\n[\n{\n",
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}` + "\n",
		`{"jsonrpc":"2.0","id":1e0,"result":null}` + "\n",
		string(bytes.Repeat([]byte("["), 200)) + "\n" + `{"jsonrpc":"2.0","method":"after"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, whole := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				fuzzOnce(t, data, whole)
			})
		}
	})
}

func fuzzOnce(t *testing.T, data []byte, whole bool) {
	const maxLine = 128
	opts := Options{
		MaxLineBytes: maxLine,
		OnInbound: func(m *jsonrpc.Message) {
			if k := m.Kind(); k != jsonrpc.KindRequest && k != jsonrpc.KindNotification {
				t.Fatalf("OnInbound got a %v", k)
			}
		},
		OnInvalid: func(e *jsonrpc.DecodeError) {
			if e == nil || e.Err == nil {
				t.Fatal("OnInvalid got a nil error")
			}
			if c := e.Err.Code; c != jsonrpc.CodeParseError && c != jsonrpc.CodeInvalidRequest {
				t.Fatalf("OnInvalid got code %d", c)
			}
		},
	}
	if whole {
		opts.OnBatch = func(raw []byte) {
			if !jsonrpc.IsBatch(raw) || !json.Valid(raw) || len(raw) > maxLine {
				t.Fatalf("OnBatch got %q", raw)
			}
		}
	}
	c := New(bytes.NewReader(data), io.Discard, opts)
	res := goCall(t.Context(), c, "m", nil)
	synctest.Wait() // the call is pending before anything is read

	if err := c.Run(t.Context()); err != nil {
		t.Fatalf("Run over a bytes.Reader: got %v, want nil", err)
	}
	r := <-res
	var rpcErr *jsonrpc.Error
	if r.err != nil && !errors.As(r.err, &rpcErr) {
		t.Fatalf("call: got %v, want a result, a peer error or connection closed", r.err)
	}
	if c.Pending() != 0 {
		t.Fatalf("got %d pending after Run, want 0", c.Pending())
	}
}
