package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReader(t *testing.T) {
	type ev struct {
		id, name, data string
		retry          time.Duration
	}
	tests := []struct {
		name     string
		in       string
		want     []ev
		comments int
		lastID   string
	}{
		{"simple", "data: hello\n\n", []ev{{data: "hello"}}, 0, ""},
		{"no space after colon", "data:hello\n\n", []ev{{data: "hello"}}, 0, ""},
		{"only one space stripped", "data:  hello\n\n", []ev{{data: " hello"}}, 0, ""},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []ev{{data: "a\nb\n"}}, 0, ""},
		{"CRLF", "id: 1\r\nevent: x\r\ndata: a\r\n\r\n", []ev{{id: "1", name: "x", data: "a"}}, 0, "1"},
		{"CR", "id: 1\revent: x\rdata: a\r\rdata: b\r\r", []ev{{id: "1", name: "x", data: "a"}, {id: "1", data: "b"}}, 0, "1"},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{{data: "a\nb\nc"}}, 0, ""},
		{"priming event", "id: s_0\ndata: \n\n", []ev{{id: "s_0", data: ""}}, 0, "s_0"},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []ev{{id: "1", data: "a"}, {id: "1", data: "b"}, {id: "", data: "c"}}, 0, ""},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []ev{{id: "1", data: "a"}, {id: "1", data: "b"}}, 0, "1"},
		{"id-only block not dispatched", "id: 7\n\ndata: x\n\n", []ev{{id: "7", data: "x"}}, 0, "7"},
		{"no data not dispatched", "event: x\nretry: 10\n\n", nil, 0, ""},
		{"comments", ": ping\n\n:\n\ndata: a\n: inside\n\n", []ev{{data: "a"}}, 3, ""},
		{"retry", "retry: 2500\ndata: a\n\ndata: b\n\n", []ev{{data: "a", retry: 2500 * time.Millisecond}, {data: "b"}}, 0, ""},
		{"bad retry ignored", "retry: 1.5\nretry: -1\nretry:\nretry: 1a\ndata: a\n\n", []ev{{data: "a"}}, 0, ""},
		{"unknown fields ignored", "foo: bar\nDATA: no\ndata : no\ndata: yes\n\n", []ev{{data: "yes"}}, 0, ""},
		{"event name resets", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{name: "a", data: "1"}, {data: "2"}}, 0, ""},
		{"BOM skipped", "\xEF\xBB\xBFdata: a\n\n", []ev{{data: "a"}}, 0, ""},
		{"second BOM kept", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", []ev{{data: "b"}}, 0, ""},
		{"incomplete event discarded", "data: a\n\ndata: b\n", []ev{{data: "a"}}, 0, ""},
		{"partial line discarded", "data: a\n\ndata: b", []ev{{data: "a"}}, 0, ""},
		{"colon in value", "data: a: b\n\n", []ev{{data: "a: b"}}, 0, ""},
		{"empty stream", "", nil, 0, ""},
	}
	readers := map[string]func(string) io.Reader{
		"whole":   func(s string) io.Reader { return strings.NewReader(s) },
		"onebyte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				r := NewReader(mk(tt.in), 0)
				for i, want := range tt.want {
					got, err := r.Next()
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
					if got.ID != want.id || got.Name != want.name || string(got.Data) != want.data || got.Retry != want.retry {
						t.Errorf("event %d: got {id %q name %q data %q retry %v}, want %+v", i, got.ID, got.Name, got.Data, got.Retry, want)
					}
					if got.Data == nil {
						t.Errorf("event %d: nil Data, want non-nil", i)
					}
				}
				if got, err := r.Next(); err != io.EOF {
					t.Fatalf("got %+v, %v, want io.EOF", got, err)
				}
				if _, err := r.Next(); err != io.EOF {
					t.Fatalf("second Next after end: %v, want io.EOF", err)
				}
				if got := r.Comments(); got != tt.comments {
					t.Errorf("Comments() = %d, want %d", got, tt.comments)
				}
				if got := r.LastEventID(); got != tt.lastID {
					t.Errorf("LastEventID() = %q, want %q", got, tt.lastID)
				}
			})
		}
	}
}

