package seal

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestCanonicalParams(t *testing.T) {
	tests := []struct {
		name string
		in   string
		drop []string
		want string
	}{
		{"sorted", `{"b":1,"a":2}`, nil, `{"a":2,"b":1}`},
		{"nested sorted", `{"z":{"y":[{"b":1,"a":2}],"x":null}}`, nil, `{"z":{"x":null,"y":[{"a":2,"b":1}]}}`},
		{"white space", " {\n \"a\" : [ 1 , 2 ] }\n", nil, `{"a":[1,2]}`},
		{"numbers verbatim", `{"a":1.50,"b":1e3,"c":12345678901234567890123}`, nil, `{"a":1.50,"b":1e3,"c":12345678901234567890123}`},
		{"string escapes", `{"a":"\u0041\/<"}`, nil, `{"a":"A/\u003c"}`},
		{"drop", `{"name":"x","arguments":{"requestState":1},"requestState":"s","inputResponses":{},"_meta":{}}`, RetryOnlyParams,
			`{"arguments":{"requestState":1},"name":"x"}`},
		{"drop absent", `{"a":1}`, []string{"b"}, `{"a":1}`},
		{"empty", ``, nil, `{}`},
		{"null", `null`, nil, `{}`},
		{"empty object", `{}`, nil, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalParams(json.RawMessage(tt.in), tt.drop...)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalParamsErrors(t *testing.T) {
	for _, in := range []string{`[]`, `"s"`, `1`, `true`, `{`, `{"a":1}{}`, `{"a":1} x`, `{"a":}`} {
		if got, err := CanonicalParams(json.RawMessage(in)); err == nil {
			t.Errorf("CanonicalParams(%s) = %s, want error", in, got)
		}
	}
}

func TestParamsDigest(t *testing.T) {
	orig := `{"name":"book","arguments":{"city":"Paris","n":2}}`
	retry := `{"arguments":{"n":2,"city":"Paris"},"name":"book","inputResponses":{"k":{"action":"accept"}},"requestState":"v1.xyz","_meta":{"progressToken":1}}`
	d1, err := ParamsDigest("tools/call", json.RawMessage(orig))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ParamsDigest("tools/call", json.RawMessage(retry))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d1, d2) {
		t.Error("retry digest differs from original")
	}
	if len(d1) != 32 {
		t.Errorf("digest is %d bytes, want 32", len(d1))
	}
	d3, _ := ParamsDigest("tools/call", json.RawMessage(`{"name":"book","arguments":{"city":"Rome","n":2}}`))
	d4, _ := ParamsDigest("prompts/get", json.RawMessage(orig))
	if bytes.Equal(d1, d3) || bytes.Equal(d1, d4) {
		t.Error("different requests share a digest")
	}
	if _, err := ParamsDigest("tools/call", json.RawMessage(`[1]`)); err == nil {
		t.Error("ParamsDigest accepted an array")
	}
}

func TestDigestSeparatesMethod(t *testing.T) {
	if bytes.Equal(Digest("ab", []byte("c")), Digest("a", []byte("bc"))) {
		t.Error("Digest does not separate method from params")
	}
}
