package jsonschema

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCompileValidate feeds arbitrary schema documents and instances to
// Compile, ValidateJSON and MCPHeaders. None may panic or run away, and
// validation errors must be *ValidationError values.
func FuzzCompileValidate(f *testing.F) {
	seeds := []struct{ schema, inst string }{
		{toolSchema, `{"name":"Ada","address":{"street":"s","zip":"12345"}}`},
		{toolSchema, `{"name":"","age":-1.5,"address":{"zip":"x"},"tags":["a","a"]}`},
		{`{"type":["integer","null"],"minimum":0,"multipleOf":0.5}`, `1.5e0`},
		{`{"enum":[1,"a",null,[1],{"a":1}]}`, `{"a":1.0}`},
		{`{"items":[{"type":"string"}],"additionalItems":false,"uniqueItems":true}`, `["a",1]`},
		{`{"prefixItems":[{}],"items":{"type":"number"},"contains":{"const":2},"maxContains":1}`, `[0,2,2]`},
		{`{"properties":{"a":{"$ref":"#"}},"patternProperties":{"^b":{"maxLength":2}},"additionalProperties":false}`, `{"a":{"a":{"bb":"xyz"}}}`},
		{`{"propertyNames":{"pattern":"^[a-z]+$"},"minProperties":1,"maxProperties":2,"dependentRequired":{"a":["b"]}}`, `{"a":1,"C":2}`},
		{`{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}`, `1`},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `null`},
		{`{"oneOf":[{"type":"integer"},{"minimum":2}],"not":{"const":3}}`, `3`},
		{`{"if":{"required":["k"]},"then":{"properties":{"v":{"type":"string"}}},"else":false}`, `{"k":1,"v":2}`},
		{`{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`},
		{`{"prefixItems":[{}],"unevaluatedItems":{"type":"string"}}`, `[1,2]`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"x":{"minimum":1}},"$ref":"#/definitions/x","dependencies":{"a":{"required":["b"]}}}`, `0`},
		{`{"$defs":{"p":{"$anchor":"pos","exclusiveMinimum":0}},"$ref":"#pos","exclusiveMaximum":1e400}`, `1e-400`},
		{`{"properties":{"h":{"type":"string","x-mcp-header":"H"}}}`, `{"h":"v"}`},
		{`{"maximum":9007199254740992}`, `9007199254740993`},
		{`true`, `[]`},
		{`false`, `{}`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.schema), []byte(s.inst))
	}
	f.Fuzz(func(t *testing.T, schema, inst []byte) {
		if len(schema) > 1<<14 || len(inst) > 1<<14 {
			return
		}
		var m map[string]any
		if json.Unmarshal(schema, &m) == nil {
			_, _ = MCPHeaders(m)
		}
		s, err := Compile(schema)
		if err != nil {
			return
		}
		err = s.ValidateJSON(inst)
		var ve *ValidationError
		if err != nil && errors.As(err, &ve) && len(ve.Problems) == 0 {
			t.Fatalf("ValidationError without problems")
		}
		var v any
		if json.Unmarshal(inst, &v) == nil {
			err := s.Validate(v)
			if err != nil && !errors.As(err, &ve) {
				t.Fatalf("Validate returned %T, want *ValidationError", err)
			}
		}
	})
}
