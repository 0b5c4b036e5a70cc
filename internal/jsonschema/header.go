package jsonschema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// HeaderKeyword is the property annotation (MCP 2026-07-28, SEP-2243)
// that asks clients to mirror a tool argument into an
// "Mcp-Param-{Name}" HTTP header.
const HeaderKeyword = "x-mcp-header"

// HeaderParam is a tool argument mirrored into an HTTP header.
type HeaderParam struct {
	// Name is the header name suffix as written in the schema; the header
	// is "Mcp-Param-" + Name. Compare it case-insensitively.
	Name string
	// Path is the chain of property names from the root of the arguments
	// object to the annotated property.
	Path []string
	// Type is the property's JSON type: "string", "integer" or "boolean".
	Type string
}

// MCPHeaders returns the properties of a tool input schema annotated with
// "x-mcp-header", ordered by path, and checks the rules of SEP-2243:
//
//   - the header name is a non-empty RFC 9110 token (so no CR or LF);
//   - names are unique, compared case-insensitively;
//   - the annotated property has type "string", "integer" or "boolean"
//     (possibly together with "null"), not "number";
//   - the property is reached from the root only through "properties"
//     keys: an annotation anywhere else (under items, anyOf, oneOf,
//     allOf, not, if/then/else, $defs, additionalProperties,
//     patternProperties, ...) is an error, and so is one on the root.
//
// Clients drop tools that break these rules, so a server should refuse
// to register them. A schema without annotations yields no params and no
// error. Integer values must also lie within ±(2^53-1); that is a
// property of each argument value, not of the schema, and is left to the
// caller.
func MCPHeaders(schema map[string]any) ([]HeaderParam, error) {
	w := headerWalker{seen: map[string]string{}}
	if _, ok := schema[HeaderKeyword]; ok {
		return nil, fmt.Errorf("jsonschema: %s on the root schema: only properties can be mirrored into headers", HeaderKeyword)
	}
	if err := w.walk(schema, "", []string{}, 0); err != nil {
		return nil, fmt.Errorf("jsonschema: %w", err)
	}
	slices.SortFunc(w.params, func(a, b HeaderParam) int { return slices.Compare(a.Path, b.Path) })
	return w.params, nil
}

type headerWalker struct {
	params []HeaderParam
	seen   map[string]string // lower-cased name → location
}

// Keywords whose value is one subschema, a list of subschemas, or an
// object of subschemas. Annotations under them are misplaced.
var (
	singleSchemaKeywords = []string{"additionalProperties", "propertyNames", "items", "contains",
		"unevaluatedItems", "unevaluatedProperties", "additionalItems", "not", "if", "then", "else"}
	listSchemaKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	mapSchemaKeywords  = []string{"$defs", "definitions", "patternProperties", "dependentSchemas", "dependencies"}
)

// walk visits the subschema s at loc. chain is the property path when s
// is reached through "properties" keys only, nil otherwise.
func (w *headerWalker) walk(s any, loc string, chain []string, depth int) error {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	if depth > MaxDepth {
		return fmt.Errorf("%s: schema nested deeper than %d levels", loc, MaxDepth)
	}
	if h, annotated := m[HeaderKeyword]; annotated {
		if chain == nil {
			return fmt.Errorf("%s at %s: only properties reached through \"properties\" keys from the root can be mirrored into headers", HeaderKeyword, loc)
		}
		if err := w.add(h, m, loc, chain); err != nil {
			return err
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			var sub []string
			if chain != nil {
				sub = append(slices.Clone(chain), name)
			}
			if err := w.walk(props[name], loc+"/properties/"+escapePointer(name), sub, depth+1); err != nil {
				return err
			}
		}
	}
	for _, kw := range singleSchemaKeywords {
		if err := w.walk(m[kw], loc+"/"+kw, nil, depth+1); err != nil {
			return err
		}
	}
	for _, kw := range listSchemaKeywords {
		list, _ := m[kw].([]any)
		for i, e := range list {
			if err := w.walk(e, loc+"/"+kw+"/"+strconv.Itoa(i), nil, depth+1); err != nil {
				return err
			}
		}
	}
	for _, kw := range mapSchemaKeywords {
		sub, _ := m[kw].(map[string]any)
		for _, name := range sortedKeys(sub) {
			if err := w.walk(sub[name], loc+"/"+kw+"/"+escapePointer(name), nil, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// add checks one annotation and records it.
func (w *headerWalker) add(h any, m map[string]any, loc string, chain []string) error {
	name, ok := h.(string)
	if !ok {
		return fmt.Errorf("%s at %s: must be a string", HeaderKeyword, loc)
	}
	if !isToken(name) {
		return fmt.Errorf("%s at %s: %q is not a valid header name (an RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~)", HeaderKeyword, loc, name)
	}
	typ, err := headerType(m["type"])
	if err != nil {
		return fmt.Errorf("%s at %s: %w", HeaderKeyword, loc, err)
	}
	key := strings.ToLower(name)
	if prev, dup := w.seen[key]; dup {
		return fmt.Errorf("%s at %s: header name %q is already used at %s (names are case-insensitive)", HeaderKeyword, loc, name, prev)
	}
	w.seen[key] = loc
	w.params = append(w.params, HeaderParam{Name: name, Path: chain, Type: typ})
	return nil
}

// headerType reads the "type" of an annotated property: one of string,
// integer or boolean, optionally with null.
func headerType(t any) (string, error) {
	var names []string
	switch x := t.(type) {
	case string:
		names = []string{x}
	case []string:
		names = x
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("invalid type %s", show(t))
			}
			names = append(names, s)
		}
	case nil:
		return "", fmt.Errorf("the property must declare type string, integer or boolean")
	default:
		return "", fmt.Errorf("invalid type %s", show(t))
	}
	found := ""
	for _, n := range names {
		switch n {
		case "null":
			continue
		case "string", "integer", "boolean":
			if found != "" && found != n {
				return "", fmt.Errorf("the property must have a single type (string, integer or boolean), got %s", show(t))
			}
			found = n
		default:
			return "", fmt.Errorf("type %q cannot be mirrored into a header: only string, integer and boolean can", n)
		}
	}
	if found == "" {
		return "", fmt.Errorf("the property must declare type string, integer or boolean")
	}
	return found, nil
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
