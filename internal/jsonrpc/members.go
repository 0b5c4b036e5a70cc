package jsonrpc

import "bytes"

// Members walks the members of a JSON object without decoding it: each
// member's name and its value as raw JSON, both slices of the object's
// bytes (a name with escapes or bytes beyond ASCII is unquoted into a
// slice of its own). It reads what encoding/json reads into a
// map[string]json.RawMessage, in order, with no map and no copies: the
// request path splits every message and its params this way.
//
// The object must be valid JSON (json.Valid): on anything else Next
// stops early, never panics, and what it returned is unspecified.
type Members struct {
	data    []byte
	pos     int
	started bool
}

// ObjectMembers walks obj's members; a value that is not an object has
// none.
func ObjectMembers(obj []byte) Members { return Members{data: obj} }

// Next returns the next member: its name, unquoted as encoding/json
// unquotes a map key, and its value without the white space around it.
// ok is false after the last member.
func (m *Members) Next() (name, value []byte, ok bool) {
	d := m.data
	i := skipSpace(d, m.pos)
	if !m.started {
		if i >= len(d) || d[i] != '{' {
			m.pos = len(d)
			return nil, nil, false
		}
		m.started = true
		i = skipSpace(d, i+1)
	} else if i < len(d) && d[i] == ',' {
		i = skipSpace(d, i+1)
	}
	if i >= len(d) || d[i] != '"' {
		m.pos = len(d) // '}' or malformed: done
		return nil, nil, false
	}
	end, plain := stringEnd(d, i)
	if end < 0 {
		m.pos = len(d)
		return nil, nil, false
	}
	if plain {
		name = d[i+1 : end-1]
	} else {
		s, err := UnquoteString(d[i:end])
		if err != nil {
			m.pos = len(d)
			return nil, nil, false
		}
		name = []byte(s)
	}
	i = skipSpace(d, end)
	if i >= len(d) || d[i] != ':' {
		m.pos = len(d)
		return nil, nil, false
	}
	i = skipSpace(d, i+1)
	vend := valueEnd(d, i)
	if vend <= i {
		m.pos = len(d)
		return nil, nil, false
	}
	m.pos = vend
	return name, d[i:vend], true
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
