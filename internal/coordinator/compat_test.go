package coordinator_test

// Compatibility with the previous release (v0.1.0, commit dac849f),
// whose nodes share the bus and the streams with this release's during
// a rolling upgrade or a downgrade. testdata/v0.1.0 was captured once
// from that release's code: coordinator.json (every bus message kind and
// routed reply as it encodes them, what it decodes of the forms this
// release sends, its request ids and their owners, the ids of a GET
// stream's events) and eventid.json (the ids of stream events).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

type wireCase struct {
	Go   string `json:"go"`
	Wire string `json:"wire"`
}

type previousCoordinator struct {
	Release   string     `json:"release"`
	TopicAll  string     `json:"topic_all"`
	Instance  string     `json:"instance"`
	Bus       []wireCase `json:"bus"`
	BusReads  []wireCase `json:"bus_reads"`
	Replies   []wireCase `json:"replies"`
	ReplyRead []wireCase `json:"reply_reads"`
	Owners    []struct {
		ID    string `json:"id"`
		Owner string `json:"owner"`
		OK    bool   `json:"ok"`
	} `json:"owners"`
	GetStreams []struct {
		Session string `json:"session"`
		Stream  string `json:"stream"`
		B       uint64 `json:"b"`
		Event   string `json:"event_stream"`
	} `json:"get_streams"`
	GetParses []struct {
		Session string `json:"session"`
		S       string `json:"s"`
		B       uint64 `json:"b"`
		HasB    bool   `json:"has_b"`
		OK      bool   `json:"ok"`
	} `json:"get_parses"`
}

