package jsonschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// vcase is one validation case. want is "" when the instance is valid,
// otherwise the complete text of the error.
type vcase struct {
	name   string
	schema string
	inst   string
	want   string
	// exactOnly marks cases that depend on exact decimals, which a
	// float64 decoding of the instance cannot represent.
	exactOnly bool
}

func runCases(t *testing.T, cases []vcase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile([]byte(tt.schema))
			if err != nil {
				t.Fatalf("Compile(%s): %v", tt.schema, err)
			}
			check := func(how string, err error) {
				t.Helper()
				got := ""
				if err != nil {
					var ve *ValidationError
					if !errors.As(err, &ve) {
						t.Fatalf("%s: got error of type %T, want *ValidationError", how, err)
					}
					got = err.Error()
				}
				if got != tt.want {
					t.Errorf("%s(%s) against %s:\ngot  %q\nwant %q", how, tt.inst, tt.schema, got, tt.want)
				}
			}
			check("ValidateJSON", s.ValidateJSON([]byte(tt.inst)))
			if tt.exactOnly {
				return
			}
			var v any
			if err := json.Unmarshal([]byte(tt.inst), &v); err != nil {
				t.Fatalf("bad test instance %s: %v", tt.inst, err)
			}
			check("Validate", s.Validate(v))
		})
	}
}

func TestValidateType(t *testing.T) {
	runCases(t, []vcase{
		{"string ok", `{"type":"string"}`, `"x"`, "", false},
		{"string bad", `{"type":"string"}`, `1`, "(root): must be a string, got number 1", false},
		{"integer ok", `{"type":"integer"}`, `3`, "", false},
		{"integer 1.0", `{"type":"integer"}`, `1.0`, "", false},
		{"integer 1e2", `{"type":"integer"}`, `1e2`, "", false},
		{"integer fraction", `{"type":"integer"}`, `1.5`, "(root): must be an integer, got number 1.5", false},
		{"integer huge exact", `{"type":"integer"}`, `9007199254740993.5`, "(root): must be an integer, got number 9007199254740993.5", true},
		{"number accepts integer", `{"type":"number"}`, `3`, "", false},
		{"boolean", `{"type":"boolean"}`, `"true"`, `(root): must be a boolean, got string "true"`, false},
		{"null", `{"type":"null"}`, `null`, "", false},
		{"object", `{"type":"object"}`, `[]`, "(root): must be an object, got array", false},
		{"array", `{"type":"array"}`, `{}`, "(root): must be an array, got object", false},
		{"union ok", `{"type":["string","null"]}`, `null`, "", false},
		{"union bad", `{"type":["string","integer","null"]}`, `true`, "(root): must be a string, an integer or null, got boolean true", false},
		{"nested path", `{"properties":{"a":{"items":{"type":"string"}}}}`, `{"a":["x",2]}`, "/a/1: must be a string, got number 2", false},
		{"escaped path", `{"properties":{"a/b~c":{"type":"string"}}}`, `{"a/b~c":1}`, "/a~1b~0c: must be a string, got number 1", false},
	})
}

func TestValidateEnumConst(t *testing.T) {
	runCases(t, []vcase{
		{"enum ok", `{"enum":["a","b",1]}`, `"b"`, "", false},
		{"enum number equality", `{"enum":[1]}`, `1.0`, "", false},
		{"enum bad", `{"enum":["a","b"]}`, `"c"`, `(root): must be one of "a", "b"; got "c"`, false},
		{"enum object", `{"enum":[{"a":[1,2]}]}`, `{"a":[1,2.0]}`, "", false},
		{"enum long ok", `{"enum":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,{"x":1}]}`, `{"x":1.0}`, "", false},
		{"enum long bad", `{"enum":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}`, `17`, `(root): must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … (7 more); got 17`, false},
		{"const ok", `{"const":{"a":null}}`, `{"a":null}`, "", false},
		{"const bad", `{"const":"x"}`, `"y"`, `(root): must be equal to "x"`, false},
		{"const array order", `{"const":[1,2]}`, `[2,1]`, `(root): must be equal to [1,2]`, false},
	})
}

