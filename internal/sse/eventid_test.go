package sse

import (
	"strings"
	"testing"
)

func TestParseEventID(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		in   string
		want EventID
		ok   bool
	}{
		{"abc_0", EventID{"abc", 0}, true},
		{"abc_1", EventID{"abc", 1}, true},
		{"A-z9_42", EventID{"A-z9", 42}, true},
		{"-_7", EventID{"-", 7}, true},
		{"s_18446744073709551615", EventID{"s", 1<<64 - 1}, true},
		{long + "_18446744073709551615", EventID{long, 1<<64 - 1}, true},
		{"", EventID{}, false},
		{"_1", EventID{}, false},
		{"abc", EventID{}, false},
		{"abc_", EventID{}, false},
		{"abc_01", EventID{}, false},
		{"abc_00", EventID{}, false},
		{"abc_+1", EventID{}, false},
		{"abc_-1", EventID{}, false},
		{"abc_1x", EventID{}, false},
		{"abc_1_2", EventID{}, false},
		{"a_b_1", EventID{}, false},
		{"a.b_1", EventID{}, false},
		{"a b_1", EventID{}, false},
		{"abc_ 1", EventID{}, false},
		{"abc_1 ", EventID{}, false},
		{"s_18446744073709551616", EventID{}, false},
		{"s_99999999999999999999", EventID{}, false},
		{long + "a_1", EventID{}, false},
		{"ü_1", EventID{}, false},
		{"abc_１", EventID{}, false},
	}
	for _, tt := range tests {
		got, err := ParseEventID(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseEventID(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseEventID(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("ParseEventID(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestEventIDString(t *testing.T) {
	if got, want := (EventID{Stream: "abc", Seq: 12}).String(), "abc_12"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNewStreamID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := NewStreamID()
		if len(id) != 16 {
			t.Fatalf("NewStreamID() = %q, want 16 characters", id)
		}
		for _, c := range id {
			if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
				t.Fatalf("NewStreamID() = %q, contains %q", id, c)
			}
		}
		if !ValidStreamID(id) {
			t.Fatalf("ValidStreamID(%q) = false", id)
		}
		if seen[id] {
			t.Fatalf("NewStreamID() repeated %q", id)
		}
		seen[id] = true
		s := EventID{Stream: id, Seq: 7}.String()
		if got, err := ParseEventID(s); err != nil || got.Stream != id || got.Seq != 7 {
			t.Fatalf("ParseEventID(%q) = %+v, %v", s, got, err)
		}
	}
}

func TestValidStreamID(t *testing.T) {
	for _, s := range []string{"a", "A-9", strings.Repeat("z", 64)} {
		if !ValidStreamID(s) {
			t.Errorf("ValidStreamID(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "a_b", "a b", strings.Repeat("z", 65)} {
		if ValidStreamID(s) {
			t.Errorf("ValidStreamID(%q) = true, want false", s)
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"abc_0", "k3x9q2m7abcdwxyz_42", "a_01", "_1", "a_18446744073709551615", "a_18446744073709551616", "a-b_9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseEventID(s)
		if err != nil {
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseEventID(%q).String() = %q", s, got)
		}
		if !ValidStreamID(id.Stream) || len(s) > MaxEventIDLen {
			t.Fatalf("ParseEventID(%q) accepted an invalid id %+v", s, id)
		}
	})
}

var sinkID EventID

func BenchmarkParseEventID(b *testing.B) {
	s := EventID{Stream: NewStreamID(), Seq: 123456789}.String()
	b.ReportAllocs()
	for b.Loop() {
		id, err := ParseEventID(s)
		if err != nil {
			b.Fatal(err)
		}
		sinkID = id
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	ev := Event{
		ID:   EventID{Stream: NewStreamID(), Seq: 42}.String(),
		Name: "message",
		Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":50,"total":100}}`),
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(AppendEvent(nil, ev))))
	for b.Loop() {
		buf = AppendEvent(buf[:0], ev)
	}
}
