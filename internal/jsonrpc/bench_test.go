package jsonrpc

import (
	"encoding/json"
	"testing"
)

// Messages as they cross the wire on the hot paths: a tools/call request
// with a progress token and 2026-07-28 request metadata, its JSON answer,
// and a progress notification.
var (
	benchRequest = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"progressToken":"p1-42","io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`)
	benchResponse     = []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}`)
	benchNotification = []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1-42","progress":3,"total":10,"message":"step 3 of 10"}}`)
)

var sinkMsg *Message

func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"request", benchRequest},
		{"response", benchResponse},
		{"notification", benchNotification},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				m, err := Decode(bc.data)
				if err != nil {
					b.Fatal(err)
				}
				sinkMsg = m
			}
		})
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	batch := []byte("[" + string(benchRequest) + "," + string(benchNotification) + "," + string(benchResponse) + "]")
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		msgs, _, _, err := DecodeBatch(batch)
		if err != nil || len(msgs) != 3 {
			b.Fatal(err)
		}
	}
}

var sinkBytes []byte

func BenchmarkEncode(b *testing.B) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}],"isError":false}`)
	b.Run("response", func(b *testing.B) {
		m := &Message{ID: IntID(42), Result: result}
		b.ReportAllocs()
		for b.Loop() {
			out, err := Encode(m)
			if err != nil {
				b.Fatal(err)
			}
			sinkBytes = out
		}
	})
	b.Run("error", func(b *testing.B) {
		m := ErrorResponse(StringID("req-42"), Errorf(CodeInvalidParams, "invalid params: %s", "text is required"))
		b.ReportAllocs()
		for b.Loop() {
			out, err := Encode(m)
			if err != nil {
				b.Fatal(err)
			}
			sinkBytes = out
		}
	})
	// A notification built from a Go value, as a handler's progress is.
	b.Run("notification from value", func(b *testing.B) {
		params := map[string]any{"progressToken": "p1-42", "progress": 3, "total": 10, "message": "step 3 of 10"}
		b.ReportAllocs()
		for b.Loop() {
			m, err := Notification("notifications/progress", params)
			if err != nil {
				b.Fatal(err)
			}
			out, err := Encode(m)
			if err != nil {
				b.Fatal(err)
			}
			sinkBytes = out
		}
	})
}

var sinkKey string

func BenchmarkIDKey(b *testing.B) {
	ids := []ID{IntID(1234567), StringID("a-string-id")}
	b.ReportAllocs()
	for b.Loop() {
		for _, id := range ids {
			sinkKey = id.Key()
		}
	}
}
