package libcompare

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	gjs "github.com/google/jsonschema-go/jsonschema"
	yuri "github.com/yosida95/uritemplate/v3"

	ours "github.com/mcpcluster/mcpcluster/internal/jsonschema"
	ourt "github.com/mcpcluster/mcpcluster/internal/uritemplate"
)

// The tests below pin the reasons, given in the package docs of
// internal/jsonschema and internal/uritemplate, for which those packages
// are kept rather than replaced by the libraries. Each checks that our
// package gets a case right and that the library, at the version in
// go.mod, does not. When one fails after an upgrade, the library has
// caught up on that point: weigh the swap again.

func libValidate(t *testing.T, schema, inst string) error {
	t.Helper()
	var s gjs.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(inst), &v); err != nil {
		t.Fatal(err)
	}
	return r.Validate(v)
}

func oursValidate(t *testing.T, schema, inst string) error {
	t.Helper()
	return ours.MustCompile(schema).ValidateJSON([]byte(inst))
}

func TestJSONSchemaLibraryDifferences(t *testing.T) {
	for _, tc := range []struct {
		name, schema, inst string
		valid              bool
	}{
		// 0.3 is a multiple of 0.1; a float64 division says otherwise.
		{"multipleOf decimal", `{"multipleOf":0.1}`, `0.3`, true},
		// Beyond 2^53 the float64 the library decodes into rounds down.
		{"maximum beyond float", `{"maximum":9007199254740992}`, `9007199254740993`, false},
	} {
		if err := oursValidate(t, tc.schema, tc.inst); (err == nil) != tc.valid {
			t.Errorf("%s: ours: got %v, want valid=%v", tc.name, err, tc.valid)
		}
		if lerr := libValidate(t, tc.schema, tc.inst); (lerr == nil) == tc.valid {
			t.Errorf("%s: the library now gets this right (%v)", tc.name, lerr)
		}
	}

	// The message a model reads to correct its arguments (golden wire
	// test tools_call_errors).
	schema := `{"type":"object","properties":{"a":{"type":"number"}}}`
	if err := oursValidate(t, schema, `{"a":"one"}`); err == nil || err.Error() != `/a: must be a number, got string "one"` {
		t.Errorf("ours: got %v", err)
	}
	if lerr := libValidate(t, schema, `{"a":"one"}`); lerr == nil || !strings.Contains(lerr.Error(), "/properties/a") {
		t.Errorf("library message changed: %v", lerr)
	}

	// Recursive types: ours describes them with $defs and $ref.
	type node struct {
		V    int   `json:"v"`
		Next *node `json:"next,omitempty"`
	}
	if _, err := ours.For(reflect.TypeFor[node]()); err != nil {
		t.Errorf("ours: recursive type: %v", err)
	}
	if _, err := gjs.ForType(reflect.TypeFor[node](), nil); err == nil {
		t.Errorf("the library now infers recursive types")
	}
}

func TestURITemplateLibraryDifferences(t *testing.T) {
	type vars = map[string]string
	for _, tc := range []struct {
		tmpl, uri string
		want      vars
	}{
		// The prefix modifier is not part of the variable's name.
		{"{var:3}", "abc", vars{"var": "abc"}},
		// Clients send non-ASCII characters unencoded.
		{"{x}", "é", vars{"x": "é"}},
		// x is undefined: "" would expand to "/value//here".
		{"{/var,x}/here", "/value/here", vars{"var": "value"}},
	} {
		got, ok := ourt.MustParse(tc.tmpl).Match(tc.uri)
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ours: %s on %q: got %v %v, want %v", tc.tmpl, tc.uri, got, ok, tc.want)
		}
		lv := yuri.MustNew(tc.tmpl).Match(tc.uri)
		lib := vars{}
		for k, v := range lv {
			lib[k] = v.String()
		}
		if lv != nil && reflect.DeepEqual(lib, tc.want) {
			t.Errorf("%s on %q: the library now gets this right", tc.tmpl, tc.uri)
		}
	}
}
