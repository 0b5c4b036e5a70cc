package jsonrpc

import (
	"encoding/json"
	"testing"
)

// UnquoteString answers as json.Unmarshal into a string does, on the
// plain strings it decodes itself and on every other value.
func TestUnquoteStringMatchesUnmarshal(t *testing.T) {
	for _, in := range []string{
		`""`, `"2.0"`, `"tools/call"`, `"a b~"`, `"\u0041"`, `"a\"b"`, `"a\\b"`, `"é"`, "\"\xff\"",
		`null`, `1`, `true`, `{}`, `[]`, `"`, `"a`, `a"`, "\"a\tb\"", `"\ud800"`,
	} {
		got, gotErr := UnquoteString([]byte(in))
		var want string
		wantErr := json.Unmarshal([]byte(in), &want)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("UnquoteString(%s) = %q, %v; json.Unmarshal gives %q, %v", in, got, gotErr, want, wantErr)
		}
	}
}

// A plain string is decoded without the decoder's allocations: only the
// string itself.
func TestUnquoteStringPlainAllocs(t *testing.T) {
	b := []byte(`"tools/call"`)
	if n := testing.AllocsPerRun(100, func() { _, _ = UnquoteString(b) }); n > 1 {
		t.Errorf("UnquoteString of a plain string: %v allocs, want at most 1", n)
	}
}

// FuzzUnquoteString: on any bytes a request carries where a string is
// expected, UnquoteString answers as json.Unmarshal into a string does.
func FuzzUnquoteString(f *testing.F) {
	for _, in := range []string{`"2.0"`, `"tools/call"`, `"\u0041"`, `"a\"b"`, "\"\xff\"", `null`, `"`, `1`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, gotErr := UnquoteString(in)
		var want string
		wantErr := json.Unmarshal(in, &want)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("UnquoteString(%q) = %q, %v; json.Unmarshal gives %q, %v", in, got, gotErr, want, wantErr)
		}
	})
}
