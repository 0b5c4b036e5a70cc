package jsonschema

import (
	"fmt"
	"math"
	"strings"
)

// enumIndexMin is the enum length from which membership is checked
// through a set of canonical keys rather than one comparison per value.
const enumIndexMin = 16

// keywords reads the keywords of the object schema m into n.
func (c *compiler) keywords(n *node, m map[string]any, depth int) error {
	if v, ok := m["$id"]; ok && n.loc != "" {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("$id must be a string")
		}
		// Draft-07 spells anchors as fragment-only $id values.
		if !c.draft7 || !strings.HasPrefix(s, "#") {
			return fmt.Errorf("$id below the root (an embedded schema resource) is not supported")
		}
		if err := c.addAnchor(s[1:], n); err != nil {
			return err
		}
	}
	if v, ok := m["$anchor"]; ok {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("$anchor must be a string")
		}
		if err := c.addAnchor(s, n); err != nil {
			return err
		}
	}
	for _, kw := range []string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := m[kw]; ok {
			return fmt.Errorf("%s is not supported", kw)
		}
	}
	_, hasRef := m["$ref"]
	if hasRef {
		s, ok := m["$ref"].(string)
		if !ok {
			return fmt.Errorf("$ref must be a string")
		}
		c.pending = append(c.pending, pendingRef{n, s})
	}
	// Definitions are compiled wherever they are, as reference targets.
	for _, kw := range []string{"$defs", "definitions"} {
		if v, ok := m[kw]; ok {
			if _, err := c.subMap(n, v, depth, kw); err != nil {
				return err
			}
		}
	}
	// In draft-07, keywords next to $ref are ignored.
	if c.draft7 && hasRef {
		return nil
	}
	for _, step := range []func(*node, map[string]any, int) error{
		c.generic, c.numeric, c.stringy, c.arrays, c.objects, c.applicators,
	} {
		if err := step(n, m, depth); err != nil {
			return err
		}
	}
	return nil
}

// generic reads type, enum and const.
func (c *compiler) generic(n *node, m map[string]any, _ int) error {
	if v, ok := m["type"]; ok {
		switch x := v.(type) {
		case string:
			t, ok := typeNames[x]
			if !ok {
				return fmt.Errorf("unknown type %q", x)
			}
			n.types = t
		case []any:
			if len(x) == 0 {
				return fmt.Errorf("type must not be an empty array")
			}
			for _, e := range x {
				s, _ := e.(string)
				t, ok := typeNames[s]
				if !ok {
					return fmt.Errorf("unknown type %s", show(e))
				}
				n.types |= t
			}
		default:
			return fmt.Errorf("type must be a string or an array of strings")
		}
	}
	if v, ok := m["enum"]; ok {
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("enum must be an array")
		}
		n.enum = arr
		if len(arr) >= enumIndexMin {
			n.enumKeys = make(map[string]struct{}, len(arr))
			for _, e := range arr {
				n.enumKeys[canonicalKey(e)] = struct{}{}
			}
		}
	}
	if v, ok := m["const"]; ok {
		n.hasConst, n.constVal = true, v
	}
	return nil
}

// numeric reads the number keywords.
func (c *compiler) numeric(n *node, m map[string]any, _ int) error {
	for _, kw := range []struct {
		name string
		dst  *bound
	}{
		{"minimum", &n.minimum},
		{"maximum", &n.maximum},
		{"exclusiveMinimum", &n.exclMin},
		{"exclusiveMaximum", &n.exclMax},
		{"multipleOf", &n.multipleOf},
	} {
		v, ok := m[kw.name]
		if !ok {
			continue
		}
		num, ok := numberOf(v)
		if !ok {
			return fmt.Errorf("%s must be a number", kw.name)
		}
		*kw.dst = bound{n: num, set: true}
	}
	if n.multipleOf.set && cmpNumber(n.multipleOf.n, number{}) <= 0 {
		return fmt.Errorf("multipleOf must be greater than 0")
	}
	return nil
}

// stringy reads the string keywords. "format" is an annotation and is
// not checked.
func (c *compiler) stringy(n *node, m map[string]any, _ int) error {
	var err error
	if n.minLength, err = count(m, "minLength", -1); err != nil {
		return err
	}
	if n.maxLength, err = count(m, "maxLength", -1); err != nil {
		return err
	}
	if v, ok := m["pattern"]; ok {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("pattern must be a string")
		}
		if n.pattern, err = c.regexp(s); err != nil {
			return fmt.Errorf("pattern: %w", err)
		}
	}
	return nil
}

// arrays reads the array keywords, including the draft-07 forms of items
// (an array) and additionalItems.
func (c *compiler) arrays(n *node, m map[string]any, depth int) error {
	var err error
	if v, ok := m["prefixItems"]; ok {
		if n.prefixItems, err = c.subList(n, v, depth, "prefixItems"); err != nil {
			return err
		}
	}
	if v, ok := m["items"]; ok {
		if _, tuple := v.([]any); tuple {
			if n.prefixItems != nil {
				return fmt.Errorf("items must be a schema when prefixItems is present")
			}
			if n.prefixItems, err = c.subList(n, v, depth, "items"); err != nil {
				return err
			}
			if ai, ok := m["additionalItems"]; ok {
				if n.items, err = c.sub(n, ai, depth, "additionalItems"); err != nil {
					return err
				}
			}
		} else if n.items, err = c.sub(n, v, depth, "items"); err != nil {
			return err
		}
	}
	if v, ok := m["contains"]; ok {
		if n.contains, err = c.sub(n, v, depth, "contains"); err != nil {
			return err
		}
	}
	if v, ok := m["unevaluatedItems"]; ok {
		if n.unevaluatedItems, err = c.sub(n, v, depth, "unevaluatedItems"); err != nil {
			return err
		}
		c.collect = true
	}
	if n.minContains, err = count(m, "minContains", 1); err != nil {
		return err
	}
	if n.maxContains, err = count(m, "maxContains", -1); err != nil {
		return err
	}
	if n.minItems, err = count(m, "minItems", -1); err != nil {
		return err
	}
	if n.maxItems, err = count(m, "maxItems", -1); err != nil {
		return err
	}
	if v, ok := m["uniqueItems"]; ok {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("uniqueItems must be a boolean")
		}
		n.uniqueItems = b
	}
	return nil
}

