package session_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/session"
)

// sameStored reports whether a and b hold the same stored state (LastUsed
// and Subscriptions are not stored).
func sameStored(a, b *session.Session) bool {
	return a.ID == b.ID && a.Version == b.Version && string(a.Capabilities) == string(b.Capabilities) &&
		string(a.ClientInfo) == string(b.ClientInfo) && a.LogLevel == b.LogLevel &&
		a.Principal == b.Principal && a.Created.Equal(b.Created)
}

func TestCodecRoundTrip(t *testing.T) {
	created := time.Date(2026, 11, 24, 1, 2, 3, 456789012, time.UTC)
	for _, c := range []struct {
		name string
		in   session.Session
		want session.Session // the session read back, when not in
	}{
		{name: "full", in: session.Session{
			ID: "s1", Version: "2025-11-25", Capabilities: json.RawMessage(`{"sampling":{"tools":{}},"x-vendor":[1,2]}`),
			ClientInfo: json.RawMessage(`{"name":"c","version":"1","title":"ünï"}`), LogLevel: "warning",
			Principal: "alice", Created: created,
		}},
		{name: "minimal", in: session.Session{ID: "s2", Version: "2025-03-26", Created: created},
			want: session.Session{ID: "s2", Version: "2025-03-26", Capabilities: json.RawMessage(`{}`), Created: created}},
		{name: "spaced JSON is compacted", in: session.Session{
			ID: "s3", Version: "2025-06-18", Capabilities: json.RawMessage(" {\n \"roots\" : { } }"),
			ClientInfo: json.RawMessage(`{ "name": "c" }`), Created: created,
		}, want: session.Session{
			ID: "s3", Version: "2025-06-18", Capabilities: json.RawMessage(`{"roots":{}}`),
			ClientInfo: json.RawMessage(`{"name":"c"}`), Created: created,
		}},
		{name: "local time is kept as the instant", in: session.Session{
			ID: "s4", Version: "2025-06-18", Capabilities: json.RawMessage(`{}`), Created: created.In(time.FixedZone("x", 3600)),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := session.Encode(&c.in)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if f["f"] != "2" {
				t.Errorf("format field: got %q, want %q", f["f"], "2")
			}
			if _, ok := f[""]; ok {
				t.Errorf("Encode wrote an empty field name: %v", f)
			}
			got, err := session.Decode(c.in.ID, f)
			if err != nil {
				t.Fatalf("Decode(%v): %v", f, err)
			}
			want := c.want
			if want.ID == "" {
				want = c.in
			}
			if !sameStored(got, &want) {
				t.Fatalf("round trip: got %+v, want %+v", got, want)
			}
		})
	}
}

