package coordinator

import (
	"encoding/json"
	"testing"
)

// wireSeeds: every kind's form, names in other cases and escaped, a
// member given twice or null, members of other types, values that are
// not objects.
var wireSeeds = []string{
	`{"t":"end","s":"S1"}`, `{"t":"cancel","s":"S1","i":"n:1","c":"x"}`,
	`{"T":"end","s":"a","S":"b"}`, `{"\u0074":"end","s":null}`, `{"s":"a","s":null}`,
	`{"t":"end","x":{"t":1},"f":"\u00e9\ud800"}`, `{"t":1}`, `{"t":"end","s":true}`,
	`null`, ` null `, `[]`, `"end"`, `1`, ` {"t":"end"} `, `{`,
}

func TestWireUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, s := range wireSeeds {
		checkWire(t, []byte(s))
	}
}

func FuzzWireUnmarshal(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkWire(t, b) })
}

// checkWire compares wire.unmarshal with json.Unmarshal: both refuse,
// or both read the same members.
func checkWire(t *testing.T, b []byte) {
	t.Helper()
	var got, want wire
	gotErr, wantErr := got.unmarshal(b), json.Unmarshal(b, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: the walk says %v, encoding/json %v", b, gotErr, wantErr)
	}
	if gotErr == nil && got != want {
		t.Fatalf("%q: the walk read %+v, encoding/json %+v", b, got, want)
	}
}

// A broadcast's wire form is read with the allocations of its strings
// only.
func TestWireUnmarshalAllocs(t *testing.T) {
	b := []byte(`{"t":"end","s":"9f1c2a7e5b3d4c6a"}`)
	var w wire
	if n := testing.AllocsPerRun(100, func() { _ = w.unmarshal(b) }); n > 2 {
		t.Errorf("wire.unmarshal: %v allocs, want at most 2", n)
	}
}
