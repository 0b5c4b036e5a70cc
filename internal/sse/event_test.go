package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"priming", Event{ID: "s_0"}, "id: s_0\ndata: \n\n"},
		{"data only", Event{Data: []byte(`{"jsonrpc":"2.0"}`)}, "data: {\"jsonrpc\":\"2.0\"}\n\n"},
		{"all fields", Event{ID: "a_1", Name: "message", Data: []byte("x"), Retry: 1500 * time.Millisecond},
			"id: a_1\nevent: message\nretry: 1500\ndata: x\n\n"},
		{"LF lines", Event{Data: []byte("a\nb")}, "data: a\ndata: b\n\n"},
		{"CRLF lines", Event{Data: []byte("a\r\nb")}, "data: a\ndata: b\n\n"},
		{"CR lines", Event{Data: []byte("a\rb")}, "data: a\ndata: b\n\n"},
		{"trailing newline", Event{Data: []byte("a\n")}, "data: a\ndata: \n\n"},
		{"only newline", Event{Data: []byte("\n")}, "data: \ndata: \n\n"},
		{"leading space kept", Event{Data: []byte(" a")}, "data:  a\n\n"},
		{"retry truncated", Event{Data: []byte("x"), Retry: 2500 * time.Microsecond}, "retry: 2\ndata: x\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.ev); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
	}{
		{"id LF", Event{ID: "a\nb"}},
		{"id CR", Event{ID: "a\rb"}},
		{"id NUL", Event{ID: "a\x00b"}},
		{"name LF", Event{Name: "a\nretry: 0"}},
		{"negative retry", Event{Retry: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.ev); err == nil {
				t.Fatalf("Write succeeded, want error")
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %q after rejecting the event", buf.String())
			}
		})
	}
}

func TestAppendEventSanitises(t *testing.T) {
	got := string(AppendEvent(nil, Event{ID: "a\nid: evil\x00", Name: "n\r\nx", Data: []byte("d"), Retry: -1}))
	want := "id: aid: evil\nevent: nx\ndata: d\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWriteComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"keep-alive", ": keep-alive\n\n"},
		{"", ":\n\n"},
		{"a\ndata: injected", ": a\n: data: injected\n\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteComment(&buf, tt.text); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("WriteComment(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteError(t *testing.T) {
	if err := Write(failWriter{}, Event{Data: []byte("x")}); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Write error = %v, want %v", err, io.ErrClosedPipe)
	}
	if err := WriteComment(failWriter{}, "x"); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("WriteComment error = %v, want %v", err, io.ErrClosedPipe)
	}
}

// TestWriteReadRoundTrip checks that the Reader recovers what Write
// framed, with data line endings normalised to "\n".
func TestWriteReadRoundTrip(t *testing.T) {
	events := []Event{
		{ID: "s_0", Data: []byte{}},
		{ID: "s_1", Name: "message", Data: []byte(`{"a":1}`)},
		{Data: []byte("multi\nline\r\nwith\rendings\n")},
		{ID: "s_2", Data: []byte("  spaced  "), Retry: 3 * time.Second},
		{Data: []byte(":not a comment")},
	}
	var buf bytes.Buffer
	for _, ev := range events {
		if err := Write(&buf, ev); err != nil {
			t.Fatal(err)
		}
		if err := WriteComment(&buf, "ping"); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, 0)
	lastID := ""
	for i, want := range events {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want.ID != "" {
			lastID = want.ID
		}
		wantData := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(want.Data))
		if got.ID != lastID || got.Name != want.Name || string(got.Data) != wantData || got.Retry != want.Retry {
			t.Errorf("event %d: got %+v (data %q), want id %q name %q data %q retry %v",
				i, got, got.Data, lastID, want.Name, wantData, want.Retry)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after last event: got %v, want io.EOF", err)
	}
	if got, want := r.Comments(), len(events); got != want {
		t.Errorf("Comments() = %d, want %d", got, want)
	}
}
