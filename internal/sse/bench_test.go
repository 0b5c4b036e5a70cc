package sse

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// benchStream is what a progress call's SSE answer looks like: a priming
// event, ten progress notifications and the final response, each with a
// deployment-unique event id.
func benchStream() []byte {
	stream := NewStreamID()
	var b []byte
	b = AppendEvent(b, Event{ID: EventID{Stream: stream, Seq: 0}.String(), Retry: time.Second})
	for i := 1; i <= 10; i++ {
		b = AppendEvent(b, Event{
			ID:   EventID{Stream: stream, Seq: uint64(i)}.String(),
			Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1-42","progress":3,"total":10,"message":"step 3 of 10"}}`),
		})
	}
	b = AppendEvent(b, Event{
		ID:   EventID{Stream: stream, Seq: 11}.String(),
		Data: []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"done after 10 steps"}]}}`),
	})
	return b
}

func BenchmarkReader(b *testing.B) {
	data := benchStream()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), 0)
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 12 {
			b.Fatalf("read %d events, want 12", n)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	ev := Event{
		ID:   EventID{Stream: NewStreamID(), Seq: 42}.String(),
		Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1-42","progress":3,"total":10}}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventIDString(b *testing.B) {
	id := EventID{Stream: NewStreamID(), Seq: 123456789}
	b.ReportAllocs()
	for b.Loop() {
		sinkString = id.String()
	}
}

var sinkString string

func BenchmarkNewStreamID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString = NewStreamID()
	}
}