// Sessions written before the codec had formats (a map built by the mcp
// package, one-letter keys, no format field) still decode, so a rolling
// upgrade keeps live sessions.
func TestDecodeFormat1(t *testing.T) {
	stored := map[string]string{
		"v": "2025-06-18", "caps": `{"sampling":{},"elicitation":{}}`,
		"info": `{"name":"inspector","version":"0.9"}`, "c": "2026-11-21T10:00:00Z", "p": "",
	}
	got, err := session.Decode("old", stored)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := &session.Session{
		ID: "old", Version: "2025-06-18", Capabilities: json.RawMessage(`{"sampling":{},"elicitation":{}}`),
		ClientInfo: json.RawMessage(`{"name":"inspector","version":"0.9"}`), Created: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	}
	if !sameStored(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// logging/setLevel added "lvl"; there was no "info" without a client
	// info.
	stored = map[string]string{"v": "2025-03-26", "caps": `{}`, "c": "2026-11-21T10:00:00Z", "p": "bob", "lvl": "error"}
	got, err = session.Decode("old2", stored)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.LogLevel != "error" || got.Principal != "bob" || got.ClientInfo != nil {
		t.Fatalf("got %+v, want level error, principal bob, no client info", got)
	}
}

// A release that reads format 1 (it reads v, caps, info, lvl and p, and
// ignores other fields) reads what this codec writes: a cluster can run
// both releases at once, and roll back.
func TestFormat1ReaderReadsFormat2(t *testing.T) {
	in := &session.Session{
		ID: "s", Version: "2025-11-25", Capabilities: json.RawMessage(`{"roots":{"listChanged":true}}`),
		ClientInfo: json.RawMessage(`{"name":"c","version":"1"}`), LogLevel: "info", Principal: "p1", Created: time.Now(),
	}
	f, err := session.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	// As the format-1 reader did it.
	var caps struct {
		Roots *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"roots"`
	}
	var info struct{ Name, Version string }
	if err := json.Unmarshal([]byte(f["caps"]), &caps); err != nil || caps.Roots == nil || !caps.Roots.ListChanged {
		t.Fatalf("caps %q: got %+v, %v", f["caps"], caps, err)
	}
	if err := json.Unmarshal([]byte(f["info"]), &info); err != nil || info.Name != "c" {
		t.Fatalf("info %q: got %+v, %v", f["info"], info, err)
	}
	if f["v"] != in.Version || f["lvl"] != "info" || f["p"] != "p1" {
		t.Fatalf("fields: got %v", f)
	}
}

func TestDecodeNewerFormat(t *testing.T) {
	f := map[string]string{"f": "3", "v": "2025-11-25", "caps": "{}", "c": "2026-11-21T10:00:00Z"}
	_, err := session.Decode("s", f)
	if !errors.Is(err, session.ErrFormat) {
		t.Fatalf("got %v, want ErrFormat", err)
	}
	if errors.Is(err, session.ErrCorrupt) {
		t.Fatalf("got %v, which is also ErrCorrupt", err)
	}
	if !strings.Contains(err.Error(), "format 3") || !strings.Contains(err.Error(), "up to 2") {
		t.Fatalf("error %q should name the format found and the newest one read", err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	good := map[string]string{"f": "2", "v": "2025-11-25", "caps": "{}", "info": `{"name":"c"}`, "c": "2026-11-21T10:00:00Z"}
	if _, err := session.Decode("s", good); err != nil {
		t.Fatalf("the base record: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]string)
	}{
		{"empty record", func(f map[string]string) { clear(f) }},
		{"no version", func(f map[string]string) { delete(f, "v") }},
		{"empty version", func(f map[string]string) { f["v"] = "" }},
		{"no caps", func(f map[string]string) { delete(f, "caps") }},
		{"caps not JSON", func(f map[string]string) { f["caps"] = `{"a":` }},
		{"caps an array", func(f map[string]string) { f["caps"] = `[]` }},
		{"caps null", func(f map[string]string) { f["caps"] = `null` }},
		{"caps two values", func(f map[string]string) { f["caps"] = `{} {}` }},
		{"info a string", func(f map[string]string) { f["info"] = `"c"` }},
		{"info empty", func(f map[string]string) { f["info"] = `` }},
		{"no created", func(f map[string]string) { delete(f, "c") }},
		{"created not a time", func(f map[string]string) { f["c"] = "yesterday" }},
		{"format not a number", func(f map[string]string) { f["f"] = "two" }},
		{"format zero", func(f map[string]string) { f["f"] = "0" }},
		{"format negative", func(f map[string]string) { f["f"] = "-1" }},
		{"format padded", func(f map[string]string) { f["f"] = "02" }},
		{"format empty", func(f map[string]string) { f["f"] = "" }},
		{"created before year 1 in UTC", func(f map[string]string) { f["c"] = "0000-01-01T00:00:00+01:00" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := maps.Clone(good)
			c.edit(f)
			s, err := session.Decode("s", f)
			if !errors.Is(err, session.ErrCorrupt) {
				t.Fatalf("Decode(%v): got %+v, %v; want ErrCorrupt", f, s, err)
			}
		})
	}
}

func TestEncodeRefusesWhatDecodeWouldNotRead(t *testing.T) {
	for _, c := range []struct {
		name string
		s    session.Session
	}{
		{"no version", session.Session{Capabilities: json.RawMessage(`{}`)}},
		{"caps not JSON", session.Session{Version: "v", Capabilities: json.RawMessage(`{`)}},
		{"caps an array", session.Session{Version: "v", Capabilities: json.RawMessage(`[]`)}},
		{"info a number", session.Session{Version: "v", ClientInfo: json.RawMessage(`1`)}},
		{"created after year 9999", session.Session{Version: "v", Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if f, err := session.Encode(&c.s); !errors.Is(err, session.ErrCorrupt) {
				t.Fatalf("Encode: got %v, %v; want ErrCorrupt", f, err)
			}
		})
	}
}

// FuzzDecode feeds Decode records as they may come out of a shared store
// (any strings): it must not panic, and whatever it accepts must encode
// and decode back to the same session.
func FuzzDecode(f *testing.F) {
	f.Add("", "2025-06-18", `{"sampling":{}}`, `{"name":"c"}`, "info", "p", "2026-11-21T10:00:00Z", true)
	f.Add("2", "2025-11-25", `{}`, ``, "", "", "2026-11-21T10:00:00.123456789Z", false)
	f.Add("3", "x", `{"a":[1,{"b":null}]}`, `{}`, "debug", "", "2026-11-21T10:00:00+02:00", true)
	f.Add("1", "v", ` {"a" : 1} `, `{"x":"\u00e9"}`, "", "", "0001-01-01T00:00:00Z", true)
	f.Add("-0", "v", `{`, `[`, "", "", "2026-13-01T00:00:00Z", true)
	f.Fuzz(func(t *testing.T, format, version, caps, info, level, principal, created string, withInfo bool) {
		rec := map[string]string{"v": version, "caps": caps, "lvl": level, "p": principal, "c": created}
		if format != "" {
			rec["f"] = format
		}
		if withInfo {
			rec["info"] = info
		}
		s, err := session.Decode("id", rec)
		if err != nil {
			if !errors.Is(err, session.ErrCorrupt) && !errors.Is(err, session.ErrFormat) {
				t.Fatalf("Decode error %v wraps neither ErrCorrupt nor ErrFormat", err)
			}
			return
		}
		enc, err := session.Encode(s)
		if err != nil {
			t.Fatalf("Encode of a decoded session %+v: %v", s, err)
		}
		back, err := session.Decode("id", enc)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)) = %v: %v", s, enc, err)
		}
		var a, b any
		if json.Unmarshal(s.Capabilities, &a) != nil || json.Unmarshal(back.Capabilities, &b) != nil {
			t.Fatalf("capabilities do not decode: %q, %q", s.Capabilities, back.Capabilities)
		}
		if back.Version != s.Version || back.LogLevel != s.LogLevel || back.Principal != s.Principal ||
			!back.Created.Equal(s.Created) || (back.ClientInfo == nil) != (s.ClientInfo == nil) {
			t.Fatalf("round trip: got %+v, want %+v", back, s)
		}
	})
}