// objects reads the object keywords, including draft-07 "dependencies".
func (c *compiler) objects(n *node, m map[string]any, depth int) error {
	var err error
	if v, ok := m["properties"]; ok {
		props, err := c.subMap(n, v, depth, "properties")
		if err != nil {
			return err
		}
		n.properties = make(map[string]*node, len(props))
		for _, p := range props {
			n.properties[p.name] = p.schema
			n.propOrder = append(n.propOrder, p.name)
		}
	}
	if v, ok := m["required"]; ok {
		if n.required, err = stringList(v, "required"); err != nil {
			return err
		}
	}
	if v, ok := m["patternProperties"]; ok {
		props, err := c.subMap(n, v, depth, "patternProperties")
		if err != nil {
			return err
		}
		for _, p := range props {
			re, err := c.regexp(p.name)
			if err != nil {
				return fmt.Errorf("patternProperties: %w", err)
			}
			n.patternProps = append(n.patternProps, patternSchema{re, p.schema})
		}
	}
	for _, kw := range []struct {
		name string
		dst  **node
	}{
		{"additionalProperties", &n.additional},
		{"propertyNames", &n.propertyNames},
		{"unevaluatedProperties", &n.unevaluatedProps},
	} {
		if v, ok := m[kw.name]; ok {
			if *kw.dst, err = c.sub(n, v, depth, kw.name); err != nil {
				return err
			}
		}
	}
	if n.unevaluatedProps != nil {
		c.collect = true
	}
	if n.minProps, err = count(m, "minProperties", -1); err != nil {
		return err
	}
	if n.maxProps, err = count(m, "maxProperties", -1); err != nil {
		return err
	}
	if v, ok := m["dependentRequired"]; ok {
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("dependentRequired must be an object")
		}
		for _, k := range sortedKeys(obj) {
			req, err := stringList(obj[k], "dependentRequired")
			if err != nil {
				return err
			}
			n.dependentRequired = append(n.dependentRequired, dependency{k, req})
		}
	}
	if v, ok := m["dependentSchemas"]; ok {
		if n.dependentSchemas, err = c.subMap(n, v, depth, "dependentSchemas"); err != nil {
			return err
		}
	}
	if v, ok := m["dependencies"]; ok {
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("dependencies must be an object")
		}
		for _, k := range sortedKeys(obj) {
			if arr, ok := obj[k].([]any); ok {
				req, err := stringList(arr, "dependencies")
				if err != nil {
					return err
				}
				n.dependentRequired = append(n.dependentRequired, dependency{k, req})
				continue
			}
			s, err := c.sub(n, obj[k], depth, "dependencies", k)
			if err != nil {
				return err
			}
			n.dependentSchemas = append(n.dependentSchemas, namedSchema{k, s})
		}
	}
	return nil
}

// applicators reads allOf, anyOf, oneOf, not and if/then/else.
func (c *compiler) applicators(n *node, m map[string]any, depth int) error {
	var err error
	for _, kw := range []struct {
		name string
		dst  *[]*node
	}{
		{"allOf", &n.allOf},
		{"anyOf", &n.anyOf},
		{"oneOf", &n.oneOf},
	} {
		v, ok := m[kw.name]
		if !ok {
			continue
		}
		if *kw.dst, err = c.subList(n, v, depth, kw.name); err != nil {
			return err
		}
		if len(*kw.dst) == 0 {
			return fmt.Errorf("%s must be a non-empty array", kw.name)
		}
	}
	if v, ok := m["not"]; ok {
		if n.not, err = c.sub(n, v, depth, "not"); err != nil {
			return err
		}
	}
	if v, ok := m["if"]; ok {
		if n.ifS, err = c.sub(n, v, depth, "if"); err != nil {
			return err
		}
		if v, ok := m["then"]; ok {
			if n.thenS, err = c.sub(n, v, depth, "then"); err != nil {
				return err
			}
		}
		if v, ok := m["else"]; ok {
			if n.elseS, err = c.sub(n, v, depth, "else"); err != nil {
				return err
			}
		}
	}
	return nil
}

// count reads a non-negative integer keyword, returning def when absent.
// Values beyond the int32 range saturate.
func count(m map[string]any, kw string, def int) (int, error) {
	v, ok := m[kw]
	if !ok {
		return def, nil
	}
	num, ok := numberOf(v)
	if !ok || !num.isInteger() || cmpNumber(num, number{}) < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer", kw)
	}
	if num.f > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return int(num.f), nil
}

// stringList reads an array of strings, dropping duplicates.
func stringList(v any, kw string) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an array of strings", kw)
	}
	out := make([]string, 0, len(arr))
	seen := make(map[string]bool, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s must be an array of strings, found %s", kw, show(e))
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}
