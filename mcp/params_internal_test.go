package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// paramsSeeds exercise the member names: exact, in another case, with
// escapes, folded by Unicode (K, the Kelvin sign, folds to k; ſ to s),
// given twice, and params that are not an object.
var paramsSeeds = []string{
	`{"name":"echo","arguments":{"text":"hi"}}`,
	`{"NAME":"a","name":"b"}`, `{"name":"b","Name":"a"}`,
	`{"_meta":{"progressToken":1},"uri":"file:///a","taskId":"t","requestState":"s","inputResponses":{}}`,
	`{"\u006eame":"x","TASKID":1,"ArGuMeNtS":null}`,
	"{\"taſkId\":1,\"tasKId\":2,\"uRi\":3}",
	`{"other":1,"name ":2}`, `[1]`, `null`, `{}`,
}

func TestSplitParamsMatchesUnmarshal(t *testing.T) {
	for _, s := range paramsSeeds {
		checkSplit(t, []byte(s))
	}
}

func FuzzSplitParams(f *testing.F) {
	for _, s := range paramsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			if pm := splitParams(data); len(data) > 0 && data[0] == '{' && pm.metaErr == nil {
				t.Fatalf("%q: malformed params split without an error", data)
			}
			return
		}
		checkSplit(t, data)
	})
}

// checkSplit compares splitParams with encoding/json decoding the params
// into paramMembers, which it stands in for.
func checkSplit(t *testing.T, data []byte) {
	t.Helper()
	got := splitParams(data)
	var want paramMembers
	if len(data) == 0 || data[0] != '{' {
		return
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	for i, n := range paramNames {
		if g, w := *got.member(i), *want.member(i); !bytes.Equal(g, w) {
			t.Fatalf("%q: member %s is %q, encoding/json reads %q", data, n, g, w)
		}
	}
}

// Splitting the params of a tools/call allocates only the split.
func TestSplitParamsAllocs(t *testing.T) {
	p := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	if n := testing.AllocsPerRun(100, func() { _ = splitParams(p) }); n > 1 {
		t.Errorf("splitParams: %v allocs, want 1", n)
	}
}
