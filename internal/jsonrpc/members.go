package jsonrpc

import (
	"bytes"
	"iter"
)

// Members walks the members of a JSON object without decoding it,
// yielding each member's name and its value as raw JSON, both slices of
// the object's bytes (a name with escapes or bytes beyond ASCII is
// unquoted into a slice of its own). It reads what encoding/json reads
// into a map[string]json.RawMessage, in order, with no map and no
// copies: the request path splits every message and its params this
// way. The name is unquoted as encoding/json unquotes a map key, the
// value has no white space around it; a value that is not an object has
// no members.
//
// The object must be valid JSON (json.Valid): on anything else the walk
// stops early, never panics, and what it yielded is unspecified.
func Members(obj []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		for i := 0; ; {
			name, value, next, ok := member(obj, i)
			if !ok || !yield(name, value) {
				return
			}
			i = next
		}
	}
}

// member reads the member of object d whose name (or the object's
// opening brace, at the first) is at or after white space from i, and
// returns it with the index after its value.
func member(d []byte, i int) (name, value []byte, next int, ok bool) {
	i = skipSpace(d, i)
	switch {
	case i >= len(d):
		return nil, nil, 0, false
	case d[i] == '{', d[i] == ',':
		i = skipSpace(d, i+1)
	default: // '}', or not an object
		return nil, nil, 0, false
	}
	if i >= len(d) || d[i] != '"' {
		return nil, nil, 0, false
	}
	end, plain := stringEnd(d, i)
	if end < 0 {
		return nil, nil, 0, false
	}
	if plain {
		name = d[i+1 : end-1]
	} else {
		s, err := UnquoteString(d[i:end])
		if err != nil {
			return nil, nil, 0, false
		}
		name = []byte(s)
	}
	i = skipSpace(d, end)
	if i >= len(d) || d[i] != ':' {
		return nil, nil, 0, false
	}
	i = skipSpace(d, i+1)
	vend := valueEnd(d, i)
	if vend <= i {
		return nil, nil, 0, false
	}
	return name, d[i:vend], vend, true
}

// skipSpace skips the white space JSON allows from i.
func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at d[i] ('"'),
// or -1 when it does not end; plain reports that it holds printable
// ASCII without escapes only (its bytes are its value).
func stringEnd(d []byte, i int) (end int, plain bool) {
	plain = true
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1, plain
		case c == '\\':
			plain = false
			j++
		case c < 0x20 || c > 0x7e:
			plain = false
		}
	}
	return -1, false
}

// valueEnd returns the index after the JSON value starting at d[i], or
// i when there is none there.
func valueEnd(d []byte, i int) int {
	if i >= len(d) {
		return i
	}
	switch d[i] {
	case '"':
		end, _ := stringEnd(d, i)
		if end < 0 {
			return i
		}
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			case '"':
				end, _ := stringEnd(d, j)
				if end < 0 {
					return i
				}
				j = end - 1
			}
		}
		return i
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(d) {
		switch d[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// FieldIndex returns the index in fields of the struct field a member
// named name decodes into, matched as encoding/json matches it (the
// exact name, else one equal under case folding: bytes.EqualFold), or
// -1. fields must differ from each other under case folding.
func FieldIndex(name []byte, fields []string) int {
	for i, f := range fields {
		if string(name) == f || bytes.EqualFold(name, []byte(f)) {
			return i
		}
	}
	return -1
}
