package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ID is a JSON-RPC request id: a string or an integer, never null.
// The zero ID means "no id" (a notification). IDs are comparable, so they
// can key maps directly; a string "1" and an integer 1 are different ids.
type ID struct {
	str   string
	num   int64
	isNum bool
	valid bool
}

// StringID returns a string id.
func StringID(s string) ID { return ID{str: s, valid: true} }

// IntID returns an integer id.
func IntID(n int64) ID { return ID{num: n, isNum: true, valid: true} }

// IsValid reports whether the id is present.
func (id ID) IsValid() bool { return id.valid }

// IsString reports whether the id is a string id.
func (id ID) IsString() bool { return id.valid && !id.isNum }

// Str returns the string form of a string id ("" for integer ids).
func (id ID) Str() string { return id.str }

// Int returns the value of an integer id (0 for string ids).
func (id ID) Int() int64 { return id.num }

// String renders the id for logs: integers bare, strings quoted.
func (id ID) String() string {
	switch {
	case !id.valid:
		return "<none>"
	case id.isNum:
		return strconv.FormatInt(id.num, 10)
	default:
		return strconv.Quote(id.str)
	}
}

// Key renders the id as a string that is unique per id and keeps the
// string/integer distinction ("n:1" vs "s:1"); it round-trips with ParseKey.
func (id ID) Key() string {
	switch {
	case !id.valid:
		return ""
	case id.isNum:
		return "n:" + strconv.FormatInt(id.num, 10)
	default:
		return "s:" + id.str
	}
}

// ParseKey is the inverse of Key.
func ParseKey(k string) (ID, error) {
	if len(k) < 2 || k[1] != ':' {
		return ID{}, errors.New("jsonrpc: malformed id key")
	}
	switch k[0] {
	case 'n':
		n, err := strconv.ParseInt(k[2:], 10, 64)
		if err != nil {
			return ID{}, errors.New("jsonrpc: malformed id key")
		}
		return IntID(n), nil
	case 's':
		return StringID(k[2:]), nil
	}
	return ID{}, errors.New("jsonrpc: malformed id key")
}

// MarshalJSON encodes the id as a JSON string or number (null when absent).
func (id ID) MarshalJSON() ([]byte, error) {
	switch {
	case !id.valid:
		return []byte("null"), nil
	case id.isNum:
		return strconv.AppendInt(nil, id.num, 10), nil
	default:
		return json.Marshal(id.str)
	}
}

var errBadID = errors.New("id must be a string or an integer")

// UnmarshalJSON accepts a JSON string or an integral number. null, floats,
// objects, arrays and booleans are rejected.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errBadID
	}
	switch b[0] {
	case '"':
		s, err := UnquoteString(b)
		if err != nil {
			return errBadID
		}
		*id = StringID(s)
		return nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			// Accept integral values written with an exponent or fraction
			// of zero (1.0, 1e3): JSON does not distinguish them.
			f, ferr := strconv.ParseFloat(string(b), 64)
			if ferr != nil || f != float64(int64(f)) || f > 1<<53 || f < -(1<<53) {
				return errBadID
			}
			n = int64(f)
		}
		*id = IntID(n)
		return nil
	}
	return errBadID
}

// UnquoteString decodes the JSON value b into a string as json.Unmarshal
// does (the same result and the same failures), without the decoder for
// the common string of printable ASCII without escapes.
func UnquoteString(b []byte) (string, error) {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' {
		plain := true
		for _, c := range b[1 : n-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			return string(b[1 : n-1]), nil
		}
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
