package jsonschema

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Validation limits.
const (
	// maxRefDepth bounds how many $ref hops may be followed at one
	// instance location: a reference cycle that consumes no input stops
	// there instead of looping.
	maxRefDepth = 64
	// baseSteps and stepsPerValue make up the step budget of one
	// Validate call: one step is one subschema applied to one value.
	baseSteps     = 1 << 18
	stepsPerValue = 64
	// maxProblems is how many problems a ValidationError lists at most.
	maxProblems = 20
)

// Validate reports whether instance conforms to the schema. The instance
// is a value as decoded by encoding/json: map[string]any, []any, float64
// or json.Number, string, bool or nil. Go integer types are accepted as
// numbers; other Go values (structs, typed maps and slices) are converted
// through a JSON round trip first.
//
// The error is nil or a *ValidationError.
func (s *Schema) Validate(instance any) error {
	values, plain := measure(instance, 0)
	if !plain {
		v, err := normalize(instance)
		if err != nil {
			return &ValidationError{Problems: []Problem{{Message: "cannot be represented as JSON: " + err.Error()}}}
		}
		instance = v
		values, _ = measure(instance, 0)
	}
	return s.validate(instance, values)
}

// ValidateJSON decodes raw (keeping numbers exact) and validates the
// result. Malformed JSON is reported as a plain error, not a
// *ValidationError.
func (s *Schema) ValidateJSON(raw []byte) error {
	v, err := decodeJSON(raw)
	if err != nil {
		return fmt.Errorf("jsonschema: invalid JSON: %w", err)
	}
	values, _ := measure(v, 0)
	return s.validate(v, values)
}

func (s *Schema) validate(instance any, values int) error {
	v := validator{collect: s.collect, budget: baseSteps + stepsPerValue*values}
	out := sink{limit: maxProblems}
	ok, _ := v.validate(s.root, instance, 0, &out)
	switch {
	case v.aborted != "":
		return &ValidationError{Problems: []Problem{{Message: v.aborted}}, cause: ErrTooComplex}
	case ok:
		return nil
	case len(out.problems) == 0:
		// Cannot happen: every failure reports a problem to a sink with
		// room. Keep the error meaningful regardless.
		return &ValidationError{Problems: []Problem{{Message: "does not match the schema"}}}
	}
	return &ValidationError{Problems: out.problems, Truncated: out.dropped || out.full()}
}

// sink collects problems up to a limit. A sink with limit 0 only records
// that something failed, without formatting messages.
type sink struct {
	problems []Problem
	limit    int
	dropped  bool
}

func (s *sink) full() bool { return len(s.problems) >= s.limit }

// annotations records which parts of an instance a schema evaluated, for
// unevaluatedProperties and unevaluatedItems. They are only collected
// when the document uses those keywords.
type annotations struct {
	props    map[string]struct{}
	items    int // leading items evaluated
	allItems bool
	contains map[int]struct{}
}

func (v *validator) merge(a, b *annotations) {
	if a == nil || b == nil {
		return
	}
	v.charge(len(b.props) + len(b.contains))
	for k := range b.props {
		a.addProp(k)
	}
	a.items = max(a.items, b.items)
	a.allItems = a.allItems || b.allItems
	for i := range b.contains {
		if a.contains == nil {
			a.contains = map[int]struct{}{}
		}
		a.contains[i] = struct{}{}
	}
}

func (a *annotations) addProp(k string) {
	if a == nil {
		return
	}
	if a.props == nil {
		a.props = map[string]struct{}{}
	}
	a.props[k] = struct{}{}
}

func (a *annotations) hasItem(i int) bool {
	if a.allItems || i < a.items {
		return true
	}
	_, ok := a.contains[i]
	return ok
}

// validator is the state of one Validate call.
type validator struct {
	collect bool
	steps   int
	budget  int
	aborted string    // why validation stopped early, if it did
	path    []segment // location of the value being validated
}

func (v *validator) fail(out *sink, format string, args ...any) {
	if out.full() {
		out.dropped = true
		return
	}
	p := Problem{Path: v.pointer(), Message: fmt.Sprintf(format, args...)}
	v.charge(1 + (len(p.Path)+len(p.Message))>>4)
	out.problems = append(out.problems, p)
}

