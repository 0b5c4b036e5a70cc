package jsonschema

import (
	"errors"
	"strconv"
	"strings"
)

// ErrTooComplex is wrapped by a *ValidationError when validation stopped
// because the schema was too expensive to evaluate against the instance
// (a $ref cycle that consumes no input, or composition keywords that blow
// up). It points at the schema rather than at the instance.
var ErrTooComplex = errors.New("jsonschema: schema too expensive to evaluate")

// Problem is one reason an instance does not match a schema.
type Problem struct {
	// Path is the JSON pointer (RFC 6901) of the offending value in the
	// instance, "" for the instance itself. For a missing required
	// property it is the pointer the property would have.
	Path string
	// Message says what is wrong, in words meant for whoever has to fix
	// the instance, e.g. "must be >= 0".
	Message string
}

func (p Problem) String() string {
	return displayPath(p.Path) + ": " + p.Message
}

// displayPath shows the root pointer "" as "(root)".
func displayPath(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// ValidationError is the error returned by Validate. It lists the
// problems found, in a deterministic order.
type ValidationError struct {
	Problems []Problem
	// Truncated reports that validation stopped collecting once the list
	// was full, so there may be more problems than are listed.
	Truncated bool

	cause error
}

// errorShown is how many problems Error joins.
const errorShown = 5

// Error joins the first few problems, e.g.
// "/age: must be >= 0; /name: missing required property".
func (e *ValidationError) Error() string {
	if len(e.Problems) == 0 {
		return "invalid value"
	}
	var b strings.Builder
	for i, p := range e.Problems {
		if i == errorShown {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	more := len(e.Problems) - errorShown
	switch {
	case more > 0 && e.Truncated:
		b.WriteString(" (and at least " + strconv.Itoa(more) + " more)")
	case more > 0:
		b.WriteString(" (and " + strconv.Itoa(more) + " more)")
	case e.Truncated:
		b.WriteString(" (and possibly more)")
	}
	return b.String()
}

// Unwrap returns ErrTooComplex when validation was cut short.
func (e *ValidationError) Unwrap() error { return e.cause }

// segment is one step of an instance path. The validator keeps the path
// to the current value as a stack of segments and only renders it as a
// string for problems.
type segment struct {
	key   string
	index int
	isIdx bool
}

func (v *validator) enter(key string) { v.path = append(v.path, segment{key: key}) }
func (v *validator) enterItem(i int)  { v.path = append(v.path, segment{index: i, isIdx: true}) }
func (v *validator) leave()           { v.path = v.path[:len(v.path)-1] }

// pointer renders the current path as a JSON pointer.
func (v *validator) pointer() string {
	var b strings.Builder
	for _, s := range v.path {
		b.WriteByte('/')
		if s.isIdx {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			b.WriteString(escapePointer(s.key))
		}
	}
	return b.String()
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return pointerEscaper.Replace(s)
}
