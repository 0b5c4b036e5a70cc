package jsonschema

import (
	"fmt"
	"strings"
)

// maxBranchesShown bounds how many failed alternatives an anyOf or oneOf
// message describes.
const maxBranchesShown = 4

// maxBranchMessage bounds, in characters, the part of an anyOf or oneOf
// message that explains one alternative; nested alternatives would
// otherwise make messages grow exponentially.
const maxBranchMessage = 160

// applicators applies allOf, anyOf, oneOf, not, if/then/else and
// dependentSchemas. Problems found under allOf, then, else and
// dependentSchemas are reported as they are; anyOf, oneOf and not are
// summarised in one problem at the instance location.
func (v *validator) applicators(n *node, inst any, refDepth int, ann *annotations, out *sink) bool {
	ok := true
	halt := func() bool { return v.aborted != "" || (!ok && out.full()) }

	for _, sub := range n.allOf {
		sok, sann := v.validate(sub, inst, refDepth, out)
		ok = sok && ok
		v.merge(ann, sann)
		if halt() {
			return false
		}
	}

	if n.anyOf != nil {
		ok = v.anyOf(n.anyOf, inst, refDepth, ann, out) && ok
		if halt() {
			return false
		}
	}

	if n.oneOf != nil {
		ok = v.oneOf(n.oneOf, inst, refDepth, ann, out) && ok
		if halt() {
			return false
		}
	}

	if n.not != nil {
		quiet := sink{}
		if nok, _ := v.validate(n.not, inst, refDepth, &quiet); nok && v.aborted == "" {
			ok = false
			v.fail(out, "must not match the schema in \"not\"")
		}
		if halt() {
			return false
		}
	}

	if n.ifS != nil {
		quiet := sink{}
		cond, cann := v.validate(n.ifS, inst, refDepth, &quiet)
		branch := n.elseS
		if cond {
			v.merge(ann, cann)
			branch = n.thenS
		}
		if branch != nil && v.aborted == "" {
			bok, bann := v.validate(branch, inst, refDepth, out)
			ok = bok && ok
			v.merge(ann, bann)
		}
		if halt() {
			return false
		}
	}

	if len(n.dependentSchemas) > 0 {
		if m, isObj := inst.(map[string]any); isObj {
			for _, dep := range n.dependentSchemas {
				if _, present := m[dep.name]; !present {
					continue
				}
				dok, dann := v.validate(dep.schema, inst, refDepth, out)
				ok = dok && ok
				v.merge(ann, dann)
				if halt() {
					return false
				}
			}
		}
	}
	return ok
}

// anyOf passes when at least one alternative matches. Without annotation
// collection it stops at the first match.
func (v *validator) anyOf(alts []*node, inst any, refDepth int, ann *annotations, out *sink) bool {
	failures := make([]branchFailure, 0, min(len(alts), maxBranchesShown))
	matched := false
	for i, alt := range alts {
		sub := sink{}
		if i < maxBranchesShown && !out.full() {
			sub.limit = 1
		}
		aok, aann := v.validate(alt, inst, refDepth, &sub)
		if v.aborted != "" {
			return false
		}
		if aok {
			matched = true
			v.merge(ann, aann)
			if ann == nil {
				return true
			}
			continue
		}
		if i < maxBranchesShown {
			failures = append(failures, branchFailure{i, sub})
		}
	}
	if !matched {
		v.fail(out, "must match at least one of the anyOf schemas: %s", branchSummary(failures, len(alts), v.pointer()))
	}
	return matched
}

// oneOf passes when exactly one alternative matches. Without annotation
// collection it stops at the second match.
func (v *validator) oneOf(alts []*node, inst any, refDepth int, ann *annotations, out *sink) bool {
	failures := make([]branchFailure, 0, min(len(alts), maxBranchesShown))
	var matches []int
	var matchAnn *annotations
	for i, alt := range alts {
		sub := sink{}
		if i < maxBranchesShown && !out.full() {
			sub.limit = 1
		}
		aok, aann := v.validate(alt, inst, refDepth, &sub)
		if v.aborted != "" {
			return false
		}
		if aok {
			matches = append(matches, i)
			matchAnn = aann
			if len(matches) == 2 {
				break
			}
			continue
		}
		if i < maxBranchesShown {
			failures = append(failures, branchFailure{i, sub})
		}
	}
	switch len(matches) {
	case 0:
		v.fail(out, "must match exactly one of the oneOf schemas, but matches none: %s", branchSummary(failures, len(alts), v.pointer()))
		return false
	case 1:
		v.merge(ann, matchAnn)
		return true
	}
	v.fail(out, "must match exactly one of the oneOf schemas, but matches oneOf/%d and oneOf/%d", matches[0], matches[1])
	return false
}

// branchSummary describes why each shown alternative failed:
// "#0: must be a string; #1: /id: must be an integer".
func branchSummary(failures []branchFailure, total int, at string) string {
	parts := make([]string, 0, len(failures)+1)
	for _, f := range failures {
		parts = append(parts, fmt.Sprintf("#%d: %s", f.index, truncate(firstMessage(f.problems, at), maxBranchMessage)))
	}
	if total > maxBranchesShown {
		parts = append(parts, fmt.Sprintf("… (%d more)", total-maxBranchesShown))
	}
	return strings.Join(parts, "; ")
}

type branchFailure struct {
	index    int
	problems sink
}
