package jsonschema

import (
	"encoding/json"
	"reflect"
	"testing"
)

func decodeSchema(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test schema: %v", err)
	}
	return m
}

func TestMCPHeadersAccept(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []HeaderParam
	}{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, nil},
		{"top level", `{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"count":{"type":"integer","x-mcp-header":"Count"},
			"dry":{"type":"boolean","x-mcp-header":"Dry-Run"}}}`,
			[]HeaderParam{
				{Name: "Count", Path: []string{"count"}, Type: "integer"},
				{Name: "Dry-Run", Path: []string{"dry"}, Type: "boolean"},
				{Name: "Region", Path: []string{"region"}, Type: "string"},
			}},
		{"nested properties", `{"type":"object","properties":{"target":{"type":"object","properties":{"tenant":{"type":"string","x-mcp-header":"Tenant"}}}}}`,
			[]HeaderParam{{Name: "Tenant", Path: []string{"target", "tenant"}, Type: "string"}}},
		{"nullable", `{"properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`,
			[]HeaderParam{{Name: "A", Path: []string{"a"}, Type: "string"}}},
		{"token characters", "{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"!#$%&'*+-.^_`|~09azAZ\"}}}",
			[]HeaderParam{{Name: "!#$%&'*+-.^_`|~09azAZ", Path: []string{"a"}, Type: "string"}}},
		{"property named like the keyword", `{"properties":{"x-mcp-header":{"type":"string"}}}`, nil},
		{"annotation-like data is not an annotation", `{"properties":{"a":{"type":"object","default":{"x-mcp-header":"X"},"enum":[{"x-mcp-header":"Y"}]}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MCPHeaders(decodeSchema(t, tt.schema))
			if err != nil {
				t.Fatalf("MCPHeaders: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMCPHeadersReject(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"empty name", `{"properties":{"a":{"type":"string","x-mcp-header":""}}}`,
			"jsonschema: x-mcp-header at /properties/a: \"\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"},
		{"space", `{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`,
			"jsonschema: x-mcp-header at /properties/a: \"A B\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"},
		{"CRLF", `{"properties":{"a":{"type":"string","x-mcp-header":"A\r\nX-Evil: 1"}}}`,
			"jsonschema: x-mcp-header at /properties/a: \"A\\r\\nX-Evil: 1\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"},
		{"colon", `{"properties":{"a":{"type":"string","x-mcp-header":"A:B"}}}`,
			"jsonschema: x-mcp-header at /properties/a: \"A:B\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"},
		{"non-ASCII", `{"properties":{"a":{"type":"string","x-mcp-header":"Région"}}}`,
			"jsonschema: x-mcp-header at /properties/a: \"Région\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"},
		{"not a string", `{"properties":{"a":{"type":"string","x-mcp-header":true}}}`,
			"jsonschema: x-mcp-header at /properties/a: must be a string"},
		{"duplicate", `{"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"REGION"}}}`,
			`jsonschema: x-mcp-header at /properties/b: header name "REGION" is already used at /properties/a (names are case-insensitive)`},
		{"number", `{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}`,
			`jsonschema: x-mcp-header at /properties/a: type "number" cannot be mirrored into a header: only string, integer and boolean can`},
		{"object", `{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}`,
			`jsonschema: x-mcp-header at /properties/a: type "object" cannot be mirrored into a header: only string, integer and boolean can`},
		{"no type", `{"properties":{"a":{"x-mcp-header":"A"}}}`,
			"jsonschema: x-mcp-header at /properties/a: the property must declare type string, integer or boolean"},
		{"two types", `{"properties":{"a":{"type":["string","integer"],"x-mcp-header":"A"}}}`,
			`jsonschema: x-mcp-header at /properties/a: the property must have a single type (string, integer or boolean), got ["string","integer"]`},
		{"root", `{"type":"string","x-mcp-header":"A"}`,
			"jsonschema: x-mcp-header on the root schema: only properties can be mirrored into headers"},
		{"items", `{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`,
			`jsonschema: x-mcp-header at /properties/a/items: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"prefixItems", `{"properties":{"a":{"prefixItems":[{"type":"string","x-mcp-header":"A"}]}}}`,
			`jsonschema: x-mcp-header at /properties/a/prefixItems/0: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"anyOf", `{"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
			`jsonschema: x-mcp-header at /anyOf/0/properties/a: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"oneOf", `{"properties":{"a":{"oneOf":[{"type":"string","x-mcp-header":"A"}]}}}`,
			`jsonschema: x-mcp-header at /properties/a/oneOf/0: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"allOf", `{"allOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
			`jsonschema: x-mcp-header at /allOf/0/properties/a: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"not", `{"not":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`,
			`jsonschema: x-mcp-header at /not/properties/a: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"then", `{"if":{},"then":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`,
			`jsonschema: x-mcp-header at /then/properties/a: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"defs behind ref", `{"properties":{"a":{"$ref":"#/$defs/h"}},"$defs":{"h":{"type":"string","x-mcp-header":"A"}}}`,
			`jsonschema: x-mcp-header at /$defs/h: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"additionalProperties", `{"additionalProperties":{"type":"string","x-mcp-header":"A"}}`,
			`jsonschema: x-mcp-header at /additionalProperties: only properties reached through "properties" keys from the root can be mirrored into headers`},
		{"patternProperties", `{"patternProperties":{"^a":{"type":"string","x-mcp-header":"A"}}}`,
			`jsonschema: x-mcp-header at /patternProperties/^a: only properties reached through "properties" keys from the root can be mirrored into headers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MCPHeaders(decodeSchema(t, tt.schema))
			if err == nil {
				t.Fatalf("got nil error, want %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestMCPHeadersFromFor(t *testing.T) {
	type target struct {
		Tenant string `json:"tenant" mcpheader:"Tenant"`
	}
	type args struct {
		Region string  `json:"region" mcpheader:"Region"`
		Limit  *int    `json:"limit,omitempty" mcpheader:"Limit"`
		Target target  `json:"target"`
		Score  float64 `json:"score"`
	}
	s, err := ForType[args]()
	if err != nil {
		t.Fatal(err)
	}
	got, err := MCPHeaders(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []HeaderParam{
		{Name: "Limit", Path: []string{"limit"}, Type: "integer"},
		{Name: "Region", Path: []string{"region"}, Type: "string"},
		{Name: "Tenant", Path: []string{"target", "tenant"}, Type: "string"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
