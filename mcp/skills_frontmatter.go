package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The frontmatter of a SKILL.md: the YAML between a first line "---" and
// the next line "---", rendered as the JSON object a skill entry carries.
// The rendering follows the YAML 1.2 core schema (what the Agent Skills
// tools and the JavaScript yaml package read), so that the entry's
// frontmatter equals what a host parses from the file: plain scalars are
// null, booleans, integers (decimal, 0o octal, 0x hex) or floats by the
// core schema's patterns and strings otherwise (yes, no, on, off and dates
// stay strings), quoted and block scalars are strings, keys keep the
// author's order, and aliases are expanded. What JSON cannot hold (.inf,
// .nan, a null or collection key, a repeated key) is an error.

// Bounds of one frontmatter: its YAML text, its rendering (aliases can
// multiply a short text), the values it holds after alias expansion, and
// their nesting.
const (
	maxFrontmatterBytes = 64 << 10
	maxFrontmatterJSON  = 256 << 10
	maxFrontmatterNodes = 10000
	maxFrontmatterDepth = 64
)

// skillNameRE is the Agent Skills naming rule: 1-64 lowercase letters,
// digits and hyphens, neither first nor last (consecutive hyphens are
// refused apart).
var skillNameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`)

// maxSkillDescription is the Agent Skills bound on description, in
// characters.
const maxSkillDescription = 1024

// frontmatter is what a SKILL.md declares.
type frontmatter struct {
	json        json.RawMessage // the whole frontmatter, in the author's order
	name        string
	description string
}

// splitFrontmatter returns the YAML text between the opening and closing
// "---" lines of a SKILL.md (a UTF-8 byte order mark before the first is
// allowed, and spaces or tabs after the second).
func splitFrontmatter(md []byte) ([]byte, error) {
	md = bytes.TrimPrefix(md, []byte("\ufeff"))
	rest, ok := cutLine(md, "---")
	if !ok {
		return nil, errors.New("does not begin with a line \"---\" opening its YAML frontmatter")
	}
	for off := 0; off < len(rest); {
		end := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		if end >= 0 {
			line = rest[off : off+end]
		}
		if bytes.Equal(bytes.TrimRight(bytes.TrimSuffix(line, []byte("\r")), " \t"), []byte("---")) {
			if off == 0 {
				return nil, errors.New("has an empty frontmatter: it needs name and description")
			}
			return bytes.TrimSuffix(bytes.TrimSuffix(rest[:off], []byte("\n")), []byte("\r")), nil
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return nil, errors.New("has no line \"---\" closing its YAML frontmatter")
}

// cutLine cuts the first line of b when it is exactly want (with a "\n"
// or "\r\n" end).
func cutLine(b []byte, want string) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(want))
	if !ok {
		return nil, false
	}
	if r, ok := bytes.CutPrefix(rest, []byte("\r\n")); ok {
		return r, true
	}
	return bytes.CutPrefix(rest, []byte("\n"))
}

// parseFrontmatter reads and checks the frontmatter of a SKILL.md: a YAML
// mapping with a name following the Agent Skills naming rules and a
// non-empty description. Whatever the input, it returns an error rather
// than panicking.
func parseFrontmatter(md []byte) (fm frontmatter, err error) {
	text, err := splitFrontmatter(md)
	if err != nil {
		return fm, err
	}
	if len(text) > maxFrontmatterBytes {
		return fm, fmt.Errorf("has a frontmatter of %d bytes, over the bound of %d", len(text), maxFrontmatterBytes)
	}
	// A first empty line makes the parser's line numbers the file's; a
	// last line end keeps the final line break of a block scalar that
	// ends the frontmatter, as other YAML readers do.
	doc := append([]byte("\n"), text...)
	if !bytes.HasSuffix(doc, []byte("\n")) {
		doc = append(doc, '\n')
	}
	root, err := decodeYAML(doc)
	if err != nil {
		return fm, fmt.Errorf("frontmatter: %w", err)
	}
	if root.Kind != yaml.MappingNode {
		return fm, errors.New("frontmatter is not a YAML mapping of fields")
	}
	c := fmWriter{}
	if err := c.value(root, 0); err != nil {
		return fm, fmt.Errorf("frontmatter: %w", err)
	}
	if c.buf.Len() > maxFrontmatterJSON {
		return fm, fmt.Errorf("frontmatter renders to more than %d bytes of JSON", maxFrontmatterJSON)
	}
	fm.json = json.RawMessage(c.buf.Bytes())
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(fm.json, &fields); err != nil {
		return fm, fmt.Errorf("frontmatter: %w", err) // unreachable: written above
	}
	if err := json.Unmarshal(fields["name"], &fm.name); err != nil || fields["name"] == nil {
		return fm, errors.New("frontmatter has no name string")
	}
	if err := json.Unmarshal(fields["description"], &fm.description); err != nil || fields["description"] == nil {
		return fm, errors.New("frontmatter has no description string")
	}
	if !skillNameRE.MatchString(fm.name) || strings.Contains(fm.name, "--") {
		return fm, fmt.Errorf("frontmatter name %q breaks the Agent Skills naming rules: 1-64 lowercase letters, digits and hyphens, no hyphen first, last or twice in a row", truncateRunes(fm.name, 80))
	}
	if strings.TrimSpace(fm.description) == "" {
		return fm, errors.New("frontmatter description is empty")
	}
	if n := utf8.RuneCountInString(fm.description); n > maxSkillDescription {
		return fm, fmt.Errorf("frontmatter description has %d characters, over the Agent Skills bound of %d", n, maxSkillDescription)
	}
	return fm, nil
}

// decodeYAML parses one YAML document into its root node. A second
// document is an error, and so is a panic of the parser.
func decodeYAML(text []byte) (root *yaml.Node, err error) {
	defer func() {
		if p := recover(); p != nil {
			root, err = nil, fmt.Errorf("the YAML parser failed: %v", p)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("is empty: it needs name and description")
		}
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("holds more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("is not one YAML document")
	}
	return doc.Content[0], nil
}

// fmWriter renders YAML nodes as JSON within the bounds above.
type fmWriter struct {
	buf   bytes.Buffer
	nodes int
}

func (c *fmWriter) value(n *yaml.Node, depth int) error {
	c.nodes++
	switch {
	case c.nodes > maxFrontmatterNodes:
		return fmt.Errorf("holds more than %d values (aliases count each time they are used)", maxFrontmatterNodes)
	case depth > maxFrontmatterDepth:
		return fmt.Errorf("nests deeper than %d levels", maxFrontmatterDepth)
	case c.buf.Len() > maxFrontmatterJSON:
		return fmt.Errorf("renders to more than %d bytes of JSON", maxFrontmatterJSON)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return fmt.Errorf("line %d: an alias without its anchor", n.Line)
		}
		return c.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		c.buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.value(e, depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		b, err := scalarJSON(n)
		if err != nil {
			return err
		}
		c.buf.Write(b)
		return nil
	}
	return fmt.Errorf("line %d: a YAML node of an unknown kind", n.Line)
}

func (c *fmWriter) mapping(n *yaml.Node, depth int) error {
	if len(n.Content)%2 != 0 {
		return fmt.Errorf("line %d: a mapping with a key and no value", n.Line)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	c.buf.WriteByte('{')
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		for hops := 0; k.Kind == yaml.AliasNode && k.Alias != nil && hops < maxFrontmatterDepth; hops++ {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a key that is not a scalar: JSON keys are strings", k.Line)
		}
		kb, err := scalarJSON(k)
		if err != nil {
			return err
		}
		key := string(kb) // a number or boolean key reads as its JSON text
		if kb[0] == '"' {
			_ = json.Unmarshal(kb, &key)
		} else if string(kb) == "null" {
			return fmt.Errorf("line %d: a null key", k.Line)
		}
		if seen[key] {
			return fmt.Errorf("line %d: the key %q appears twice", k.Line, truncateRunes(key, 80))
		}
		seen[key] = true
		if i > 0 {
			c.buf.WriteByte(',')
		}
		c.buf.Write(jsonString(key))
		c.buf.WriteByte(':')
		if err := c.value(n.Content[i+1], depth+1); err != nil {
			return err
		}
	}
	c.buf.WriteByte('}')
	return nil
}

// The YAML 1.2 core schema's plain scalars other than strings.
var (
	coreNull  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	coreBool  = regexp.MustCompile(`^(?:true|True|TRUE|false|False|FALSE)$`)
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreFloat = regexp.MustCompile(`^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$`)
	coreInf   = regexp.MustCompile(`^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$`)
)

// scalarJSON renders one scalar: by its explicit tag when it has one,
// as a string when quoted or a block, else by the core schema.
func scalarJSON(n *yaml.Node) ([]byte, error) {
	v := n.Value
	tag := ""
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		tag = n.Tag
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return jsonString(v), nil
	}
	switch tag {
	case "":
		switch {
		case coreNull.MatchString(v):
			return []byte("null"), nil
		case coreBool.MatchString(v):
			return []byte(strings.ToLower(v)), nil
		case coreInt.MatchString(v) || coreOct.MatchString(v) || coreHex.MatchString(v), coreFloat.MatchString(v), coreInf.MatchString(v):
			return numberJSON(n)
		}
		return jsonString(v), nil
	case "!!null":
		if !coreNull.MatchString(v) {
			return nil, fmt.Errorf("line %d: %q is not a null", n.Line, truncateRunes(v, 80))
		}
		return []byte("null"), nil
	case "!!bool":
		if !coreBool.MatchString(v) {
			return nil, fmt.Errorf("line %d: %q is not a boolean", n.Line, truncateRunes(v, 80))
		}
		return []byte(strings.ToLower(v)), nil
	case "!!int", "!!float":
		return numberJSON(n)
	}
	return jsonString(v), nil // !!str, and tags JSON has no type for
}

// numberJSON renders an integer or float scalar as a JSON number.
func numberJSON(n *yaml.Node) ([]byte, error) {
	v := n.Value
	base := 0
	switch {
	case coreInt.MatchString(v):
		base = 10
	case coreOct.MatchString(v):
		base, v = 8, v[2:]
	case coreHex.MatchString(v):
		base, v = 16, v[2:]
	}
	if base != 0 {
		var i big.Int
		if _, ok := i.SetString(v, base); ok && i.BitLen() <= 1024 {
			return []byte(i.String()), nil
		}
		return nil, fmt.Errorf("line %d: the integer %q is too large for JSON", n.Line, truncateRunes(n.Value, 80))
	}
	if !coreFloat.MatchString(v) {
		return nil, fmt.Errorf("line %d: %q is not a number JSON can hold", n.Line, truncateRunes(v, 80))
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("line %d: the number %q is out of JSON's range", n.Line, truncateRunes(v, 80))
	}
	return json.Marshal(f)
}

// jsonString encodes s as a JSON string, without HTML escapes.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// truncateRunes shortens s for an error message.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}
