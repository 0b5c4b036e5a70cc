// Package jsonschema infers JSON Schemas (draft 2020-12) from Go types and
// validates JSON values against schemas.
//
// It serves the typed tool API, which infers a tool's inputSchema and
// outputSchema from Go types and validates tool arguments, and the HTTP
// transport, which reads the "x-mcp-header" annotations of a tool's input
// schema (MCPHeaders).
//
// Validation understands drafts 2020-12 and 07 and never fetches
// anything: every $ref must point into the schema document itself. Cost is
// bounded both when compiling (nesting depth, number of subschemas) and
// when validating (reference depth, a step budget), so a hostile schema or
// instance cannot make Compile or Validate run away.
//
// # Why not github.com/google/jsonschema-go
//
// The official Go SDK's library (v0.4.3, same "jsonschema" description
// tag) was measured against this package on our paths (internal/libcompare,
// go test -run '^$' -bench . -count=6 ./internal/libcompare, benchstat
// -col /impl; 2 shared cores, so the spread is wide) and is kept out:
//
//   - It fails what we rely on. Validating anything against {"$ref":"#"}
//     (or any $ref cycle that consumes no input) overflows the goroutine
//     stack, a fatal error that no recover stops: one tool call takes the
//     node and every session on it down; ours stops with ErrTooComplex.
//     It decodes numbers to float64, so {"multipleOf":0.1} rejects 0.3
//     and {"maximum":9007199254740992} accepts 9007199254740993. It
//     cannot infer a recursive Go type ("cycle detected"); ours writes
//     $defs and $ref. It has no enum or mcpheader tags.
//   - Its errors are one string naming schema paths, e.g.
//     `validating root: validating /properties/a: type: one has type
//     "string", want "number"`, where a model reading our isError result
//     gets `/a: must be a number, got string "one"` (instance paths; the
//     golden wire test tools_call_errors pins it).
//   - It is slower on every path: argument validation per call 12.6 µs
//     against 5.1 µs (valid arguments, 156 against 43 allocations),
//     6.6 µs against 4.6 µs (invalid); inference plus compilation at
//     registration 62 µs against 24 µs (two fields) and 194 µs against
//     61 µs (seven, nested).
//
// internal/libcompare holds the benchmarks and tests that fail when an
// upgrade of the library removes one of these reasons.
package jsonschema

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits on schema documents.
const (
	// MaxDepth is how deeply subschemas may nest.
	MaxDepth = 64
	// MaxSubschemas is how many subschemas (including the root) a
	// document may contain.
	MaxSubschemas = 10000
)

// Dialect URIs accepted in "$schema" (with or without a trailing '#').
const (
	Draft202012 = "https://json-schema.org/draft/2020-12/schema"
	Draft07     = "http://json-schema.org/draft-07/schema"
)

// Schema is a compiled schema document. It is immutable and safe for
// concurrent use.
type Schema struct {
	root    *node
	collect bool // the document uses unevaluatedProperties/Items
}

// typeSet is a set of JSON types, one bit per kind, plus typeInteger.
type typeSet uint8

const typeInteger typeSet = 1 << 7

func typeBit(k kind) typeSet { return 1 << k }

var typeNames = map[string]typeSet{
	"null":    typeBit(kindNull),
	"boolean": typeBit(kindBoolean),
	"object":  typeBit(kindObject),
	"array":   typeBit(kindArray),
	"number":  typeBit(kindNumber),
	"string":  typeBit(kindString),
	"integer": typeInteger,
}

// bound is a numeric keyword value.
type bound struct {
	n   number
	set bool
}

type patternSchema struct {
	re     *regexp.Regexp
	schema *node
}

type dependency struct {
	name string
	req  []string
}

type namedSchema struct {
	name   string
	schema *node
}

// node is one compiled subschema. A nil *node means "no such keyword";
// counts are -1 when absent.
type node struct {
	loc string // JSON pointer of the subschema inside the document

	isBool bool // a boolean schema; only allow matters
	allow  bool

	ref *node // $ref target (resolved after compilation)

	// Any instance.
	types    typeSet
	enum     []any
	enumKeys map[string]struct{} // canonical keys of long enums
	hasConst bool
	constVal any

	// Numbers.
	minimum, maximum, exclMin, exclMax, multipleOf bound

	// Strings.
	minLength, maxLength int
	pattern              *regexp.Regexp

	// Arrays.
	prefixItems        []*node
	items              *node
	contains           *node
	minContains        int // 1 when absent
	maxContains        int
	minItems, maxItems int
	uniqueItems        bool
	unevaluatedItems   *node

	// Objects.
	properties         map[string]*node
	propOrder          []string // sorted property names
	required           []string
	patternProps       []patternSchema
	additional         *node
	propertyNames      *node
	minProps, maxProps int
	dependentRequired  []dependency
	dependentSchemas   []namedSchema
	unevaluatedProps   *node

	// Applicators.
	allOf, anyOf, oneOf    []*node
	not, ifS, thenS, elseS *node
}

