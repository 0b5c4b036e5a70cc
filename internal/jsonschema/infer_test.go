package jsonschema

import (
	"bytes"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// canonJSON re-marshals a JSON text so that documents compare by content.
func canonJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type (
	address struct {
		Street string `json:"street" jsonschema:"street and number"`
		Zip    string `json:"zip,omitempty"`
	}
	tagged struct {
		Name     string   `json:"name"`
		Age      int      `json:"age,omitempty"`
		Nick     string   `json:",omitzero"`
		Skip     string   `json:"-"`
		Ptr      *int     `json:"ptr"`
		Addr     *address `json:"addr"`
		Color    string   `json:"color" enum:"red, green,blue"`
		Tags     []string `json:"tags,omitempty" enum:"a,b"`
		Count    int64    `json:"count,string"`
		Token    string   `json:"token" mcpheader:"Token"`
		internal int
	}
	Base struct {
		ID    string `json:"id"`
		Shade string
	}
	Extra struct {
		Note string `json:"note"`
	}
	other struct {
		Shade string
	}
	embedding struct {
		Base
		*Extra
		other
		Own string `json:"own"`
	}
	tie1      struct{ X int }
	tie2      struct{ X int }
	tieBroken struct {
		tie1
		tie2
		Y int
	}
	tieTagged struct {
		tie1
		T tie2Tagged
	}
	tie2Tagged struct {
		X int `json:"X"`
	}
	namedEmbed struct {
		Base `json:"base"`
	}
	list struct {
		Value int   `json:"value"`
		Next  *list `json:"next,omitempty"`
	}
	tree struct {
		Root *treeNode `json:"root"`
		Size int       `json:"size"`
	}
	treeNode struct {
		Kids []*treeNode `json:"kids"`
	}
	forest    []forest
	selfEmbed struct {
		*selfEmbed
		X int
	}
	stamp struct {
		At  time.Time       `json:"at"`
		Raw json.RawMessage `json:"raw"`
		Any any             `json:"any"`
		IP  net.IP          `json:"ip"`
		Num json.Number     `json:"num"`
	}
)

func TestForTypes(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"bool", reflect.TypeFor[bool](), `{"type":"boolean"}`},
		{"int", reflect.TypeFor[int](), `{"type":"integer"}`},
		{"int8", reflect.TypeFor[int8](), `{"type":"integer"}`},
		{"uint", reflect.TypeFor[uint](), `{"type":"integer","minimum":0}`},
		{"uint64", reflect.TypeFor[uint64](), `{"type":"integer","minimum":0}`},
		{"float32", reflect.TypeFor[float32](), `{"type":"number"}`},
		{"float64", reflect.TypeFor[float64](), `{"type":"number"}`},
		{"string", reflect.TypeFor[string](), `{"type":"string"}`},
		{"bytes", reflect.TypeFor[[]byte](), `{"type":"string","contentEncoding":"base64"}`},
		{"slice", reflect.TypeFor[[]int](), `{"type":"array","items":{"type":"integer"}}`},
		{"array", reflect.TypeFor[[2]string](), `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2}`},
		{"byte array", reflect.TypeFor[[2]byte](), `{"type":"array","items":{"type":"integer","minimum":0},"minItems":2,"maxItems":2}`},
		{"map", reflect.TypeFor[map[string]float64](), `{"type":"object","additionalProperties":{"type":"number"}}`},
		{"map int keys", reflect.TypeFor[map[int]bool](), `{"type":"object","additionalProperties":{"type":"boolean"},"propertyNames":{"pattern":"^-?[0-9]+$"}}`},
		{"map uint keys", reflect.TypeFor[map[uint16]bool](), `{"type":"object","additionalProperties":{"type":"boolean"},"propertyNames":{"pattern":"^[0-9]+$"}}`},
		{"map any", reflect.TypeFor[map[string]any](), `{"type":"object","additionalProperties":{}}`},
		{"pointer", reflect.TypeFor[**int](), `{"type":"integer"}`},
		{"any", reflect.TypeFor[any](), `{}`},
		{"error interface", reflect.TypeFor[error](), `{}`},
		{"raw message", reflect.TypeFor[json.RawMessage](), `{}`},
		{"time", reflect.TypeFor[time.Time](), `{"type":"string","format":"date-time"}`},
		{"time pointer", reflect.TypeFor[*time.Time](), `{"type":"string","format":"date-time"}`},
		{"text marshaler", reflect.TypeFor[net.IP](), `{"type":"string"}`},
		{"empty struct", reflect.TypeFor[struct{}](), `{"type":"object","properties":{},"additionalProperties":false}`},
		{"struct pointer root", reflect.TypeFor[*address](), `{"type":"object","properties":{"street":{"type":"string","description":"street and number"},"zip":{"type":"string"}},"required":["street"],"additionalProperties":false}`},
		{"tags", reflect.TypeFor[tagged](), `{
			"type":"object",
			"properties":{
				"name":{"type":"string"},
				"age":{"type":"integer"},
				"Nick":{"type":"string"},
				"ptr":{"type":"integer"},
				"addr":{"type":"object","properties":{"street":{"type":"string","description":"street and number"},"zip":{"type":"string"}},"required":["street"],"additionalProperties":false},
				"color":{"type":"string","enum":["red","green","blue"]},
				"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},
				"count":{"type":"string"},
				"token":{"type":"string","x-mcp-header":"Token"}
			},
			"required":["name","color","count","token"],
			"additionalProperties":false}`},
		{"embedded", reflect.TypeFor[embedding](), `{
			"type":"object",
			"properties":{"id":{"type":"string"},"note":{"type":"string"},"own":{"type":"string"}},
			"required":["id","own"],
			"additionalProperties":false}`},
		{"ambiguous embedded fields vanish", reflect.TypeFor[tieBroken](), `{"type":"object","properties":{"Y":{"type":"integer"}},"required":["Y"],"additionalProperties":false}`},
		{"embedded with json name is a field", reflect.TypeFor[namedEmbed](), `{
			"type":"object",
			"properties":{"base":{"type":"object","properties":{"id":{"type":"string"},"Shade":{"type":"string"}},"required":["id","Shade"],"additionalProperties":false}},
			"required":["base"],
			"additionalProperties":false}`},
		{"special field types", reflect.TypeFor[stamp](), `{
			"type":"object",
			"properties":{"at":{"type":"string","format":"date-time"},"raw":{},"any":{},"ip":{"type":"string"},"num":{"type":"number"}},
			"required":["at","raw","any","ip","num"],
			"additionalProperties":false}`},
		{"recursive root", reflect.TypeFor[list](), `{
			"type":"object",
			"properties":{"value":{"type":"integer"},"next":{"$ref":"#"}},
			"required":["value"],
			"additionalProperties":false}`},
		{"recursive inner type", reflect.TypeFor[tree](), `{
			"type":"object",
			"properties":{"root":{"$ref":"#/$defs/treeNode"},"size":{"type":"integer"}},
			"required":["size"],
			"additionalProperties":false,
			"$defs":{"treeNode":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/treeNode"}}},"required":["kids"],"additionalProperties":false}}}`},
		{"recursive slice", reflect.TypeFor[forest](), `{"type":"array","items":{"$ref":"#"}}`},
		{"recursive under slice root", reflect.TypeFor[[]list](), `{
			"type":"array",
			"items":{"$ref":"#/$defs/list"},
			"$defs":{"list":{"type":"object","properties":{"value":{"type":"integer"},"next":{"$ref":"#/$defs/list"}},"required":["value"],"additionalProperties":false}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := For(tt.typ)
			if err != nil {
				t.Fatalf("For(%v): %v", tt.typ, err)
			}
			raw, err := json.Marshal(s)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if got, want := string(raw), canonJSON(t, tt.want); got != want {
				t.Errorf("For(%v):\ngot  %s\nwant %s", tt.typ, got, want)
			}
			if _, err := Compile(raw); err != nil {
				t.Errorf("inferred schema does not compile: %v", err)
			}
		})
	}
}

func TestForTieBrokenByTag(t *testing.T) {
	// A tagged field wins over an untagged one at the same depth.
	type inner struct {
		X int `json:"X"`
	}
	type outer struct {
		tie1
		inner
	}
	s, err := ForType[outer]()
	if err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if len(props) != 1 || props["X"] == nil {
		t.Errorf("got properties %v, want only X", props)
	}
	if _, err := ForType[tieTagged](); err != nil {
		t.Errorf("ForType[tieTagged]: %v", err)
	}
}

func TestForErrors(t *testing.T) {
	type withChan struct {
		Events chan int `json:"events"`
	}
	type ignoredChan struct {
		Events chan int `json:"-"`
		OK     bool     `json:"ok"`
	}
	type enumOnInt struct {
		N int `json:"n" enum:"1,2"`
	}
	type headerOnNumber struct {
		F float64 `json:"f" mcpheader:"F"`
	}
	type headerBadName struct {
		S string `json:"s" mcpheader:"Bad Name"`
	}
	type headerDup struct {
		A string `json:"a" mcpheader:"Region"`
		B string `json:"b" mcpheader:"region"`
	}
	type headerInSlice struct {
		Items []headerDup `json:"items"`
	}
	tests := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"chan", reflect.TypeFor[chan int](), "jsonschema: cannot infer a schema for chan int (type chan int): chan values have no JSON encoding"},
		{"func", reflect.TypeFor[func()](), "jsonschema: cannot infer a schema for func() (type func()): func values have no JSON encoding"},
		{"complex", reflect.TypeFor[complex128](), "jsonschema: cannot infer a schema for complex128 (type complex128): complex128 values have no JSON encoding"},
		{"struct field", reflect.TypeFor[withChan](), "jsonschema: cannot infer a schema for jsonschema.withChan.Events (type chan int): chan values have no JSON encoding"},
		{"map key", reflect.TypeFor[map[[2]int]string](), "jsonschema: cannot infer a schema for map[[2]int]string (type map[[2]int]string): map keys of type [2]int have no JSON encoding"},
		{"enum on int", reflect.TypeFor[enumOnInt](), "jsonschema: jsonschema.enumOnInt.N: the enum tag needs a string field or a slice of strings"},
		{"header on number", reflect.TypeFor[headerOnNumber](), `jsonschema: x-mcp-header at /properties/f: type "number" cannot be mirrored into a header: only string, integer and boolean can (schema inferred for jsonschema.headerOnNumber)`},
		{"header bad name", reflect.TypeFor[headerBadName](), "jsonschema: x-mcp-header at /properties/s: \"Bad Name\" is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~) (schema inferred for jsonschema.headerBadName)"},
		{"header duplicate", reflect.TypeFor[headerDup](), `jsonschema: x-mcp-header at /properties/b: header name "region" is already used at /properties/a (names are case-insensitive) (schema inferred for jsonschema.headerDup)`},
		{"header under items", reflect.TypeFor[headerInSlice](), `jsonschema: x-mcp-header at /properties/items/items/properties/a: only properties reached through "properties" keys from the root can be mirrored into headers (schema inferred for jsonschema.headerInSlice)`},
		{"nil", nil, "jsonschema: cannot infer a schema for a nil type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := For(tt.typ)
			if err == nil {
				t.Fatalf("For(%v): got nil error, want %q", tt.typ, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("For(%v):\ngot  %q\nwant %q", tt.typ, got, tt.want)
			}
		})
	}
	if _, err := ForType[ignoredChan](); err != nil {
		t.Errorf("a field tagged json:\"-\" must be ignored, got %v", err)
	}
}

func TestForDeterministic(t *testing.T) {
	var first []byte
	for i := range 20 {
		s, err := ForType[tagged]()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(s)
		if i == 0 {
			first = raw
		} else if !bytes.Equal(raw, first) {
			t.Fatalf("marshalling run %d differs:\ngot  %s\nwant %s", i, raw, first)
		}
	}
}

// TestForRoundTrip checks that values of a type validate against the
// schema inferred for it, and that typical mistakes are caught.
func TestForRoundTrip(t *testing.T) {
	type input struct {
		Query   string            `json:"query" jsonschema:"what to search for"`
		Limit   uint8             `json:"limit,omitempty"`
		Filters map[string]string `json:"filters,omitempty"`
		Since   *time.Time        `json:"since,omitempty"`
		Tree    *tree             `json:"tree,omitempty"`
		Data    []byte            `json:"data,omitempty"`
	}
	s, err := ForType[input]()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := CompileMap(s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	v := input{Query: "x", Limit: 3, Filters: map[string]string{"a": "b"}, Since: &now,
		Tree: &tree{Root: &treeNode{Kids: []*treeNode{{Kids: []*treeNode{}}}}}, Data: []byte{1, 2}}
	raw, _ := json.Marshal(v)
	if err := schema.ValidateJSON(raw); err != nil {
		t.Errorf("marshalled value %s does not validate: %v", raw, err)
	}
	if err := schema.Validate(v); err != nil {
		t.Errorf("Go value does not validate: %v", err)
	}
	bad := `{"query":3,"limit":-1,"extra":1}`
	want := "/limit: must be >= 0; /query: must be a string, got number 3; /extra: unknown property (allowed properties: data, filters, limit, query, since, tree)"
	if err := schema.ValidateJSON([]byte(bad)); err == nil || err.Error() != want {
		t.Errorf("ValidateJSON(%s):\ngot  %v\nwant %s", bad, err, want)
	}
	if got := s["type"]; got != "object" {
		t.Errorf("root type: got %v, want object", got)
	}
	if !strings.Contains(string(raw), `"data":"AQI="`) {
		t.Errorf("test assumption: []byte marshals as base64, got %s", raw)
	}
}

// TestForMatchesEncodingJSON checks the inferred property names against
// the keys encoding/json actually writes.
func TestForMatchesEncodingJSON(t *testing.T) {
	one := 1
	values := []any{
		embedding{Extra: &Extra{}},
		tieBroken{},
		tieTagged{},
		namedEmbed{},
		tagged{internal: 1, Age: 1, Nick: "n", Ptr: &one, Addr: &address{}, Color: "red", Tags: []string{"a"}},
		stamp{Raw: json.RawMessage(`1`), Num: "1"},
		selfEmbed{selfEmbed: &selfEmbed{}, X: 1},
	}
	for _, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		s, err := For(reflect.TypeOf(v))
		if err != nil {
			t.Fatal(err)
		}
		props := s["properties"].(map[string]any)
		for k := range obj {
			if _, ok := props[k]; !ok {
				t.Errorf("%T: encoding/json writes %q, the schema has no such property", v, k)
			}
		}
		for k := range props {
			if _, ok := obj[k]; !ok {
				t.Errorf("%T: the schema has property %q, encoding/json does not write it", v, k)
			}
		}
		compiled, err := CompileMap(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := compiled.ValidateJSON(raw); err != nil {
			t.Errorf("%T: %s does not validate: %v", v, raw, err)
		}
	}
}

type gnode[T any] struct {
	V    T         `json:"v"`
	Next *gnode[T] `json:"next,omitempty"`
}

func TestForDefNames(t *testing.T) {
	type wrapper struct {
		A *gnode[int]    `json:"a"`
		B *gnode[string] `json:"b"`
	}
	s, err := ForType[wrapper]()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(s)
	want := canonJSON(t, `{
		"type":"object",
		"properties":{"a":{"$ref":"#/$defs/gnode_int_"},"b":{"$ref":"#/$defs/gnode_string_"}},
		"additionalProperties":false,
		"$defs":{
			"gnode_int_":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/gnode_int_"}},"required":["v"],"additionalProperties":false},
			"gnode_string_":{"type":"object","properties":{"v":{"type":"string"},"next":{"$ref":"#/$defs/gnode_string_"}},"required":["v"],"additionalProperties":false}}}`)
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	compiled, err := Compile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := compiled.ValidateJSON([]byte(`{"a":{"v":1,"next":{"v":"x"}}}`)); err == nil || err.Error() != `/a/next/v: must be an integer, got string "x"` {
		t.Errorf("got %v", err)
	}
}

func TestForDefNameCollision(t *testing.T) {
	first := func() reflect.Type {
		type rec struct {
			R *rec `json:"r"`
		}
		return reflect.TypeFor[rec]()
	}()
	second := func() reflect.Type {
		type rec struct {
			S *rec `json:"s"`
		}
		return reflect.TypeFor[rec]()
	}()
	wrapper := reflect.StructOf([]reflect.StructField{
		{Name: "X", Type: reflect.PointerTo(first), Tag: `json:"x"`},
		{Name: "Y", Type: reflect.PointerTo(second), Tag: `json:"y"`},
	})
	s, err := For(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	defs := s["$defs"].(map[string]any)
	if len(defs) != 2 || defs["rec"] == nil || defs["rec2"] == nil {
		t.Errorf("got $defs %v, want rec and rec2", defs)
	}
	raw, _ := json.Marshal(s)
	if _, err := Compile(raw); err != nil {
		t.Errorf("Compile: %v", err)
	}
}
