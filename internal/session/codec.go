package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The stored form of a session is a flat string map (the record of
// cluster.SessionStore). Its formats:
//
//	1  written before the codec had versions: no format field; v (the
//	   protocol version), caps (the capabilities re-encoded from the
//	   server's types), info (when the client sent one), lvl (once
//	   logging/setLevel ran), p (the principal), c (created, RFC 3339 in
//	   seconds).
//	2  f = "2"; the fields of format 1, with caps and info as the client
//	   sent them (compacted) and c in nanoseconds.
//
// A reader of format 1 reads format 2 correctly (it ignores f), and this
// codec reads both, so nodes of both releases can serve the same sessions
// during a rolling upgrade, in either direction. A field that older
// readers may ignore can be added without a new format; a change they
// would misread needs one, and then older readers fail with ErrFormat
// instead of serving a misread session. Field names are short ASCII; the
// Redis store reserves "\x00" for itself.
const (
	// Format is the format Encode writes.
	Format = 2

	fieldFormat    = "f"
	fieldVersion   = "v"
	fieldCaps      = "caps"
	fieldInfo      = "info"
	fieldLevel     = "lvl"
	fieldPrincipal = "p"
	fieldCreated   = "c"
)

var (
	// ErrFormat: the record was written in a format newer than this
	// release reads (a newer node wrote it).
	ErrFormat = errors.New("session: record format is newer than this node reads")
	// ErrCorrupt: the record is not a session this codec wrote.
	ErrCorrupt = errors.New("session: corrupt record")
)

// Encode returns the stored form of s (its ID is the record's key, not a
// field). It fails, wrapping ErrCorrupt, on a session Decode would not
// read back: no version, or capabilities or client info that are not a
// JSON object. Nil capabilities are stored as {}.
func Encode(s *Session) (map[string]string, error) {
	if s.Version == "" {
		return nil, corrupt(s.ID, fieldVersion, "missing")
	}
	caps := s.Capabilities
	if len(caps) == 0 {
		caps = json.RawMessage("{}")
	}
	capsJSON, err := compactObject(caps)
	if err != nil {
		return nil, corrupt(s.ID, fieldCaps, err.Error())
	}
	if !storable(s.Created) {
		return nil, corrupt(s.ID, fieldCreated, "year out of range")
	}
	f := map[string]string{
		fieldFormat:    strconv.Itoa(Format),
		fieldVersion:   s.Version,
		fieldCaps:      capsJSON,
		fieldPrincipal: s.Principal,
		fieldCreated:   s.Created.UTC().Format(time.RFC3339Nano),
	}
	if len(s.ClientInfo) > 0 {
		if f[fieldInfo], err = compactObject(s.ClientInfo); err != nil {
			return nil, corrupt(s.ID, fieldInfo, err.Error())
		}
	}
	if s.LogLevel != "" {
		f[fieldLevel] = s.LogLevel
	}
	return f, nil
}

// Decode reads the stored form of session id, in any format up to
// Format. A record of a newer format fails with an error wrapping
// ErrFormat; a record this codec did not write (a field missing or
// malformed) with one wrapping ErrCorrupt. Unknown fields are ignored.
// LastUsed and Subscriptions are left zero (see Session).
func Decode(id string, f map[string]string) (*Session, error) {
	if v, ok := f[fieldFormat]; ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1 || strconv.Itoa(n) != v:
			return nil, corrupt(id, fieldFormat, fmt.Sprintf("%q is not a format number", v))
		case n > Format:
			return nil, fmt.Errorf("session %q: format %d (this node reads formats up to %d): %w", id, n, Format, ErrFormat)
		}
	}
	s := &Session{ID: id, Version: f[fieldVersion], LogLevel: f[fieldLevel], Principal: f[fieldPrincipal]}
	if s.Version == "" {
		return nil, corrupt(id, fieldVersion, "missing")
	}
	caps, ok := f[fieldCaps]
	if !ok {
		return nil, corrupt(id, fieldCaps, "missing")
	}
	if !isObject(caps) {
		return nil, corrupt(id, fieldCaps, "not a JSON object")
	}
	s.Capabilities = json.RawMessage(caps)
	if info, ok := f[fieldInfo]; ok {
		if !isObject(info) {
			return nil, corrupt(id, fieldInfo, "not a JSON object")
		}
		s.ClientInfo = json.RawMessage(info)
	}
	c, ok := f[fieldCreated]
	if !ok {
		return nil, corrupt(id, fieldCreated, "missing")
	}
	var err error
	if s.Created, err = time.Parse(time.RFC3339Nano, c); err != nil {
		return nil, corrupt(id, fieldCreated, err.Error())
	}
	if s.Created = s.Created.UTC(); !storable(s.Created) {
		return nil, corrupt(id, fieldCreated, "year out of range")
	}
	return s, nil
}

// storable reports whether t, in UTC, is a time RFC 3339 can write.
func storable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

func corrupt(id, field, why string) error {
	return fmt.Errorf("session %q: field %q: %s: %w", id, field, why, ErrCorrupt)
}

// isObject reports whether s is one valid JSON object.
func isObject(s string) bool {
	b := bytes.TrimLeft([]byte(s), " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// compactObject returns b, one JSON object, without insignificant space.
func compactObject(b json.RawMessage) (string, error) {
	if !isObject(string(b)) {
		return "", errors.New("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "", err
	}
	return buf.String(), nil
}
