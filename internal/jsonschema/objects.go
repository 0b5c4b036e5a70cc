package jsonschema

import (
	"fmt"
	"strings"
)

// maxNamesShown bounds how many allowed property names an "unknown
// property" message lists.
const maxNamesShown = 20

// object applies the object keywords of n to m.
func (v *validator) object(n *node, m map[string]any, ann *annotations, out *sink) bool {
	ok := true
	// halt reports that no more problems fit or validation stopped.
	halt := func() bool { return v.aborted != "" || (!ok && out.full()) }

	if n.minProps >= 0 && len(m) < n.minProps {
		ok = false
		v.fail(out, "must have at least %s", plural(n.minProps, "property"))
	}
	if n.maxProps >= 0 && len(m) > n.maxProps {
		ok = false
		v.fail(out, "must have at most %s", plural(n.maxProps, "property"))
	}
	for _, name := range n.required {
		if _, present := m[name]; !present {
			ok = false
			v.enter(name)
			v.fail(out, "missing required property")
			v.leave()
		}
	}
	for _, dep := range n.dependentRequired {
		if _, present := m[dep.name]; !present {
			continue
		}
		for _, name := range dep.req {
			if _, present := m[name]; !present {
				ok = false
				v.enter(name)
				v.fail(out, "missing property, required when %q is present", dep.name)
				v.leave()
			}
		}
	}
	for _, name := range n.propOrder {
		val, present := m[name]
		if !present {
			continue
		}
		if halt() {
			return false
		}
		v.enter(name)
		pok, _ := v.validate(n.properties[name], val, 0, out)
		v.leave()
		ok = pok && ok
		ann.addProp(name)
	}

	// The remaining keywords look at every key (patternProperties,
	// propertyNames, annotation collection) or only at keys that
	// "properties" does not cover (additionalProperties).
	var keys []string
	switch {
	case n.patternProps != nil || n.propertyNames != nil || ann != nil:
		keys = v.sortedKeys(m, nil)
	case n.additional != nil:
		keys = v.sortedKeys(m, n.properties)
	}
	for _, key := range keys {
		if halt() {
			return false
		}
		v.enter(key)
		ok = v.objectKey(n, m, key, ann, out) && ok
		v.leave()
	}
	return ok
}

// objectKey applies propertyNames, patternProperties and
// additionalProperties to one key of m; the path is already at the key.
func (v *validator) objectKey(n *node, m map[string]any, key string, ann *annotations, out *sink) bool {
	ok := true
	if n.propertyNames != nil {
		sub := sink{limit: 1}
		if nok, _ := v.validate(n.propertyNames, key, 0, &sub); !nok {
			ok = false
			v.fail(out, "invalid property name: %s", firstMessage(sub, v.pointer()))
		}
	}
	_, matched := n.properties[key]
	for _, pp := range n.patternProps {
		if !pp.re.MatchString(key) {
			continue
		}
		matched = true
		pok, _ := v.validate(pp.schema, m[key], 0, out)
		ok = pok && ok
		ann.addProp(key)
	}
	if matched || n.additional == nil {
		return ok
	}
	ann.addProp(key)
	if n.additional.isBool && !n.additional.allow {
		v.fail(out, "unknown property%s", allowedNames(n))
		return false
	}
	aok, _ := v.validate(n.additional, m[key], 0, out)
	return aok && ok
}

// allowedNames lists the properties a closed object accepts, for the
// "unknown property" message.
func allowedNames(n *node) string {
	if len(n.propOrder) == 0 {
		if len(n.patternProps) > 0 {
			return " (property names must match one of the patterns)"
		}
		return " (no properties are allowed here)"
	}
	names := n.propOrder
	more := ""
	if len(names) > maxNamesShown {
		more = fmt.Sprintf(", … (%d more)", len(names)-maxNamesShown)
		names = names[:maxNamesShown]
	}
	return " (allowed properties: " + strings.Join(names, ", ") + more + ")"
}

// firstMessage returns the first problem of a sub-validation, prefixed
// by its path when that differs from at.
func firstMessage(s sink, at string) string {
	if len(s.problems) == 0 {
		return "does not match"
	}
	p := s.problems[0]
	if p.Path == at {
		return p.Message
	}
	return p.String()
}

// unevaluatedProps applies unevaluatedProperties to the keys no other
// keyword of n (or of a subschema that matched) evaluated.
func (v *validator) unevaluatedProps(n *node, m map[string]any, ann *annotations, out *sink) bool {
	if n.unevaluatedProps == nil {
		return true
	}
	ok := true
	for _, key := range v.sortedKeys(m, nil) {
		if _, seen := ann.props[key]; seen {
			continue
		}
		if v.aborted != "" || (!ok && out.full()) {
			return false
		}
		v.enter(key)
		var uok bool
		if n.unevaluatedProps.isBool && !n.unevaluatedProps.allow {
			v.fail(out, "unknown property (not allowed by unevaluatedProperties)")
		} else {
			uok, _ = v.validate(n.unevaluatedProps, m[key], 0, out)
		}
		v.leave()
		ok = uok && ok
	}
	if ok {
		for key := range m {
			ann.addProp(key)
		}
	}
	return ok
}
