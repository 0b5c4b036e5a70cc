package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// walk collects an object's members as Members reads them, a later
// member replacing an earlier one of the same name, as in a map.
func walk(data []byte) (map[string]json.RawMessage, int) {
	got := map[string]json.RawMessage{}
	n := 0
	for name, v := range Members(data) {
		got[string(name)] = v
		n++
	}
	return got, n
}

// membersSeeds are objects whose names and values exercise the walk:
// escapes, names beyond ASCII and invalid UTF-8 (encoding/json unquotes
// them with U+FFFD), nesting, strings holding brackets and quotes, white
// space everywhere, duplicate names.
var membersSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"}]\"{["}}}`,
	"{ \"a\" :\t[1, {\"b\": [\"]\"]}] ,\n\"c\":null , \"d\":true,\"e\":-1.5e3 }",
	`{"\u0069d":"x","m\u00e9thod":"y","\ud800":1,"a\"b":2,"\\":3}`,
	"{\"\xff\":1,\"é\":2}",
	`{"a":"\\","b":"\\\"","c":"\u0022"}`,
	`[1,2]`, `"s"`, `1`, `null`,
}

func TestMembersMatchUnmarshal(t *testing.T) {
	for _, s := range membersSeeds {
		checkMembers(t, []byte(s))
	}
}

func FuzzMembers(f *testing.F) {
	for _, s := range membersSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":`))
	f.Add([]byte(`{"a" 1}`))
	f.Add([]byte(`{"a":"b`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			// Malformed input: the walk ends (at most one member per
			// byte) and does not panic.
			if _, n := walk(data); n > len(data) {
				t.Fatalf("%q: %d members from %d bytes", data, n, len(data))
			}
			return
		}
		checkMembers(t, data)
	})
}

// checkMembers compares the walk of a valid JSON value with what
// encoding/json reads into a map of raw members.
func checkMembers(t *testing.T, data []byte) {
	t.Helper()
	got, _ := walk(data)
	var want map[string]json.RawMessage
	if err := json.Unmarshal(data, &want); err != nil {
		if len(got) != 0 {
			t.Fatalf("%q is no object (%v), but the walk found %d members", data, err, len(got))
		}
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%q: walk found %d distinct names, encoding/json %d (%q against %q)", data, len(got), len(want), got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, w) {
			t.Fatalf("%q: member %q is %q in the walk, %q in encoding/json", data, k, g, w)
		}
	}
}

// Walking a message's members allocates nothing for plain names.
func TestMembersAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { walkCount(benchRequest) }); n != 0 {
		t.Errorf("walking a request: %v allocs, want 0", n)
	}
}

func walkCount(data []byte) (n int) {
	for range Members(data) {
		n++
	}
	return n
}
