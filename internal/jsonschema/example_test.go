package jsonschema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/jsonschema"
)

func ExampleForType() {
	type SearchArgs struct {
		Query  string   `json:"query" jsonschema:"what to search for"`
		Limit  int      `json:"limit,omitempty"`
		Region string   `json:"region" enum:"eu,us" mcpheader:"Region"`
		Tags   []string `json:"tags,omitempty"`
	}
	schema, err := jsonschema.ForType[SearchArgs]()
	if err != nil {
		panic(err)
	}
	out, _ := json.MarshalIndent(schema, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "additionalProperties": false,
	//   "properties": {
	//     "limit": {
	//       "type": "integer"
	//     },
	//     "query": {
	//       "description": "what to search for",
	//       "type": "string"
	//     },
	//     "region": {
	//       "enum": [
	//         "eu",
	//         "us"
	//       ],
	//       "type": "string",
	//       "x-mcp-header": "Region"
	//     },
	//     "tags": {
	//       "items": {
	//         "type": "string"
	//       },
	//       "type": "array"
	//     }
	//   },
	//   "required": [
	//     "query",
	//     "region"
	//   ],
	//   "type": "object"
	// }
}

func ExampleSchema_ValidateJSON() {
	schema := jsonschema.MustCompile(`{
		"type": "object",
		"properties": {
			"age": {"type": "integer", "minimum": 0},
			"address": {
				"type": "object",
				"properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
				"required": ["zip"]
			}
		},
		"additionalProperties": false
	}`)
	err := schema.ValidateJSON([]byte(`{"age": -1, "address": {}, "nmae": "Ada"}`))
	fmt.Println(err)

	var verr *jsonschema.ValidationError
	if errors.As(err, &verr) {
		for _, p := range verr.Problems {
			fmt.Printf("%q %s\n", p.Path, p.Message)
		}
	}
	// Output:
	// /address/zip: missing required property; /age: must be >= 0; /nmae: unknown property (allowed properties: address, age)
	// "/address/zip" missing required property
	// "/age" must be >= 0
	// "/nmae" unknown property (allowed properties: address, age)
}

func ExampleMCPHeaders() {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tenant": map[string]any{"type": "string", "x-mcp-header": "Tenant"},
			"query":  map[string]any{"type": "string"},
		},
	}
	params, err := jsonschema.MCPHeaders(schema)
	fmt.Println(params, err)

	schema["properties"].(map[string]any)["score"] = map[string]any{"type": "number", "x-mcp-header": "Score"}
	_, err = jsonschema.MCPHeaders(schema)
	fmt.Println(err)
	// Output:
	// [{Tenant [tenant] string}] <nil>
	// jsonschema: x-mcp-header at /properties/score: type "number" cannot be mirrored into a header: only string, integer and boolean can
}