// validate applies n to inst. It returns whether inst conforms and, when
// annotations are collected and inst conforms, what n evaluated.
func (v *validator) validate(n *node, inst any, refDepth int, out *sink) (bool, *annotations) {
	if v.aborted != "" {
		return false, nil
	}
	if !v.charge(1) {
		return false, nil
	}
	if n.isBool {
		if !n.allow {
			v.fail(out, "is not allowed here")
			return false, nil
		}
		return true, nil
	}
	var ann *annotations
	if v.collect {
		ann = &annotations{}
	}
	ok := true
	// stop reports that the outcome is known and no more problems fit.
	stop := func() bool { return v.aborted != "" || (!ok && out.full()) }

	if n.ref != nil {
		if refDepth >= maxRefDepth {
			v.aborted = fmt.Sprintf("validation stopped: more than %d $ref hops at %s without consuming input (a reference cycle in the schema)", maxRefDepth, displayPath(v.pointer()))
			return false, nil
		}
		rok, rann := v.validate(n.ref, inst, refDepth+1, out)
		ok = rok
		v.merge(ann, rann)
		if stop() {
			return false, nil
		}
	}

	k := kindOf(inst)
	if n.types != 0 && !typeMatches(n.types, k, inst) {
		v.fail(out, "must be %s, got %s", typeList(n.types), describe(inst))
		return false, nil
	}
	if n.enum != nil && !v.inEnum(n, inst, k) {
		ok = false
		v.fail(out, "must be one of %s; got %s", enumList(n.enum), show(inst))
	}
	if n.hasConst && !v.equal(inst, n.constVal) {
		ok = false
		v.fail(out, "must be equal to %s", show(n.constVal))
	}
	if stop() {
		return false, nil
	}

	switch k {
	case kindNumber:
		ok = v.number(n, inst, out) && ok
	case kindString:
		ok = v.string(n, inst.(string), out) && ok
	case kindArray:
		ok = v.array(n, inst.([]any), ann, out) && ok
	case kindObject:
		ok = v.object(n, inst.(map[string]any), ann, out) && ok
	}
	if stop() {
		return false, nil
	}
	ok = v.applicators(n, inst, refDepth, ann, out) && ok
	if stop() {
		return false, nil
	}
	if v.collect {
		switch k {
		case kindArray:
			ok = v.unevaluatedItems(n, inst.([]any), ann, out) && ok
		case kindObject:
			ok = v.unevaluatedProps(n, inst.(map[string]any), ann, out) && ok
		}
	}
	if !ok {
		return false, nil
	}
	return true, ann
}

func typeMatches(t typeSet, k kind, inst any) bool {
	if t&typeBit(k) != 0 {
		return true
	}
	if k == kindNumber && t&typeInteger != 0 {
		n, _ := numberOf(inst)
		return n.isInteger()
	}
	return false
}

// typeList words a type set for messages: "a string", "an integer or
// null".
func typeList(t typeSet) string {
	var names []string
	for _, e := range []struct {
		bit  typeSet
		name string
	}{
		{typeBit(kindString), "a string"},
		{typeInteger, "an integer"},
		{typeBit(kindNumber), "a number"},
		{typeBit(kindBoolean), "a boolean"},
		{typeBit(kindObject), "an object"},
		{typeBit(kindArray), "an array"},
		{typeBit(kindNull), "null"},
	} {
		if t&e.bit != 0 {
			names = append(names, e.name)
		}
	}
	return joinOr(names)
}

func joinOr(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// inEnum checks enum membership. Long enums use a set of canonical keys
// for scalars; composite instances are compared one by one, so the cost
// is bounded by the size of the enum rather than of the instance.
func (v *validator) inEnum(n *node, inst any, k kind) bool {
	if n.enumKeys != nil && k != kindArray && k != kindObject {
		key := canonicalKey(inst)
		v.charge(1 + len(key)>>4)
		_, ok := n.enumKeys[key]
		return ok
	}
	for _, e := range n.enum {
		if v.equal(inst, e) {
			return true
		}
	}
	return false
}

// equal compares two instances, charging the work to the budget.
func (v *validator) equal(a, b any) bool {
	cost := 0
	eq := equalJSON(a, b, &cost)
	v.charge(cost)
	return eq
}

// charge adds work beyond one step to the budget: comparisons, string
// scans, key sorting. It reports false once the budget is exhausted.
func (v *validator) charge(cost int) bool {
	v.steps += cost
	if v.steps > v.budget && v.aborted == "" {
		v.aborted = tooExpensive
	}
	return v.aborted == ""
}

const tooExpensive = "validation stopped: the schema is too expensive to evaluate against this value"

// enumList shows the first few allowed values.
func enumList(vals []any) string {
	const shown = 10
	parts := make([]string, 0, min(len(vals), shown)+1)
	for i, e := range vals {
		if i == shown {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(vals)-shown))
			break
		}
		parts = append(parts, show(e))
	}
	return strings.Join(parts, ", ")
}

func (v *validator) number(n *node, inst any, out *sink) bool {
	num, _ := numberOf(inst)
	ok := true
	if n.minimum.set && cmpNumber(num, n.minimum.n) < 0 {
		ok = false
		v.fail(out, "must be >= %s", n.minimum.n)
	}
	if n.exclMin.set && cmpNumber(num, n.exclMin.n) <= 0 {
		ok = false
		v.fail(out, "must be > %s", n.exclMin.n)
	}
	if n.maximum.set && cmpNumber(num, n.maximum.n) > 0 {
		ok = false
		v.fail(out, "must be <= %s", n.maximum.n)
	}
	if n.exclMax.set && cmpNumber(num, n.exclMax.n) >= 0 {
		ok = false
		v.fail(out, "must be < %s", n.exclMax.n)
	}
	if n.multipleOf.set && !isMultipleOf(num, n.multipleOf.n) {
		ok = false
		v.fail(out, "must be a multiple of %s", n.multipleOf.n)
	}
	return ok
}