// TestReaderCRLFAcrossReads checks that a CR at the end of one read and an
// LF at the start of the next form a single line ending, and that the
// Reader does not wait for the byte after a CR before returning an event.
func TestReaderCRLFAcrossReads(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	go func() {
		io.WriteString(pw, "data: a\r\r")
		// The event above must be delivered before this write happens.
	}()
	got, err := r.Next()
	if err != nil || string(got.Data) != "a" {
		t.Fatalf("got %q, %v, want \"a\"", got.Data, err)
	}
	go func() {
		io.WriteString(pw, "\ndata: b\r")
		io.WriteString(pw, "\n\r")
		io.WriteString(pw, "\n")
		pw.Close()
	}()
	got, err = r.Next()
	if err != nil || string(got.Data) != "b" {
		t.Fatalf("got %q, %v, want \"b\"", got.Data, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF (a lone LF after CR is not a blank line)", err)
	}
}

func TestReaderRetryAccessor(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 3000\n\nid: s_1\ndata: \n\n"), 0)
	ev, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Retry != 0 {
		t.Errorf("event Retry = %v, want 0 (retry came in an earlier block)", ev.Retry)
	}
	if got, want := r.Retry(), 3*time.Second; got != want {
		t.Errorf("Retry() = %v, want %v", got, want)
	}
}

func TestReaderHugeRetrySaturates(t *testing.T) {
	r := NewReader(strings.NewReader("retry: 99999999999999999999999\ndata: x\n\n"), 0)
	ev, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Retry <= 0 {
		t.Errorf("Retry = %v, want a large positive duration", ev.Retry)
	}
}

func TestReaderLimit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		ok   int   // events returned before the error
		err  error // then this error
	}{
		{"one long line", "data: " + strings.Repeat("x", 100) + "\n\n", 50, 0, ErrEventTooLarge},
		{"many lines", strings.Repeat("data: xxxxxxxx\n", 10) + "\n", 50, 0, ErrEventTooLarge},
		{"unterminated line", strings.Repeat("x", 1000), 50, 0, ErrEventTooLarge},
		{"comments without blank line", strings.Repeat(": keepalive\n", 10), 50, 0, ErrEventTooLarge},
		{"limit is per event", strings.Repeat("data: xxxxxxxx\n\n", 100), 20, 100, io.EOF},
		{"second event too large", "data: a\n\ndata: " + strings.Repeat("x", 100) + "\n\n", 50, 1, ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), tt.max)
			for i := range tt.ok {
				if _, err := r.Next(); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if _, err := r.Next(); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
			if _, err := r.Next(); !errors.Is(err, tt.err) {
				t.Fatalf("error not sticky: got %v, want %v", err, tt.err)
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n",
		"id: s_1\r\nevent: x\r\nretry: 10\r\ndata: a\r\ndata: b\r\n\r\n",
		": ping\r\rdata\r\r",
		"\xEF\xBB\xBFid: a\x00\ndata:b\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
	} {
		f.Add(s, 128)
	}
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max <= 0 || max > 4096 {
			max = 64
		}
		r := NewReader(iotest.HalfReader(strings.NewReader(in)), max)
		// Every Next consumes at least one line or fails, and a line takes
		// at least one input byte, so the stream ends within len(in)+1 calls.
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatalf("more than %d events from %d bytes", i, len(in))
			}
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(ev.Data) > max || len(ev.Name) > max || len(ev.ID) > len(in) {
				t.Fatalf("event exceeds bound %d: %d data bytes", max, len(ev.Data))
			}
			if strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsAny(ev.Name, "\r\n") {
				t.Fatalf("field contains a line break: %+v", ev)
			}
			// A parsed event must survive a Write/Next round trip.
			if ev.Validate() == nil {
				var buf strings.Builder
				if err := Write(&buf, ev); err != nil {
					t.Fatal(err)
				}
				got, err := NewReader(strings.NewReader(buf.String()), 0).Next()
				if err != nil || got.ID != ev.ID || got.Name != ev.Name || string(got.Data) != string(ev.Data) {
					t.Fatalf("round trip of %+v gave %+v, %v", ev, got, err)
				}
			}
		}
	})
}
