package jsonschema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// For infers a JSON Schema (draft 2020-12) describing the JSON encoding
// of values of type t, as encoding/json produces and accepts it.
//
//   - bool is "boolean"; integer kinds are "integer" (unsigned ones with
//     "minimum": 0); floats are "number"; strings are "string".
//   - []byte is a "string" with "contentEncoding": "base64"; other slices
//     and arrays are "array" with "items" (arrays also get minItems and
//     maxItems equal to their length).
//   - Maps with string keys are "object" with "additionalProperties";
//     integer keys add a "propertyNames" pattern.
//   - Structs are "object" with "properties" for the fields encoding/json
//     would use (json tags, "-", embedded structs flattened), "required"
//     for every field without omitempty or omitzero that is not a pointer
//     (nor promoted through an embedded pointer), and
//     "additionalProperties": false.
//   - A pointer has the schema of what it points to: null is not allowed
//     for it, but a pointer field is optional.
//   - time.Time is a "date-time" string; interfaces, json.RawMessage and
//     types with their own MarshalJSON are {} (anything); other
//     encoding.TextMarshalers are strings.
//   - Recursive types are described once under "$defs" and referenced
//     with "$ref" ("#" when the recursion is back to t itself).
//   - Channels, functions, complex numbers and unsafe pointers are errors.
//
// Struct field tags: `jsonschema:"..."` sets "description" (the whole tag
// is the text); `enum:"a,b,c"` sets "enum" on a string field (or on the
// items of a string slice), with spaces around values trimmed;
// `mcpheader:"Name"` sets "x-mcp-header", and the result must then pass
// MCPHeaders.
func For(t reflect.Type) (map[string]any, error) {
	if t == nil {
		return nil, fmt.Errorf("jsonschema: cannot infer a schema for a nil type")
	}
	inf := &inferrer{
		root:   deref(t),
		active: map[reflect.Type]bool{},
		names:  map[reflect.Type]string{},
		used:   map[string]bool{},
		defs:   map[string]any{},
	}
	s, err := inf.schema(t, t.String())
	if err != nil {
		return nil, err
	}
	if len(inf.defs) > 0 {
		s["$defs"] = inf.defs
	}
	if inf.headers {
		if _, err := MCPHeaders(s); err != nil {
			return nil, fmt.Errorf("%w (schema inferred for %v)", err, t)
		}
	}
	return s, nil
}

