package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind is the JSON type of a decoded instance value.
type kind uint8

const (
	kindInvalid kind = iota
	kindNull
	kindBoolean
	kindNumber
	kindString
	kindArray
	kindObject
)

var kindNames = [...]string{
	kindInvalid: "invalid",
	kindNull:    "null",
	kindBoolean: "boolean",
	kindNumber:  "number",
	kindString:  "string",
	kindArray:   "array",
	kindObject:  "object",
}

func (k kind) String() string { return kindNames[k] }

// kindOf classifies a value produced by encoding/json (or by normalize).
func kindOf(v any) kind {
	switch v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBoolean
	case string:
		return kindString
	case []any:
		return kindArray
	case map[string]any:
		return kindObject
	case json.Number:
		// Validity of json.Number values is checked once, by normalize.
		return kindNumber
	}
	if _, ok := numberOf(v); ok {
		return kindNumber
	}
	return kindInvalid
}

// decodeJSON decodes exactly one JSON value, keeping numbers as
// json.Number so that they can be compared exactly.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// normalize converts v to the types encoding/json decodes into through
// a JSON round trip.
func normalize(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(raw)
}

// maxMeasureDepth is the nesting beyond which measure gives up and lets
// the JSON round trip (with its own limit) deal with the value.
const maxMeasureDepth = 10000

// measure counts the values in v and reports whether v consists only of
// types kindOf understands (with valid json.Number literals).
func measure(v any, depth int) (int, bool) {
	if depth > maxMeasureDepth {
		return 0, false
	}
	switch x := v.(type) {
	case []any:
		total := 1
		for _, e := range x {
			n, ok := measure(e, depth+1)
			if !ok {
				return 0, false
			}
			total += n
		}
		return total, true
	case map[string]any:
		total := 1
		for _, e := range x {
			n, ok := measure(e, depth+1)
			if !ok {
				return 0, false
			}
			total += n
		}
		return total, true
	case json.Number:
		return 1, validNumber(string(x))
	}
	return 1, kindOf(v) != kindInvalid
}

// equalJSON reports whether two instances are equal as JSON values:
// numbers compare by value (1 equals 1.0), objects ignore key order. cost,
// when not nil, grows with the work done.
func equalJSON(a, b any, cost *int) bool {
	if cost != nil {
		*cost++
	}
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return false
	}
	switch ka {
	case kindNull:
		return true
	case kindBoolean:
		return a.(bool) == b.(bool)
	case kindString:
		if cost != nil {
			*cost += len(a.(string)) >> 4
		}
		return a.(string) == b.(string)
	case kindNumber:
		na, _ := numberOf(a)
		nb, _ := numberOf(b)
		return cmpNumber(na, nb) == 0
	case kindArray:
		x, y := a.([]any), b.([]any)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i], cost) {
				return false
			}
		}
		return true
	case kindObject:
		x, y := a.(map[string]any), b.(map[string]any)
		if len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv, cost) {
				return false
			}
		}
		return true
	}
	return false
}

// canonicalKey returns a string that is equal for two instances exactly
// when equalJSON holds for them.
func canonicalKey(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch kindOf(v) {
	case kindNull:
		b.WriteString("n")
	case kindBoolean:
		if v.(bool) {
			b.WriteString("t")
		} else {
			b.WriteString("f")
		}
	case kindNumber:
		n, _ := numberOf(v)
		b.WriteString("#")
		b.WriteString(canonicalNumber(n))
		b.WriteString(";")
	case kindString:
		b.WriteString(strconv.Quote(v.(string)))
	case kindArray:
		b.WriteString("[")
		for _, e := range v.([]any) {
			writeCanonical(b, e)
			b.WriteString(",")
		}
		b.WriteString("]")
	case kindObject:
		m := v.(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("{")
		for _, k := range keys {
			b.WriteString(strconv.Quote(k))
			b.WriteString(":")
			writeCanonical(b, m[k])
			b.WriteString(",")
		}
		b.WriteString("}")
	default:
		b.WriteString("?")
	}
}

// maxShown bounds how much of a value a message repeats.
const maxShown = 60

// show renders a value compactly for an error message.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(truncate(x, maxShown))
	case json.Number:
		return truncate(string(x), maxShown)
	}
	if n, ok := numberOf(v); ok {
		return truncate(n.String(), maxShown)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return truncate(string(raw), maxShown)
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// describe names the kind of an instance and, for short scalars, shows it:
// `string "abc"`, `number 1.5`, `object`.
func describe(v any) string {
	k := kindOf(v)
	switch k {
	case kindString, kindNumber, kindBoolean:
		return k.String() + " " + show(v)
	}
	return k.String()
}