func TestValidateNumbers(t *testing.T) {
	runCases(t, []vcase{
		{"minimum ok", `{"minimum":0}`, `0`, "", false},
		{"minimum bad", `{"properties":{"age":{"minimum":0}}}`, `{"age":-1}`, "/age: must be >= 0", false},
		{"maximum ok", `{"maximum":10.5}`, `10.5`, "", false},
		{"maximum bad", `{"maximum":10.5}`, `10.51`, "(root): must be <= 10.5", false},
		{"exclusiveMinimum bad", `{"exclusiveMinimum":0}`, `0`, "(root): must be > 0", false},
		{"exclusiveMinimum ok", `{"exclusiveMinimum":0}`, `1e-300`, "", false},
		{"exclusiveMaximum bad", `{"exclusiveMaximum":1}`, `1.0`, "(root): must be < 1", false},
		{"exact beyond float", `{"maximum":9007199254740992}`, `9007199254740993`, "(root): must be <= 9007199254740992", true},
		{"multipleOf ok", `{"multipleOf":0.01}`, `19.99`, "", false},
		{"multipleOf bad", `{"multipleOf":5}`, `12`, "(root): must be a multiple of 5", false},
		{"multipleOf float trap", `{"multipleOf":0.1}`, `0.3`, "", false},
		{"ignored for strings", `{"minimum":5}`, `"1"`, "", false},
		{"several problems", `{"minimum":5,"multipleOf":2}`, `3`, "(root): must be >= 5; (root): must be a multiple of 2", false},
	})
}

func TestValidateStrings(t *testing.T) {
	runCases(t, []vcase{
		{"minLength runes", `{"minLength":2}`, `"éé"`, "", false},
		{"minLength bad", `{"minLength":2}`, `"é"`, "(root): must be at least 2 characters long", false},
		{"maxLength runes", `{"maxLength":2}`, `"日本"`, "", false},
		{"maxLength bad", `{"maxLength":1}`, `"日本"`, "(root): must be at most 1 character long", false},
		{"pattern ok", `{"pattern":"^[a-z]+$"}`, `"abc"`, "", false},
		{"pattern unanchored", `{"pattern":"b"}`, `"abc"`, "", false},
		{"pattern bad", `{"pattern":"^[a-z]+$"}`, `"aB"`, `(root): must match the pattern "^[a-z]+$"`, false},
		{"format is an annotation", `{"format":"email"}`, `"not an email"`, "", false},
		{"ignored for numbers", `{"maxLength":1}`, `12345`, "", false},
	})
}

func TestValidateArrays(t *testing.T) {
	runCases(t, []vcase{
		{"items ok", `{"items":{"type":"integer"}}`, `[1,2]`, "", false},
		{"items bad", `{"items":{"type":"integer"}}`, `[1,"x"]`, `/1: must be an integer, got string "x"`, false},
		{"prefixItems", `{"prefixItems":[{"type":"string"},{"type":"integer"}]}`, `["a","b",true]`, `/1: must be an integer, got string "b"`, false},
		{"prefixItems with items", `{"prefixItems":[{"type":"string"}],"items":false}`, `["a",1]`, "/1: is not allowed here", false},
		{"prefixItems short", `{"prefixItems":[{"type":"string"},{"type":"integer"}]}`, `["a"]`, "", false},
		{"draft-07 items array", `{"items":[{"type":"string"}],"additionalItems":{"type":"integer"}}`, `["a",1,"b"]`, `/2: must be an integer, got string "b"`, false},
		{"minItems", `{"minItems":2}`, `[1]`, "(root): must contain at least 2 items", false},
		{"maxItems", `{"maxItems":1}`, `[1,2]`, "(root): must contain at most 1 item", false},
		{"uniqueItems ok", `{"uniqueItems":true}`, `[1,"1",[1],{"a":1}]`, "", false},
		{"uniqueItems bad", `{"uniqueItems":true}`, `[1,2,1.0]`, "(root): items must be unique, but items 0 and 2 are equal", false},
		{"uniqueItems objects", `{"uniqueItems":true}`, `[{"a":1,"b":2},{"b":2,"a":1}]`, "(root): items must be unique, but items 0 and 1 are equal", false},
		{"uniqueItems long", `{"uniqueItems":true}`, `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,3]`, "(root): items must be unique, but items 3 and 18 are equal", false},
		{"uniqueItems false", `{"uniqueItems":false}`, `[1,1]`, "", false},
		{"contains ok", `{"contains":{"const":"x"}}`, `["a","x"]`, "", false},
		{"contains bad", `{"contains":{"const":"x"}}`, `["a"]`, `(root): must contain at least 1 item matching the "contains" schema`, false},
		{"minContains", `{"contains":{"type":"integer"},"minContains":2}`, `[1,"a"]`, `(root): must contain at least 2 items matching the "contains" schema`, false},
		{"maxContains", `{"contains":{"type":"integer"},"maxContains":1}`, `[1,2]`, `(root): must contain at most 1 item matching the "contains" schema`, false},
		{"minContains zero", `{"contains":{"type":"integer"},"minContains":0}`, `[]`, "", false},
		{"unevaluatedItems", `{"prefixItems":[{}],"allOf":[{"prefixItems":[{},{}]}],"unevaluatedItems":false}`, `[1,2,3]`, "/2: is not allowed: the schema allows no further items", false},
		{"unevaluatedItems contains", `{"contains":{"type":"string"},"unevaluatedItems":{"type":"integer"}}`, `["a",1,"b"]`, "", false},
	})
}