func readPrevious(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "v0.1.0", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// decoded is what a node made of a payload, in the capture's form: the
// message (%#v) or "error: ...".
func decoded(b []byte) (string, error) {
	m, err := coordinator.Decode(b)
	if err != nil {
		return "error: " + err.Error(), err
	}
	return fmt.Sprintf("%#v", m), nil
}

// TestBusPreviousReleaseEncodings: every message the previous release
// sends decodes here into the message it meant, and this release encodes
// that message in exactly the bytes the previous release sends, so a
// node of the previous release reads what this one sends as it reads
// its own.
func TestBusPreviousReleaseEncodings(t *testing.T) {
	var prev previousCoordinator
	readPrevious(t, "coordinator.json", &prev)
	if prev.TopicAll != coordinator.TopicAll {
		t.Errorf("the broadcast topic is %q, the previous release's %q", coordinator.TopicAll, prev.TopicAll)
	}
	kinds := map[string]bool{}
	for _, c := range prev.Bus {
		got, err := decoded([]byte(c.Wire))
		if err != nil || got != c.Go {
			t.Errorf("Decode(%s) = %s, the previous release sent %s", c.Wire, got, c.Go)
			continue
		}
		m, _ := coordinator.Decode([]byte(c.Wire))
		b, err := coordinator.Encode(m)
		if err != nil || string(b) != c.Wire {
			t.Errorf("Encode(%s) = %s, %v; the previous release sends %s", c.Go, b, err, c.Wire)
		}
		kinds[strings.SplitN(c.Go, "{", 2)[0]] = true
	}
	// The previous release knew ten kinds; this one sends no other.
	if len(kinds) != 10 {
		t.Errorf("the capture covers %d kinds, want the previous release's 10: %v", len(kinds), kinds)
	}
}

// TestBusPreviousReleaseReadsThisRelease: the forms this release sends
// that the previous release never did (instance names ending in
// FormatSuffix, in acknowledgement tokens and senders), an unknown
// field, an unknown kind, malformed payloads: the previous release read
// each as this release does (the same message, or a refusal of the same
// kind), so neither takes a message of the other for another.
func TestBusPreviousReleaseReadsThisRelease(t *testing.T) {
	var prev previousCoordinator
	readPrevious(t, "coordinator.json", &prev)
	for _, c := range prev.BusReads {
		got, err := decoded([]byte(c.Wire))
		if oldErr := strings.HasPrefix(c.Go, "error: "); oldErr {
			unknown := strings.Contains(c.Go, "unknown bus message kind")
			switch {
			case err == nil:
				t.Errorf("Decode(%s) = %s; the previous release refused it: %s", c.Wire, got, c.Go)
			case unknown != errors.Is(err, coordinator.ErrUnknownKind) || !unknown && !errors.Is(err, coordinator.ErrMalformed):
				t.Errorf("Decode(%s): %v; the previous release: %s", c.Wire, err, c.Go)
			}
			continue
		}
		if got != c.Go {
			t.Errorf("Decode(%s) = %s; the previous release read %s", c.Wire, got, c.Go)
		}
	}
	if f := coordinator.FormatOf(prev.Instance); f != 1 {
		t.Errorf("FormatOf(%q) = %d: an instance of the previous release is of format 1", prev.Instance, f)
	}
	if s := "n1.i1" + coordinator.FormatSuffix; coordinator.FormatOf(s) != coordinator.Format {
		t.Errorf("FormatOf(%q) = %d, want %d", s, coordinator.FormatOf(s), coordinator.Format)
	}
}

// TestRoutedRepliesPreviousRelease: a routed reply of the previous
// release decodes here and encodes back to its bytes; what the previous
// release decoded of this release's forms (a principal, an owner of
// format 2, an unknown field) is what this release decodes.
func TestRoutedRepliesPreviousRelease(t *testing.T) {
	var prev previousCoordinator
	readPrevious(t, "coordinator.json", &prev)
	for _, c := range prev.Replies {
		r, err := coordinator.DecodeReply([]byte(c.Wire))
		if err != nil {
			t.Errorf("DecodeReply(%s): %v", c.Wire, err)
			continue
		}
		if got := fmt.Sprintf("%+v", r); got != c.Go {
			t.Errorf("DecodeReply(%s) = %s, the previous release sent %s", c.Wire, got, c.Go)
		}
		if b, err := coordinator.EncodeReply(r); err != nil || string(b) != c.Wire {
			t.Errorf("EncodeReply(%+v) = %s, %v; the previous release sends %s", r, b, err, c.Wire)
		}
	}
	for _, c := range prev.ReplyRead {
		r, err := coordinator.DecodeReply([]byte(c.Wire))
		got := fmt.Sprintf("%+v", r)
		if err != nil {
			got = "error: " + err.Error()
		}
		if strings.HasPrefix(c.Go, "error: ") != (err != nil) || err == nil && got != c.Go {
			t.Errorf("DecodeReply(%s) = %s; the previous release read %s", c.Wire, got, c.Go)
		}
	}
}

// TestRequestIDsPreviousRelease: the owner of a request id is read the
// same way by both releases, for ids of the previous release's form and
// of this one's (an incarnation ending in FormatSuffix), so a reply
// landing on a node of either release finds its waiter.
func TestRequestIDsPreviousRelease(t *testing.T) {
	var prev previousCoordinator
	readPrevious(t, "coordinator.json", &prev)
	for _, o := range prev.Owners {
		id := jsonrpc.StringID(o.ID)
		if strings.HasSuffix(o.ID, " (a number)") {
			id = jsonrpc.IntID(7)
		}
		owner, ok := coordinator.Owner(id)
		if owner != o.Owner || ok != o.OK {
			t.Errorf("Owner(%s) = %q, %v; the previous release read %q, %v", o.ID, owner, ok, o.Owner, o.OK)
		}
	}
	c := coordinator.New("node1", "inc1", nil, 10)
	if c.Instance() != prev.Instance {
		t.Errorf("instance %q, the previous release's %q", c.Instance(), prev.Instance)
	}
	// This release's ids have the previous release's shape with the
	// format in the incarnation: c.<node>.<incarnation>~2.<random>.
	shape := regexp.MustCompile(`^c\.node1\.inc1` + regexp.QuoteMeta(coordinator.FormatSuffix) + `\.[A-Za-z0-9_-]{16}$`)
	id := coordinator.New("node1", "inc1"+coordinator.FormatSuffix, nil, 10).NewID()
	if !shape.MatchString(id.Str()) {
		t.Errorf("NewID() = %s, want the shape %s", id.Str(), shape)
	}
	if owner, ok := coordinator.Owner(id); !ok || owner != "node1.inc1"+coordinator.FormatSuffix {
		t.Errorf("Owner(%s) = %q, %v", id.Str(), owner, ok)
	}
	if old := prev.Owners[0].ID; len(old) != len(id.Str())-len(coordinator.FormatSuffix) {
		t.Errorf("the previous release's id %s and this release's %s differ by more than the format", old, id.Str())
	}
}

// TestEventIDsPreviousRelease: the ids of stream events, and of a
// session's GET stream (with its broadcast position), are written and
// read as the previous release wrote and read them: a client resumes on
// a node of either release with the id the other gave it.
func TestEventIDsPreviousRelease(t *testing.T) {
	var prev previousCoordinator
	readPrevious(t, "coordinator.json", &prev)
	for _, g := range prev.GetStreams {
		if s := coordinator.GetStreamID(g.Session); s != g.Stream {
			t.Errorf("GetStreamID(%q) = %q, the previous release's %q", g.Session, s, g.Stream)
		}
		if s := coordinator.GetEventStream(g.Session, g.B); s != g.Event {
			t.Errorf("GetEventStream(%q, %d) = %q, the previous release's %q", g.Session, g.B, s, g.Event)
		}
	}
	for _, p := range prev.GetParses {
		b, hasB, ok := coordinator.ParseGetEventStream(p.Session, p.S)
		if b != p.B || hasB != p.HasB || ok != p.OK {
			t.Errorf("ParseGetEventStream(%q, %q) = %d, %v, %v; the previous release's %d, %v, %v", p.Session, p.S, b, hasB, ok, p.B, p.HasB, p.OK)
		}
	}

	var ids struct {
		Formatted []struct {
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
			ID     string `json:"id"`
		} `json:"formatted"`
		Parsed []struct {
			ID     string `json:"id"`
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
			Error  string `json:"error"`
		} `json:"parsed"`
		NewStreamID string `json:"new_stream_id"`
	}
	readPrevious(t, "eventid.json", &ids)
	for _, f := range ids.Formatted {
		if s := (sse.EventID{Stream: f.Stream, Seq: f.Seq}).String(); s != f.ID {
			t.Errorf("EventID{%q, %d} = %q, the previous release's %q", f.Stream, f.Seq, s, f.ID)
		}
	}
	for _, p := range ids.Parsed {
		id, err := sse.ParseEventID(p.ID)
		if (err != nil) != (p.Error != "") || err == nil && (id.Stream != p.Stream || id.Seq != p.Seq) {
			t.Errorf("ParseEventID(%q) = %+v, %v; the previous release's %q, %d, %q", p.ID, id, err, p.Stream, p.Seq, p.Error)
		}
	}
	if s := sse.NewStreamID(); len(s) != len(ids.NewStreamID) {
		t.Errorf("NewStreamID() = %q, the previous release's are like %q", s, ids.NewStreamID)
	}
}
