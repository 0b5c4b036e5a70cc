package jsonschema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCompileDialects(t *testing.T) {
	tests := []struct {
		schema string
		ok     bool
	}{
		{`{}`, true},
		{`true`, true},
		{`false`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema"}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema#"}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#"}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema"}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#"}`, false},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema"}`, false},
		{`{"$schema":"https://example.com/my-meta"}`, false},
		{`{"$schema":7}`, false},
	}
	for _, tt := range tests {
		_, err := Compile([]byte(tt.schema))
		if got := err == nil; got != tt.ok {
			t.Errorf("Compile(%s): got error %v, want ok=%v", tt.schema, err, tt.ok)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"not JSON", `{`, "jsonschema: invalid JSON: unexpected EOF"},
		{"trailing data", `{} []`, "jsonschema: invalid JSON: unexpected data after the JSON value"},
		{"not a schema", `[]`, "jsonschema: invalid schema at (root): a schema must be an object or a boolean, got array"},
		{"remote ref", `{"$ref":"https://example.com/schema.json"}`, `jsonschema: invalid schema at (root): $ref "https://example.com/schema.json": only references within the document (starting with '#') are supported; nothing is fetched`},
		{"relative ref", `{"properties":{"a":{"$ref":"other.json#/x"}}}`, `jsonschema: invalid schema at /properties/a: $ref "other.json#/x": only references within the document (starting with '#') are supported; nothing is fetched`},
		{"missing target", `{"$ref":"#/$defs/nope"}`, `jsonschema: invalid schema at (root): $ref "#/$defs/nope": target not found: no member "$defs"`},
		{"bad index", `{"allOf":[{}],"$ref":"#/allOf/01"}`, `jsonschema: invalid schema at (root): $ref "#/allOf/01": target not found: no index "01"`},
		{"ref to non-schema", `{"required":["a"],"$ref":"#/required"}`, "jsonschema: invalid schema at /required: a schema must be an object or a boolean, got array"},
		{"unknown anchor", `{"$ref":"#nope"}`, `jsonschema: invalid schema at (root): $ref "#nope": no $anchor "nope" in the document`},
		{"dynamicRef", `{"$dynamicRef":"#meta"}`, "jsonschema: invalid schema at (root): $dynamicRef is not supported"},
		{"nested id", `{"$defs":{"a":{"$id":"https://example.com/a"}}}`, "jsonschema: invalid schema at /$defs/a: $id below the root (an embedded schema resource) is not supported"},
		{"bad regexp", `{"pattern":"(?=x)"}`, "jsonschema: invalid schema at (root): pattern: invalid regular expression \"(?=x)\": error parsing regexp: invalid or unsupported Perl syntax: `(?=`"},
		{"bad pattern property", `{"patternProperties":{"[":{}}}`, "jsonschema: invalid schema at (root): patternProperties: invalid regular expression \"[\": error parsing regexp: missing closing ]: `[`"},
		{"bad type", `{"type":"float"}`, `jsonschema: invalid schema at (root): unknown type "float"`},
		{"empty type", `{"type":[]}`, "jsonschema: invalid schema at (root): type must not be an empty array"},
		{"bad minLength", `{"minLength":-1}`, "jsonschema: invalid schema at (root): minLength must be a non-negative integer"},
		{"fractional maxItems", `{"maxItems":1.5}`, "jsonschema: invalid schema at (root): maxItems must be a non-negative integer"},
		{"boolean exclusiveMinimum", `{"exclusiveMinimum":true}`, "jsonschema: invalid schema at (root): exclusiveMinimum must be a number"},
		{"zero multipleOf", `{"multipleOf":0}`, "jsonschema: invalid schema at (root): multipleOf must be greater than 0"},
		{"required not strings", `{"required":[1]}`, "jsonschema: invalid schema at (root): required must be an array of strings, found 1"},
		{"empty anyOf", `{"anyOf":[]}`, "jsonschema: invalid schema at (root): anyOf must be a non-empty array"},
		{"nested bad", `{"properties":{"a":{"items":{"type":1}}}}`, "jsonschema: invalid schema at /properties/a/items: type must be a string or an array of strings"},
		{"subschema not object", `{"properties":{"a":3}}`, "jsonschema: invalid schema at /properties/a: a schema must be an object or a boolean, got number"},
		{"items and prefixItems", `{"prefixItems":[{}],"items":[{}]}`, "jsonschema: invalid schema at (root): items must be a schema when prefixItems is present"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]byte(tt.schema))
			if err == nil {
				t.Fatalf("Compile(%s): got nil error, want %q", tt.schema, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Compile(%s):\ngot  %q\nwant %q", tt.schema, got, tt.want)
			}
		})
	}
}

func TestCompileSchemaErrorType(t *testing.T) {
	_, err := Compile([]byte(`{"properties":{"a":{"minimum":"x"}}}`))
	var se *SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("got %T, want *SchemaError", err)
	}
	if got, want := se.Loc, "/properties/a"; got != want {
		t.Errorf("Loc: got %q, want %q", got, want)
	}
}

func TestCompileLimits(t *testing.T) {
	nest := func(levels int) string {
		return strings.Repeat(`{"items":`, levels) + "{}" + strings.Repeat("}", levels)
	}
	if _, err := Compile([]byte(nest(MaxDepth))); err != nil {
		t.Errorf("depth %d: got %v, want ok", MaxDepth, err)
	}
	_, err := Compile([]byte(nest(MaxDepth + 1)))
	if err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Errorf("depth %d: got %v, want a depth error", MaxDepth+1, err)
	}

	wide := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{}`, i)
		}
		b.WriteString("}}")
		return b.String()
	}
	if _, err := Compile([]byte(wide(MaxSubschemas - 1))); err != nil {
		t.Errorf("%d subschemas: got %v, want ok", MaxSubschemas, err)
	}
	_, err = Compile([]byte(wide(MaxSubschemas)))
	if err == nil || !strings.Contains(err.Error(), "more than 10000 subschemas") {
		t.Errorf("%d subschemas: got %v, want a size error", MaxSubschemas+1, err)
	}
}

func TestCompileMap(t *testing.T) {
	s, err := CompileMap(map[string]any{
		"type":       "object",
		"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0}},
		"required":   []string{"n"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"n": -1.0}); err == nil || err.Error() != "/n: must be >= 0" {
		t.Errorf("got %v, want /n: must be >= 0", err)
	}
}

func TestMustCompilePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("MustCompile of an invalid schema did not panic")
		}
	}()
	MustCompile(`{"type":"nope"}`)
}