func TestValidateObjects(t *testing.T) {
	runCases(t, []vcase{
		{"required ok", `{"required":["a"]}`, `{"a":null}`, "", false},
		{"required bad", `{"properties":{"address":{"required":["zip"]}}}`, `{"address":{}}`, "/address/zip: missing required property", false},
		{"additionalProperties false", `{"properties":{"a":{},"b":{}},"additionalProperties":false}`, `{"a":1,"c":2}`, "/c: unknown property (allowed properties: a, b)", false},
		{"additionalProperties false empty", `{"additionalProperties":false}`, `{"c":2}`, "/c: unknown property (no properties are allowed here)", false},
		{"additionalProperties schema", `{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}`, `{"a":"x","b":1,"c":"y"}`, `/c: must be an integer, got string "y"`, false},
		{"patternProperties", `{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, `{"x-a":"1","x-b":2}`, "/x-b: must be a string, got number 2", false},
		{"patternProperties closed", `{"patternProperties":{"^x-":{}},"additionalProperties":false}`, `{"y":1}`, "/y: unknown property (property names must match one of the patterns)", false},
		{"propertyNames", `{"propertyNames":{"maxLength":3}}`, `{"abcd":1}`, "/abcd: invalid property name: must be at most 3 characters long", false},
		{"minProperties", `{"minProperties":1}`, `{}`, "(root): must have at least 1 property", false},
		{"maxProperties", `{"maxProperties":1}`, `{"a":1,"b":2}`, "(root): must have at most 1 property", false},
		{"dependentRequired ok", `{"dependentRequired":{"card":["cvv"]}}`, `{"name":"x"}`, "", false},
		{"dependentRequired bad", `{"dependentRequired":{"card":["cvv"]}}`, `{"card":"1"}`, `/cvv: missing property, required when "card" is present`, false},
		{"draft-07 dependencies", `{"dependencies":{"card":["cvv"],"a":{"required":["b"]}}}`, `{"a":1,"card":1}`, `/cvv: missing property, required when "card" is present; /b: missing required property`, false},
		{"dependentSchemas", `{"dependentSchemas":{"a":{"properties":{"b":{"type":"string"}}}}}`, `{"a":1,"b":2}`, "/b: must be a string, got number 2", false},
		{"unevaluatedProperties", `{"allOf":[{"properties":{"a":{}}}],"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2,"c":3}`, "/c: unknown property (not allowed by unevaluatedProperties)", false},
		{"unevaluatedProperties failed branch", `{"anyOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`, "/a: unknown property (not allowed by unevaluatedProperties)", false},
		{"unevaluatedProperties if/then", `{"if":{"properties":{"k":{"const":1}}},"then":{"properties":{"v":{}}},"unevaluatedProperties":false}`, `{"k":1,"v":2}`, "", false},
		{"deterministic order", `{"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}}}`, `{"c":1,"a":1,"b":1}`, "/a: must be a string, got number 1; /b: must be a string, got number 1; /c: must be a string, got number 1", false},
	})
}

func TestValidateApplicators(t *testing.T) {
	runCases(t, []vcase{
		{"allOf", `{"allOf":[{"minimum":1},{"maximum":3}]}`, `4`, "(root): must be <= 3", false},
		{"anyOf ok", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `1`, "", false},
		{"anyOf bad", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `true`, "(root): must match at least one of the anyOf schemas: #0: must be a string, got boolean true; #1: must be an integer, got boolean true", false},
		{"anyOf nested path", `{"anyOf":[{"properties":{"a":{"type":"string"}}},{"required":["b"]}]}`, `{"a":1}`, "(root): must match at least one of the anyOf schemas: #0: /a: must be a string, got number 1; #1: /b: missing required property", false},
		{"anyOf many", `{"anyOf":[{"const":1},{"const":2},{"const":3},{"const":4},{"const":5}]}`, `6`, "(root): must match at least one of the anyOf schemas: #0: must be equal to 1; #1: must be equal to 2; #2: must be equal to 3; #3: must be equal to 4; … (1 more)", false},
		{"oneOf ok", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `1`, "", false},
		{"oneOf none", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `null`, "(root): must match exactly one of the oneOf schemas, but matches none: #0: must be a string, got null; #1: must be an integer, got null", false},
		{"oneOf two", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1`, "(root): must match exactly one of the oneOf schemas, but matches oneOf/0 and oneOf/1", false},
		{"not ok", `{"not":{"type":"string"}}`, `1`, "", false},
		{"not bad", `{"not":{"type":"string"}}`, `"x"`, `(root): must not match the schema in "not"`, false},
		{"if then", `{"if":{"properties":{"kind":{"const":"card"}}},"then":{"required":["number"]},"else":{"required":["iban"]}}`, `{"kind":"card"}`, "/number: missing required property", false},
		{"if else", `{"if":{"properties":{"kind":{"const":"card"}}},"then":{"required":["number"]},"else":{"required":["iban"]}}`, `{"kind":"bank"}`, "/iban: missing required property", false},
		{"then without if", `{"then":false}`, `1`, "", false},
		{"true schema", `true`, `{"anything":[1]}`, "", false},
		{"false schema", `false`, `1`, "(root): is not allowed here", false},
		{"false property", `{"properties":{"a":false}}`, `{"a":1}`, "/a: is not allowed here", false},
	})
}

func TestValidateRefs(t *testing.T) {
	runCases(t, []vcase{
		{"defs", `{"$defs":{"pos":{"minimum":0}},"properties":{"n":{"$ref":"#/$defs/pos"}}}`, `{"n":-1}`, "/n: must be >= 0", false},
		{"definitions", `{"definitions":{"pos":{"minimum":0}},"items":{"$ref":"#/definitions/pos"}}`, `[1,-1]`, "/1: must be >= 0", false},
		{"root ref recursion", `{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}}}`, `{"next":{"next":{"v":"x"}}}`, `/next/next/v: must be an integer, got string "x"`, false},
		{"pointer into properties", `{"properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`, `{"b":1}`, "/b: must be a string, got number 1", false},
		{"escaped pointer", `{"$defs":{"a/b":{"type":"string"},"c d":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a~1b"},"y":{"$ref":"#/$defs/c%20d"}}}`, `{"x":1,"y":"s"}`, `/x: must be a string, got number 1; /y: must be an integer, got string "s"`, false},
		{"anchor", `{"$defs":{"p":{"$anchor":"pos","minimum":0}},"$ref":"#pos"}`, `-1`, "(root): must be >= 0", false},
		{"ref siblings apply (2020-12)", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":1}`, `"ab"`, "(root): must be at most 1 character long", false},
		{"ref siblings ignored (draft-07)", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s","maxLength":1}`, `"ab"`, "", false},
		{"root id prefix", `{"$id":"https://example.com/s.json","$defs":{"i":{"type":"integer"}},"$ref":"https://example.com/s.json#/$defs/i"}`, `"x"`, `(root): must be an integer, got string "x"`, false},
		{"ref into unknown keyword", `{"x-shared":{"type":"integer"},"$ref":"#/x-shared"}`, `1.5`, "(root): must be an integer, got number 1.5", false},
	})
}

func TestValidateRefCycleStops(t *testing.T) {
	for _, schema := range []string{
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}`,
		`{"allOf":[{"$ref":"#"},{"$ref":"#"},{"$ref":"#"}]}`,
	} {
		s, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("Compile(%s): %v", schema, err)
		}
		err = s.ValidateJSON([]byte(`{"a":[1,2,3]}`))
		if !errors.Is(err, ErrTooComplex) {
			t.Errorf("Validate against %s: got %v, want ErrTooComplex", schema, err)
		}
	}
}

func TestValidateBudget(t *testing.T) {
	// Each level of the chain doubles the work: 2^40 evaluations if
	// unbounded. extra adds keywords whose own cost grows with the
	// instance, which the budget must account for too.
	chain := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{"$defs":{`)
		for i := range 40 {
			next := `{"$ref":"#/$defs/d` + itoa(i+1) + `"}`
			b.WriteString(`"d` + itoa(i) + `":{` + extra + `"anyOf":[` + next + `,` + next + `]},`)
		}
		b.WriteString(`"d40":false},"$ref":"#/$defs/d0"}`)
		return b.String()
	}
	longArray := "[" + strings.Repeat(`"abcdefghijklmnopqrstuvwxyz",`, 2000) + `"x"]`
	uniqueArray := "["
	for i := range 2000 {
		uniqueArray += `"abcdefghijklmnopqrstuvwxyz` + itoa(i) + `",`
	}
	uniqueArray += `"x"]`
	longString := `"` + strings.Repeat("abcdefghij", 10000) + `"`
	bigObject := "{"
	for i := range 2000 {
		bigObject += `"k` + itoa(i) + `":1,`
	}
	bigObject += `"z":1}`
	tests := []struct {
		name, extra, inst string
	}{
		{"plain", "", `1`},
		{"uniqueItems", `"uniqueItems":true,`, uniqueArray},
		{"const", `"not":{"const":` + longArray + `},`, longArray},
		{"enum", `"enum":[` + longArray + `,1],`, longArray},
		{"pattern", `"pattern":"j$","minLength":1,`, longString},
		{"object keys", `"additionalProperties":true,"patternProperties":{"^q":true},`, bigObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile([]byte(chain(tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = s.ValidateJSON([]byte(tt.inst))
			if !errors.Is(err, ErrTooComplex) {
				t.Errorf("got %v, want ErrTooComplex", err)
			}
			t.Logf("stopped after %v", time.Since(start))
		})
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestValidateGoValues(t *testing.T) {
	s := MustCompile(`{"type":"object","properties":{"n":{"type":"integer","maximum":3},"tags":{"type":"array","items":{"type":"string"}}},"required":["n"]}`)
	type args struct {
		N    int      `json:"n"`
		Tags []string `json:"tags"`
	}
	tests := []struct {
		name string
		inst any
		want string
	}{
		{"map with int", map[string]any{"n": 2}, ""},
		{"map with uint64", map[string]any{"n": uint64(4)}, "/n: must be <= 3"},
		{"struct", args{N: 1, Tags: []string{"a"}}, ""},
		{"struct bad", args{N: 9}, "/n: must be <= 3; /tags: must be an array, got null"},
		{"typed map", map[string]int{"n": 1}, ""},
		{"invalid json.Number", map[string]any{"n": json.Number("0x1")}, `(root): cannot be represented as JSON: json: invalid number literal "0x1"`},
		{"channel", map[string]any{"n": make(chan int)}, "(root): cannot be represented as JSON: json: unsupported type: chan int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := s.Validate(tt.inst); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidationErrorDetails(t *testing.T) {
	s := MustCompile(`{"items":{"type":"string"}}`)
	err := s.ValidateJSON([]byte(`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]`))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %T, want *ValidationError", err)
	}
	if got, want := len(ve.Problems), maxProblems; got != want {
		t.Errorf("got %d problems, want %d", got, want)
	}
	if !ve.Truncated {
		t.Errorf("got Truncated false, want true")
	}
	if got, want := ve.Problems[3], (Problem{Path: "/3", Message: "must be a string, got number 4"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	want := "/0: must be a string, got number 1; /1: must be a string, got number 2; /2: must be a string, got number 3; /3: must be a string, got number 4; /4: must be a string, got number 5 (and at least 15 more)"
	if got := err.Error(); got != want {
		t.Errorf("Error():\ngot  %q\nwant %q", got, want)
	}
}

func TestValidateJSONRejectsMalformed(t *testing.T) {
	s := MustCompile(`{}`)
	for _, raw := range []string{``, `{`, `{} {}`, `[1,]`} {
		err := s.ValidateJSON([]byte(raw))
		var ve *ValidationError
		if err == nil || errors.As(err, &ve) {
			t.Errorf("ValidateJSON(%q): got %v, want a decoding error", raw, err)
		}
	}
}

// toolSchema is the JSON Schema 2020-12 example of the MCP specification
// style: $schema, $defs, a $ref and closed objects.
const toolSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "Full name"},
    "age": {"type": "integer", "minimum": 0},
    "email": {"type": "string", "format": "email"},
    "address": {"$ref": "#/$defs/address"},
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 5}
  },
  "required": ["name", "address"],
  "additionalProperties": false,
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "zip"],
      "additionalProperties": false
    }
  }
}`

func TestToolSchema(t *testing.T) {
	s, err := Compile([]byte(toolSchema))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	tests := []struct {
		inst, want string
	}{
		{`{"name":"Ada","age":36,"address":{"street":"Main St","zip":"12345"},"tags":["a","b"]}`, ""},
		{`{"name":"Ada","address":{"street":"Main St","zip":"12345"},"email":"not checked"}`, ""},
		{`{"name":"","age":-1,"address":{"zip":"1234","city":"x"},"extra":true}`,
			`/address/street: missing required property; /address/zip: must match the pattern "^[0-9]{5}$"; /address/city: unknown property (allowed properties: street, zip); /age: must be >= 0; /name: must be at least 1 character long (and 1 more)`},
		{`{"address":{"street":"s","zip":"00000"}}`, "/name: missing required property"},
		{`[]`, "(root): must be an object, got array"},
	}
	for _, tt := range tests {
		got := ""
		if err := s.ValidateJSON([]byte(tt.inst)); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("ValidateJSON(%s):\ngot  %q\nwant %q", tt.inst, got, tt.want)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s, err := Compile([]byte(toolSchema))
	if err != nil {
		b.Fatal(err)
	}
	var inst any
	raw := []byte(`{"name":"Ada Lovelace","age":36,"email":"ada@example.com","address":{"street":"12 St James's Square","zip":"12345"},"tags":["math","engines","poetry"]}`)
	if err := json.Unmarshal(raw, &inst); err != nil {
		b.Fatal(err)
	}
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(inst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ValidateJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.ValidateJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestValidateConcurrent(t *testing.T) {
	s := MustCompile(toolSchema)
	good := []byte(`{"name":"Ada","address":{"street":"s","zip":"12345"}}`)
	bad := []byte(`{"name":"","address":{"street":"s","zip":"x"}}`)
	done := make(chan error)
	for i := range 8 {
		go func() {
			var err error
			for range 200 {
				if e := s.ValidateJSON(good); e != nil {
					err = e
				}
				if e := s.ValidateJSON(bad); e == nil {
					err = errors.New("invalid instance passed")
				}
			}
			if err != nil {
				err = fmt.Errorf("goroutine %d: %w", i, err)
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestValidatePasses lists instances that must pass, one or more per
// keyword whose failures are tested elsewhere.
func TestValidatePasses(t *testing.T) {
	runCases(t, []vcase{
		{"properties", `{"properties":{"a":{"type":"string"}}}`, `{"a":"x","b":1}`, "", false},
		{"properties ignore non-objects", `{"properties":{"a":{"type":"string"}},"required":["a"]}`, `[1]`, "", false},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1}`, "", false},
		{"patternProperties", `{"patternProperties":{"^x-":{"type":"string"}}}`, `{"x-a":"1","y":2}`, "", false},
		{"propertyNames", `{"propertyNames":{"pattern":"^[a-z]+$"}}`, `{"abc":1,"d":2}`, "", false},
		{"minProperties maxProperties", `{"minProperties":1,"maxProperties":2}`, `{"a":1,"b":2}`, "", false},
		{"minItems maxItems", `{"minItems":1,"maxItems":2}`, `[1,2]`, "", false},
		{"items ignore non-arrays", `{"items":false,"minItems":3}`, `"x"`, "", false},
		{"minimum maximum", `{"minimum":-1.5,"maximum":1.5}`, `-1.5`, "", false},
		{"exclusiveMaximum", `{"exclusiveMaximum":1}`, `0.9999999999`, "", false},
		{"allOf", `{"allOf":[{"type":"integer"},{"minimum":1}]}`, `2`, "", false},
		{"oneOf objects", `{"oneOf":[{"required":["a"]},{"required":["b"]}]}`, `{"b":1}`, "", false},
		{"if without then", `{"if":{"type":"string"},"else":{"type":"integer"}}`, `"x"`, "", false},
		{"ref to defs", `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`, `{"a":"x"}`, "", false},
		{"ref to definitions", `{"definitions":{"s":{"type":"string"}},"items":{"$ref":"#/definitions/s"}}`, `["x"]`, "", false},
		{"recursive ref", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`, `{"kids":[{"kids":[]},{"kids":[{}]}]}`, "", false},
		{"dependentRequired", `{"dependentRequired":{"card":["cvv"]}}`, `{"card":1,"cvv":2}`, "", false},
		{"unevaluatedProperties", `{"properties":{"a":{}},"patternProperties":{"^x":{}},"unevaluatedProperties":false}`, `{"a":1,"xy":2}`, "", false},
		{"unknown keywords", `{"title":"t","default":1,"examples":[1],"x-anything":{"type":"string"},"deprecated":true,"$comment":"c"}`, `1`, "", false},
	})
}