// Compile parses and compiles a schema document.
//
// It rejects a "$schema" other than draft 2020-12 or draft-07, any $ref
// that does not point into the document itself, invalid regular
// expressions (Go RE2 syntax), keywords with values of the wrong shape,
// documents nested deeper than MaxDepth and documents with more than
// MaxSubschemas subschemas. Unknown keywords are ignored.
func Compile(schema []byte) (*Schema, error) {
	doc, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: invalid JSON: %w", err)
	}
	return compileDoc(doc)
}

// CompileMap compiles a schema held as a Go value, such as the result of
// For. It is equivalent to marshalling the value and calling Compile.
func CompileMap(schema map[string]any) (*Schema, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: %w", err)
	}
	return Compile(raw)
}

// MustCompile is like Compile but panics on error. It is meant for
// schemas written into the program.
func MustCompile(schema string) *Schema {
	s, err := Compile([]byte(schema))
	if err != nil {
		panic(err)
	}
	return s
}

type pendingRef struct {
	n   *node
	ref string
}

type compiler struct {
	doc     any
	nodes   map[string]*node
	anchors map[string]*node
	pending []pendingRef
	regexps map[string]*regexp.Regexp
	count   int // subschemas compiled
	rootID  string
	draft7  bool
	collect bool
}

func compileDoc(doc any) (*Schema, error) {
	c := &compiler{
		doc:     doc,
		nodes:   map[string]*node{},
		anchors: map[string]*node{},
		regexps: map[string]*regexp.Regexp{},
	}
	if m, ok := doc.(map[string]any); ok {
		if err := c.readRoot(m); err != nil {
			return nil, err
		}
	}
	root, err := c.compile(doc, "", 0)
	if err != nil {
		return nil, err
	}
	// Resolving a reference may compile more of the document, which may
	// add references; the subschema limit bounds the loop.
	for len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		target, err := c.resolve(p.ref)
		if err != nil {
			if _, ok := err.(*SchemaError); ok {
				return nil, err
			}
			return nil, &SchemaError{Loc: p.n.loc, Err: fmt.Errorf("$ref %q: %w", p.ref, err)}
		}
		p.n.ref = target
	}
	return &Schema{root: root, collect: c.collect}, nil
}

// readRoot checks "$schema" and records the root "$id" so that references
// spelled as absolute URIs of the document itself resolve locally.
func (c *compiler) readRoot(m map[string]any) error {
	if v, ok := m["$schema"]; ok {
		s, ok := v.(string)
		if !ok {
			return &SchemaError{Err: fmt.Errorf("$schema must be a string")}
		}
		switch strings.TrimSuffix(s, "#") {
		case Draft202012, "http://json-schema.org/draft/2020-12/schema":
		case Draft07, "https://json-schema.org/draft-07/schema":
			c.draft7 = true
		default:
			return &SchemaError{Err: fmt.Errorf("unsupported $schema %q: only draft 2020-12 (%s) and draft-07 (%s) are supported", s, Draft202012, Draft07)}
		}
	}
	if v, ok := m["$id"]; ok {
		s, ok := v.(string)
		if !ok {
			return &SchemaError{Err: fmt.Errorf("$id must be a string")}
		}
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		c.rootID = s
	}
	return nil
}