func (v *validator) string(n *node, s string, out *sink) bool {
	ok := true
	if n.minLength >= 0 || n.maxLength >= 0 || n.pattern != nil {
		v.charge(len(s) >> 4)
	}
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLength >= 0 && l < n.minLength {
			ok = false
			v.fail(out, "must be at least %s long", plural(n.minLength, "character"))
		}
		if n.maxLength >= 0 && l > n.maxLength {
			ok = false
			v.fail(out, "must be at most %s long", plural(n.maxLength, "character"))
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		ok = false
		v.fail(out, "must match the pattern %q", n.pattern.String())
	}
	return ok
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (v *validator) array(n *node, a []any, ann *annotations, out *sink) bool {
	ok := true
	if n.minItems >= 0 && len(a) < n.minItems {
		ok = false
		v.fail(out, "must contain at least %s", plural(n.minItems, "item"))
	}
	if n.maxItems >= 0 && len(a) > n.maxItems {
		ok = false
		v.fail(out, "must contain at most %s", plural(n.maxItems, "item"))
	}
	if n.uniqueItems {
		i, j, dup, cost := firstDuplicate(a)
		v.charge(cost)
		if dup {
			ok = false
			v.fail(out, "items must be unique, but items %d and %d are equal", i, j)
		}
	}
	for i := 0; i < len(a) && i < len(n.prefixItems); i++ {
		if !ok && out.full() || v.aborted != "" {
			return false
		}
		v.enterItem(i)
		iok, _ := v.validate(n.prefixItems[i], a[i], 0, out)
		v.leave()
		ok = iok && ok
	}
	if ann != nil {
		ann.items = max(ann.items, min(len(a), len(n.prefixItems)))
	}
	if n.items != nil {
		for i := len(n.prefixItems); i < len(a); i++ {
			if !ok && out.full() || v.aborted != "" {
				return false
			}
			v.enterItem(i)
			iok, _ := v.validate(n.items, a[i], 0, out)
			v.leave()
			ok = iok && ok
		}
		if ann != nil {
			ann.allItems = true
		}
	}
	if n.contains != nil {
		matches := 0
		for i, e := range a {
			if v.aborted != "" {
				return false
			}
			v.enterItem(i)
			quiet := sink{}
			cok, _ := v.validate(n.contains, e, 0, &quiet)
			v.leave()
			if cok {
				matches++
				if ann != nil {
					if ann.contains == nil {
						ann.contains = map[int]struct{}{}
					}
					ann.contains[i] = struct{}{}
				} else if n.maxContains < 0 && matches >= n.minContains {
					break
				}
			}
		}
		if matches < n.minContains {
			ok = false
			v.fail(out, "must contain at least %s matching the \"contains\" schema", plural(n.minContains, "item"))
		}
		if n.maxContains >= 0 && matches > n.maxContains {
			ok = false
			v.fail(out, "must contain at most %s matching the \"contains\" schema", plural(n.maxContains, "item"))
		}
	}
	return ok
}

// firstDuplicate finds the first pair of equal items. Short arrays are
// compared pairwise; longer ones through canonical keys, in linear time.
// It also returns a measure of the work done.
func firstDuplicate(a []any) (i, j int, dup bool, cost int) {
	if len(a) <= 16 {
		for j := 1; j < len(a); j++ {
			for i := 0; i < j; i++ {
				if equalJSON(a[i], a[j], &cost) {
					return i, j, true, cost
				}
			}
		}
		return 0, 0, false, cost
	}
	seen := make(map[string]int, len(a))
	for j, e := range a {
		key := canonicalKey(e)
		cost += 1 + len(key)>>4
		if i, dup := seen[key]; dup {
			return i, j, true, cost
		}
		seen[key] = j
	}
	return 0, 0, false, cost
}

func (v *validator) unevaluatedItems(n *node, a []any, ann *annotations, out *sink) bool {
	if n.unevaluatedItems == nil {
		return true
	}
	ok := true
	for i, e := range a {
		if ann.hasItem(i) {
			continue
		}
		if !ok && out.full() || v.aborted != "" {
			return false
		}
		v.enterItem(i)
		var iok bool
		if n.unevaluatedItems.isBool && !n.unevaluatedItems.allow {
			v.fail(out, "is not allowed: the schema allows no further items")
		} else {
			iok, _ = v.validate(n.unevaluatedItems, e, 0, out)
		}
		v.leave()
		ok = iok && ok
	}
	if ok {
		ann.allItems = true
	}
	return ok
}

// sortedKeys returns the keys of m in order, for deterministic problems,
// leaving out those in skip.
func (v *validator) sortedKeys(m map[string]any, skip map[string]*node) []string {
	v.charge(len(m))
	var keys []string
	for k := range m {
		if _, known := skip[k]; !known {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
