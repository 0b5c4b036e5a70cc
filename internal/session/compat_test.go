package session_test

// Compatibility with the previous release (v0.1.0, commit dac849f):
// testdata/v0.1.0/session.json was captured once from its codec: the
// stored form of sessions as it encodes them, and what it decodes of
// records it did not write (format 1, the holder fields this release's
// Redis store adds to a session's hash, an unknown field, a newer
// format).

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/session"
)

type previousSession struct {
	ID           string          `json:"id"`
	Version      string          `json:"version"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	ClientInfo   json.RawMessage `json:"client_info,omitempty"`
	LogLevel     string          `json:"log_level,omitempty"`
	Principal    string          `json:"principal,omitempty"`
	Created      string          `json:"created"`
}

type previousCodec struct {
	Format    int `json:"format"`
	Encodings []struct {
		Session previousSession   `json:"session"`
		Fields  map[string]string `json:"fields"`
	} `json:"encodings"`
	Decodings []struct {
		Note    string            `json:"note"`
		Fields  map[string]string `json:"fields"`
		Session *previousSession  `json:"session"`
		Error   string            `json:"error"`
	} `json:"decodings"`
}

func (p previousSession) session(t *testing.T) *session.Session {
	t.Helper()
	created, err := time.Parse(time.RFC3339Nano, p.Created)
	if err != nil {
		t.Fatal(err)
	}
	return &session.Session{ID: p.ID, Version: p.Version, Capabilities: compact(t, p.Capabilities),
		ClientInfo: compact(t, p.ClientInfo), LogLevel: p.LogLevel, Principal: p.Principal, Created: created}
}

func compact(t *testing.T, b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// same compares two sessions as stored: the fields the codec keeps.
func same(a, b *session.Session) bool {
	return a.ID == b.ID && a.Version == b.Version && bytes.Equal(a.Capabilities, b.Capabilities) &&
		bytes.Equal(a.ClientInfo, b.ClientInfo) && a.LogLevel == b.LogLevel && a.Principal == b.Principal &&
		a.Created.Equal(b.Created)
}

// TestCodecPreviousRelease: a session the previous release stored
// decodes here as it meant it, and this release stores a session in
// exactly the fields the previous release stores (the format is the
// same, 2), so either release reads the other's sessions as its own.
// What the previous release decoded of records it did not write is what
// this release decodes: format 1, the holder fields ("\x01<instance>")
// that this release's Redis store keeps in the session's hash and the
// previous release's store returns as fields (ignored), an unknown
// field; and both refuse a newer format.
func TestCodecPreviousRelease(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "v0.1.0", "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	var prev previousCodec
	if err := json.Unmarshal(b, &prev); err != nil {
		t.Fatal(err)
	}
	if prev.Format != session.Format {
		t.Errorf("this release writes format %d, the previous release %d: update docs/UPGRADING.md and the capture", session.Format, prev.Format)
	}
	for _, e := range prev.Encodings {
		want := e.Session.session(t)
		got, err := session.Decode(want.ID, e.Fields)
		if err != nil || !same(got, want) {
			t.Errorf("Decode(%q) = %+v, %v; the previous release stored %+v", e.Fields, got, err, want)
			continue
		}
		f, err := session.Encode(want)
		if err != nil || !reflect.DeepEqual(f, e.Fields) {
			t.Errorf("Encode(%+v) = %q, %v; the previous release stores %q", want, f, err, e.Fields)
		}
	}
	for _, d := range prev.Decodings {
		got, err := session.Decode("S9", d.Fields)
		switch {
		case d.Error != "":
			if !errors.Is(err, session.ErrFormat) {
				t.Errorf("%s: Decode = %+v, %v; the previous release: %s", d.Note, got, err, d.Error)
			}
		case err != nil:
			t.Errorf("%s: Decode: %v; the previous release read %+v", d.Note, err, *d.Session)
		case !same(got, d.Session.session(t)):
			t.Errorf("%s: Decode = %+v; the previous release read %+v", d.Note, got, *d.Session)
		}
	}
}