// ForType is For for the type argument.
func ForType[T any]() (map[string]any, error) {
	return For(reflect.TypeFor[T]())
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	numberType        = reflect.TypeFor[json.Number]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

type inferrer struct {
	root    reflect.Type
	active  map[reflect.Type]bool   // types being expanded
	names   map[reflect.Type]string // $defs names of recursive types
	used    map[string]bool
	defs    map[string]any
	headers bool // some field carries an mcpheader tag
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// marshals reports whether t (or *t) customises its JSON encoding with
// the given interface.
func marshals(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// schema infers the schema of t; where names the value for errors.
func (inf *inferrer) schema(t reflect.Type, where string) (map[string]any, error) {
	t = deref(t)
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}, nil
	case t == rawMessageType:
		return map[string]any{}, nil
	case t == numberType:
		return map[string]any{"type": "number"}, nil
	case t.Kind() == reflect.Interface:
		return map[string]any{}, nil
	case marshals(t, jsonMarshalerType):
		return map[string]any{}, nil
	case marshals(t, textMarshalerType):
		return map[string]any{"type": "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Struct:
		return inf.composite(t, where)
	}
	return nil, fmt.Errorf("jsonschema: cannot infer a schema for %s (type %v): %v values have no JSON encoding", where, t, t.Kind())
}

// composite infers slices, arrays, maps and structs: the kinds through
// which a type can refer to itself.
func (inf *inferrer) composite(t reflect.Type, where string) (map[string]any, error) {
	if inf.active[t] {
		return inf.refTo(t), nil
	}
	if name, ok := inf.names[t]; ok {
		if _, done := inf.defs[name]; done {
			return map[string]any{"$ref": "#/$defs/" + name}, nil
		}
	}
	inf.active[t] = true
	s, err := inf.expand(t, where)
	delete(inf.active, t)
	if err != nil {
		return nil, err
	}
	if name, ok := inf.names[t]; ok && t != inf.root {
		inf.defs[name] = s
		return map[string]any{"$ref": "#/$defs/" + name}, nil
	}
	return s, nil
}

// refTo returns a reference to a type that refers to itself, naming it
// in $defs unless it is the root.
func (inf *inferrer) refTo(t reflect.Type) map[string]any {
	if t == inf.root {
		return map[string]any{"$ref": "#"}
	}
	name, ok := inf.names[t]
	if !ok {
		name = inf.defName(t)
		inf.names[t] = name
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

var unsafeDefChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// defName derives a unique $defs name from the type name.
func (inf *inferrer) defName(t reflect.Type) string {
	base := unsafeDefChars.ReplaceAllString(t.Name(), "_")
	if base == "" {
		base = "type"
	}
	name := base
	for i := 2; inf.used[name]; i++ {
		name = fmt.Sprintf("%s%d", base, i)
	}
	inf.used[name] = true
	return name
}

func (inf *inferrer) expand(t reflect.Type, where string) (map[string]any, error) {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 &&
			!marshals(t.Elem(), jsonMarshalerType) && !marshals(t.Elem(), textMarshalerType) {
			return map[string]any{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := inf.schema(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		s := map[string]any{"type": "array", "items": items}
		if t.Kind() == reflect.Array {
			s["minItems"], s["maxItems"] = t.Len(), t.Len()
		}
		return s, nil
	case reflect.Map:
		s := map[string]any{"type": "object"}
		switch k := t.Key(); {
		case k.Kind() == reflect.String:
		case marshals(k, textMarshalerType):
		case k.Kind() >= reflect.Int && k.Kind() <= reflect.Int64:
			s["propertyNames"] = map[string]any{"pattern": "^-?[0-9]+$"}
		case k.Kind() >= reflect.Uint && k.Kind() <= reflect.Uintptr:
			s["propertyNames"] = map[string]any{"pattern": "^[0-9]+$"}
		default:
			return nil, fmt.Errorf("jsonschema: cannot infer a schema for %s (type %v): map keys of type %v have no JSON encoding", where, t, k)
		}
		vals, err := inf.schema(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		s["additionalProperties"] = vals
		return s, nil
	}
	return inf.structSchema(t, where)
}

func (inf *inferrer) structSchema(t reflect.Type, where string) (map[string]any, error) {
	fields := structFields(t)
	props := make(map[string]any, len(fields))
	required := []string{}
	for _, f := range fields {
		fwhere := where + "." + f.goName
		fs, err := inf.schema(f.typ, fwhere)
		if err != nil {
			return nil, err
		}
		if f.asString {
			fs = map[string]any{"type": "string"}
		}
		if err := inf.applyTags(fs, f.tag, fwhere); err != nil {
			return nil, err
		}
		props[f.name] = fs
		if f.required() {
			required = append(required, f.name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

// applyTags applies the jsonschema, enum and mcpheader tags of a field.
func (inf *inferrer) applyTags(fs map[string]any, tag reflect.StructTag, where string) error {
	if d := tag.Get("jsonschema"); d != "" {
		fs["description"] = d
	}
	if e, ok := tag.Lookup("enum"); ok {
		target := fs
		if fs["type"] == "array" {
			target, _ = fs["items"].(map[string]any)
		}
		if target == nil || target["type"] != "string" {
			return fmt.Errorf("jsonschema: %s: the enum tag needs a string field or a slice of strings", where)
		}
		var vals []any
		for _, v := range strings.Split(e, ",") {
			vals = append(vals, strings.TrimSpace(v))
		}
		target["enum"] = vals
	}
	if h, ok := tag.Lookup("mcpheader"); ok {
		fs["x-mcp-header"] = h
		inf.headers = true
	}
	return nil
}

// field is a struct field as encoding/json sees it.
type field struct {
	name       string // JSON name
	goName     string
	typ        reflect.Type
	tag        reflect.StructTag
	index      []int
	tagged     bool // name comes from a json tag
	omitEmpty  bool
	omitZero   bool
	asString   bool
	viaPointer bool // promoted through an embedded pointer
}

// required reports whether the field must be present.
func (f field) required() bool {
	return !f.omitEmpty && !f.omitZero && f.typ.Kind() != reflect.Pointer && !f.viaPointer
}

type embedded struct {
	typ        reflect.Type
	index      []int
	viaPointer bool
	count      int // times the type is embedded at this depth
}

// structFields lists the fields encoding/json encodes for struct type t,
// in declaration order, after applying Go's rules for promoted fields:
// the shallowest field of a name wins, a tagged one breaks ties, and
// remaining ties hide the name altogether.
func structFields(t reflect.Type) []field {
	var all []field
	visited := map[reflect.Type]bool{}
	level := []embedded{{typ: t, count: 1}}
	for len(level) > 0 {
		var next []embedded
		for _, e := range level {
			visited[e.typ] = true
		}
		for _, e := range level {
			for i := range e.typ.NumField() {
				sf := e.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clone(e.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					if visited[ft] {
						continue
					}
					next = addEmbedded(next, embedded{
						typ:        ft,
						index:      index,
						viaPointer: e.viaPointer || sf.Type.Kind() == reflect.Pointer,
						count:      e.count,
					})
					continue
				}
				f := field{
					name:       name,
					goName:     sf.Name,
					typ:        sf.Type,
					tag:        sf.Tag,
					index:      index,
					tagged:     name != "",
					viaPointer: e.viaPointer,
				}
				if f.name == "" {
					f.name = sf.Name
				}
				for opt := range strings.SplitSeq(opts, ",") {
					switch opt {
					case "omitempty":
						f.omitEmpty = true
					case "omitzero":
						f.omitZero = true
					case "string":
						f.asString = stringable(sf.Type)
					}
				}
				for range min(e.count, 2) {
					all = append(all, f)
				}
			}
		}
		level = next
	}
	return dominant(all)
}

// addEmbedded adds e to the next level, counting repeated types.
func addEmbedded(level []embedded, e embedded) []embedded {
	for i := range level {
		if level[i].typ == e.typ {
			level[i].count++
			return level
		}
	}
	return append(level, e)
}

// dominant keeps, for each JSON name, the field encoding/json would use.
func dominant(all []field) []field {
	byName := map[string][]field{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f)
	}
	var out []field
	for _, fs := range byName {
		depth := len(fs[0].index)
		for _, f := range fs {
			depth = min(depth, len(f.index))
		}
		var top, tagged []field
		for _, f := range fs {
			if len(f.index) == depth {
				top = append(top, f)
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
		}
		switch {
		case len(top) == 1:
			out = append(out, top[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return out
}

// stringable reports whether the ",string" option applies to t.
func stringable(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// validTagName mirrors the names encoding/json accepts in a json tag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c > 127:
		default:
			return false
		}
	}
	return true
}