// resolve finds the node a local reference points at, compiling the
// target on demand when it is not a location compiled already.
func (c *compiler) resolve(ref string) (*node, error) {
	s := ref
	if c.rootID != "" && strings.HasPrefix(s, c.rootID) {
		s = s[len(c.rootID):]
	}
	if s == "" {
		return c.nodes[""], nil
	}
	if s[0] != '#' {
		return nil, fmt.Errorf("only references within the document (starting with '#') are supported; nothing is fetched")
	}
	frag, err := url.PathUnescape(s[1:])
	if err != nil {
		return nil, fmt.Errorf("invalid fragment: %w", err)
	}
	if frag == "" {
		return c.nodes[""], nil
	}
	if frag[0] != '/' {
		n, ok := c.anchors[frag]
		if !ok {
			return nil, fmt.Errorf("no $anchor %q in the document", frag)
		}
		return n, nil
	}
	segs := strings.Split(frag[1:], "/")
	v := c.doc
	var loc strings.Builder
	for _, seg := range segs {
		seg = pointerUnescaper.Replace(seg)
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[seg]
			if !ok {
				return nil, fmt.Errorf("target not found: no member %q", seg)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) || (len(seg) > 1 && seg[0] == '0') {
				return nil, fmt.Errorf("target not found: no index %q", seg)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("target not found")
		}
		loc.WriteByte('/')
		loc.WriteString(escapePointer(seg))
	}
	if n, ok := c.nodes[loc.String()]; ok {
		return n, nil
	}
	return c.compile(v, loc.String(), min(len(segs), MaxDepth))
}

// compile compiles the subschema v found at loc.
func (c *compiler) compile(v any, loc string, depth int) (*node, error) {
	if depth > MaxDepth {
		return nil, &SchemaError{Loc: loc, Err: fmt.Errorf("schema nested deeper than %d levels", MaxDepth)}
	}
	if n, ok := c.nodes[loc]; ok {
		// A reference target inside a part of the document that is
		// being compiled on demand, and was compiled already.
		return n, nil
	}
	if c.count++; c.count > MaxSubschemas {
		return nil, &SchemaError{Loc: loc, Err: fmt.Errorf("schema has more than %d subschemas", MaxSubschemas)}
	}
	n := &node{loc: loc, minLength: -1, maxLength: -1, minContains: 1, maxContains: -1,
		minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
	c.nodes[loc] = n
	switch x := v.(type) {
	case bool:
		n.isBool, n.allow = true, x
		return n, nil
	case map[string]any:
		if err := c.keywords(n, x, depth); err != nil {
			if _, ok := err.(*SchemaError); ok {
				return nil, err
			}
			return nil, &SchemaError{Loc: loc, Err: err}
		}
		return n, nil
	}
	return nil, &SchemaError{Loc: loc, Err: fmt.Errorf("a schema must be an object or a boolean, got %s", kindOf(v))}
}

// SchemaError reports a defect in a schema document found by Compile.
type SchemaError struct {
	Loc string // JSON pointer of the offending subschema
	Err error
}

func (e *SchemaError) Error() string {
	return "jsonschema: invalid schema at " + displayPath(e.Loc) + ": " + e.Err.Error()
}

func (e *SchemaError) Unwrap() error { return e.Err }

// sub compiles the subschema under keyword (and, for maps and arrays,
// name) of the schema at n.
func (c *compiler) sub(n *node, v any, depth int, keyword string, name ...string) (*node, error) {
	loc := n.loc + "/" + escapePointer(keyword)
	for _, s := range name {
		loc += "/" + escapePointer(s)
	}
	return c.compile(v, loc, depth+1)
}

func (c *compiler) subList(n *node, v any, depth int, keyword string) ([]*node, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an array of schemas", keyword)
	}
	out := make([]*node, len(arr))
	for i, e := range arr {
		s, err := c.sub(n, e, depth, keyword, strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// subMap compiles an object whose members are schemas, in sorted order so
// that errors are deterministic.
func (c *compiler) subMap(n *node, v any, depth int, keyword string) ([]namedSchema, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an object whose members are schemas", keyword)
	}
	out := make([]namedSchema, 0, len(m))
	for _, name := range sortedKeys(m) {
		s, err := c.sub(n, m[name], depth, keyword, name)
		if err != nil {
			return nil, err
		}
		out = append(out, namedSchema{name, s})
	}
	return out, nil
}

func (c *compiler) regexp(p string) (*regexp.Regexp, error) {
	if re, ok := c.regexps[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", p, err)
	}
	c.regexps[p] = re
	return re, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// anchorName matches the plain-name fragments $anchor may declare.
var anchorName = regexp.MustCompile(`^[A-Za-z_][-A-Za-z0-9._]*$`)

func (c *compiler) addAnchor(name string, n *node) error {
	if !anchorName.MatchString(name) {
		return fmt.Errorf("invalid anchor name %q", name)
	}
	if _, dup := c.anchors[name]; dup {
		return fmt.Errorf("duplicate anchor %q", name)
	}
	c.anchors[name] = n
	return nil
}
