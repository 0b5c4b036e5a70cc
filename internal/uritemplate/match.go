package uritemplate

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Match reports whether uri is an expansion of the template and, if so,
// returns the variables: each defined variable maps to its
// percent-decoded value, and variables the expansion leaves undefined are
// absent. The whole of uri must match.
//
// Match supports every operator for variables without the explode
// modifier; a template containing an exploded variable ("{/list*}")
// matches nothing, and neither does one with more than MaxMatchVars
// variable occurrences or a uri longer than MaxMatchLen. A variable with
// a prefix modifier ("{var:3}") matches at most that many characters (a
// character being one allowed byte or one percent-encoded UTF-8
// sequence) and yields the prefix. A prefix longer than 64 is checked
// only after matching: unless that variable ends the template, Match can
// then miss a match (the variable may take text that belongs to what
// follows, and the assignment is refused rather than searched further).
//
// Where several assignments fit, Match prefers earlier variables; within
// an expression a separator ends a value where it can ("{+x,y}" splits
// "a/b,c" into "a/b" and "c"), and otherwise earlier values are as long
// as they can be. A variable that occurs more than once must take the
// same value at each place in the assignment Match finds; Match does not
// search further, so it can miss a match when the occurrences are not
// separated by literal text ("{x}{x}").
//
// Match first looks for an exact expansion, in which values are encoded
// the way Expand encodes them. For such a URI, expanding the returned
// variables yields uri again when the template has no "+" or "#"
// expression. With one, the result may differ from uri in
// percent-encoding, because "+" and "#" pass triplets in values through
// unchanged and so cannot be inverted uniquely: Match decodes "%2F" to
// "/", which Expand writes as "/".
//
// Failing an exact match, Match accepts URIs that carry characters
// unencoded where they cannot be mistaken for structure, as clients often
// send them: a value of a simple, label or path variable may contain any
// URI character except "/", "?", "#", "[", "]" and "," (";" is also
// excluded for path-style parameters), a query value any except "&" and
// "#", and a "+" or "#" value any URI character at all. Non-ASCII
// characters are then accepted everywhere, percent signs must start a
// valid triplet, and a named variable may appear as "name", "name=" or
// "name=value".
//
// Because values are decoded, they may contain "/" (from "%2F") or ".."
// segments: callers that map values to file paths must sanitise them.
func (t *Template) Match(uri string) (map[string]string, bool) {
	t.matchOnce.Do(func() {
		t.exact = compileMatcher(t.parts, true)
		t.lenient = compileMatcher(t.parts, false)
	})
	if len(uri) > MaxMatchLen || !utf8.ValidString(uri) {
		return nil, false
	}
	if vars, ok := t.exact.match(uri); ok {
		return vars, true
	}
	return t.lenient.match(uri)
}

// Limits that bound the cost of Match, whose input is untrusted. The
// regular expressions run in time proportional to the length of the URI
// times the number of variables that can be active at one position:
// microseconds for typical templates, and up to about a hundred
// milliseconds for a template of MaxMatchVars adjacent variables
// ("{+a}{+b}...") against a URI of MaxMatchLen bytes.
const (
	// MaxMatchLen is the longest URI Match accepts.
	MaxMatchLen = 8 << 10
	// MaxMatchVars is the largest number of variable occurrences a
	// template may have for Match to support it.
	MaxMatchVars = 16
)

func (m *matcher) match(uri string) (map[string]string, bool) {
	// Matching without capture groups is much cheaper; most URIs a
	// server tests against a template do not match it.
	if m == nil || !m.re.MatchString(uri) {
		return nil, false
	}
	loc := m.re.FindStringSubmatchIndex(uri)
	if loc == nil {
		return nil, false
	}
	vars := make(map[string]string)
	lastExpr := -1
	for g, c := range m.captures {
		start, end := loc[2*(g+1)], loc[2*(g+1)+1]
		if start < 0 {
			continue
		}
		raw := uri[start:end]
		if c.op.named {
			// The group holds "name" or "name=value", after the first
			// or separator character; the regular expression accepts
			// either character, so check which one is due.
			want := c.op.sep[0]
			if c.expr != lastExpr {
				want = c.op.first[0]
			}
			if uri[start-1] != want {
				return nil, false
			}
			raw = strings.TrimPrefix(raw[len(c.name):], "=")
		}
		lastExpr = c.expr
		val := pctDecode(raw)
		if c.prefix > 0 && utf8.RuneCountInString(val) > c.prefix {
			return nil, false // longer than its prefix modifier allows
		}
		if prev, ok := vars[c.name]; ok && prev != val {
			return nil, false // a repeated variable with two values
		}
		vars[c.name] = val
	}
	return vars, true
}

// matcher is a template compiled into an anchored regular expression
// whose capture groups are described by captures, in order.
type matcher struct {
	re       *regexp.Regexp
	captures []capture
}

type capture struct {
	name   string
	op     *operator
	expr   int // index of the expression in the template
	prefix int // prefix modifier (0: none)
}

// Character classes (without "%", which is matched as a triplet) that a
// variable's value may contain.
const (
	classUnreserved = `A-Za-z0-9\-._~`
	classReserved   = `:/?#\[\]@!$&'()*+,;=`
	classNonASCII   = `\x{80}-\x{10FFFF}`
	classSegment    = classUnreserved + classNonASCII + `:@!$&'()*+;=`
	classParam      = classUnreserved + classNonASCII + `:@!$&'()*+=`
	classQuery      = classUnreserved + classNonASCII + `:@!$'()*+,;=/?`
	classAll        = classUnreserved + classNonASCII + classReserved
)

// valueClass returns the characters (besides triplets) a value may hold
// under op: exactly what Expand writes when exact is set, the lenient
// superset otherwise.
func valueClass(op *operator, exact bool) string {
	if exact {
		if op.reserved {
			return classUnreserved + classReserved
		}
		return classUnreserved
	}
	switch op.char {
	case '+', '#':
		return classAll
	case ';':
		return classParam
	case '?', '&':
		return classQuery
	}
	return classSegment
}

// valuePattern returns the pattern of one unit of a value under op: a
// character of its class or a percent-encoded triplet.
func valuePattern(op *operator, exact bool) string {
	hex := `[0-9A-F]`
	if !exact {
		hex = `[0-9A-Fa-f]`
	}
	return `(?:[` + valueClass(op, exact) + `]|%` + hex + `{2})`
}

// charPattern is valuePattern for a variable with a prefix modifier,
// whose length counts characters: a percent-encoded non-ASCII character
// (a lead triplet and one to three continuation triplets) is one unit,
// and so is any other triplet ("+" and "#" pass a value's triplets
// through). An encoded value thus never has more units than the value
// has characters: bounding the units never excludes a valid assignment,
// and the decoded length is checked after matching.
func charPattern(op *operator, exact bool) string {
	hex, lead, cont := `[0-9A-F]`, `[C-F]`, `[89AB]`
	if !exact {
		hex, lead, cont = `[0-9A-Fa-f]`, `[C-Fc-f]`, `[89ABab]`
	}
	return `(?:[` + valueClass(op, exact) + `]|%[0-7]` + hex + `|%` + lead + hex + `(?:%` + cont + hex + `){1,3}|%` + hex + `{2})`
}

// maxRepeat is the largest prefix bounded in the pattern itself: a
// bounded repetition grows the compiled program with its count, and Go's
// regexp refuses programs past a size. A longer prefix matches like a
// plain variable and is checked after matching (its value may not exceed
// the prefix length).
const maxRepeat = 64

// quantifiers returns the "zero or more" and "one or more" quantifiers of
// a value: bounded by the prefix length for a prefix modifier.
func quantifiers(prefix int) (star, plus string) {
	if prefix > 0 && prefix <= maxRepeat {
		return fmt.Sprintf("{0,%d}", prefix), fmt.Sprintf("{1,%d}", prefix)
	}
	return "*", "+"
}

// namedPattern returns the pattern of "name" or "name=value" under a
// named operator.
func namedPattern(op *operator, name, value, star, plus, lazy string, exact bool) string {
	name = regexp.QuoteMeta(name)
	switch {
	case !exact:
		return name + `(?:=` + value + star + lazy + `)?`
	case op.ifemp == "": // ";name" when empty, else ";name=value"
		return name + `(?:=` + value + plus + lazy + `)?`
	default: // "name=" when empty
		return name + `=` + value + star + lazy
	}
}

// compileMatcher builds the regular expression for a template, or returns
// nil if the template has exploded variables or too many variables.
//
// An expansion writes op.first before the first defined variable of an
// expression and op.sep between defined variables. For an unnamed
// operator, a later variable defined alone looks like an earlier one
// defined alone, so the pattern only lets a variable be defined after the
// ones before it: (?:first(v1)(?:sep(v2)(?:sep(v3))?)?)?. For a named
// operator, each variable is an optional item introduced by first or sep,
// and match checks which of the two each present item has.
func compileMatcher(parts []part, exact bool) *matcher {
	var (
		b    strings.Builder
		caps []capture
	)
	b.WriteString(`\A`)
	for ei, p := range parts {
		if p.expr == nil {
			b.WriteString(regexp.QuoteMeta(p.lit))
			continue
		}
		e := p.expr
		op := e.op
		for _, v := range e.vars {
			if v.explode {
				return nil
			}
		}
		if len(caps)+len(e.vars) > MaxMatchVars {
			return nil
		}
		for i, v := range e.vars {
			caps = append(caps, capture{name: v.name, op: op, expr: ei, prefix: v.prefix})
			value := valuePattern(op, exact)
			star, plus := quantifiers(v.prefix)
			if star != "*" {
				value = charPattern(op, exact)
			}
			// Values are lazy where a separator may follow, greedy at
			// the end of the expression.
			lazy := ""
			if i < len(e.vars)-1 {
				lazy = "?"
			}
			if op.named {
				delim := regexp.QuoteMeta(op.first)
				if op.first != op.sep {
					delim = `[` + delim + regexp.QuoteMeta(op.sep) + `]`
				}
				b.WriteString(`(?:` + delim + `(` + namedPattern(op, v.name, value, star, plus, lazy, exact) + `))?`)
				continue
			}
			delim := op.sep
			if i == 0 {
				delim = op.first
			}
			b.WriteString(`(?:` + regexp.QuoteMeta(delim) + `(` + value + star + lazy + `)`)
		}
		if !op.named {
			b.WriteString(strings.Repeat(`)?`, len(e.vars)))
		}
	}
	b.WriteString(`\z`)
	re, err := regexp.Compile(b.String())
	if err != nil || re.NumSubexp() != len(caps) {
		return nil
	}
	return &matcher{re: re, captures: caps}
}

// pctDecode decodes percent-encoded triplets; s is known to hold only
// valid ones.
func pctDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && isPctEncoded(s, i) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
