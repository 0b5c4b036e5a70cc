package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The wire form each kind had before the messages were typed: a node of
// the previous release decodes what this one sends, and this one decodes
// what it sends, so a rolling upgrade keeps the bus working.
var previousRelease = []struct {
	wire string
	msg  coordinator.Message
}{
	{`{"t":"end","s":"S1"}`, coordinator.SessionEnded{Session: "S1"}},
	{`{"t":"cancel","s":"S1","i":"s:abc"}`, coordinator.CancelRequest{Session: "S1", ID: "s:abc"}},
	{`{"t":"inv","s":"S1"}`, coordinator.InvalidateSession{Session: "S1"}},
	{`{"t":"getdrop","s":"S1"}`, coordinator.GetDropped{Session: "S1"}},
	{`{"t":"takeover","s":"S1","c":"conn9"}`, coordinator.GetTakeover{Session: "S1", Conn: "conn9"}},
	{`{"t":"ln","m":"notifications/resources/updated","u":"file:///a"}`, coordinator.ListenNotify{Method: "notifications/resources/updated", URI: "file:///a"}},
	{`{"t":"ln","m":"notifications/tools/list_changed"}`, coordinator.ListenNotify{Method: "notifications/tools/list_changed"}},
	{`{"t":"reg"}`, coordinator.RegistryChanged{}},
	{`{"t":"task","i":"T1"}`, coordinator.TaskChanged{ID: "T1"}},
}

func TestBusMessagesKeepThePreviousWireForm(t *testing.T) {
	for _, c := range previousRelease {
		got, err := coordinator.Encode(c.msg)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", c.msg, err)
		}
		if string(got) != c.wire {
			t.Errorf("Encode(%#v) = %s, want %s", c.msg, got, c.wire)
		}
		m, err := coordinator.Decode([]byte(c.wire))
		if err != nil {
			t.Fatalf("Decode(%s): %v", c.wire, err)
		}
		if !reflect.DeepEqual(m, c.msg) {
			t.Errorf("Decode(%s) = %#v, want %#v", c.wire, m, c.msg)
		}
	}
}

// busGolden holds a message of every kind (and of each form of a kind
// that leaves fields out), in the order of the lines of
// testdata/bus.golden, their exact bytes on the wire: what this release
// sends and must go on reading, since nodes of neighbouring releases
// share the bus during a rolling upgrade. A new kind adds its message
// here and its line there; a changed line is a change of the wire form.
var busGolden = []coordinator.Message{
	coordinator.SessionEnded{Session: "S1", Ack: "n1.i1|7"},
	coordinator.SessionEnded{Session: "S1"},
	coordinator.CancelRequest{Session: "S1", ID: "s:abc"},
	coordinator.InvalidateSession{Session: "S1", Ack: "n1.i1|8"},
	coordinator.Invalidated{Session: "S1", Ack: "n1.i1|8", From: "n2.i2"},
	coordinator.MemberJoined{Instance: "n3.i3"},
	coordinator.GetDropped{Session: "S1"},
	coordinator.GetTakeover{Session: "S1", Conn: "conn9"},
	coordinator.ListenNotify{Method: "notifications/resources/updated", URI: "file:///a"},
	coordinator.ListenNotify{Method: "notifications/tools/list_changed"},
	coordinator.RegistryChanged{},
	coordinator.TaskChanged{ID: "T1"},
}

func TestBusWireGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "bus.golden"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(busGolden) {
		t.Fatalf("testdata/bus.golden has %d lines, busGolden %d messages", len(lines), len(busGolden))
	}
	covered := map[string]bool{}
	for i, m := range busGolden {
		got, err := coordinator.Encode(m)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", m, err)
		}
		if string(got) != lines[i] {
			t.Errorf("Encode(%#v) = %s, want line %d: %s", m, got, i+1, lines[i])
		}
		back, err := coordinator.Decode([]byte(lines[i]))
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Errorf("Decode(%s) = %#v, %v; want %#v", lines[i], back, err, m)
		}
		var k struct{ T string }
		if err := json.Unmarshal(got, &k); err != nil {
			t.Fatal(err)
		}
		covered[k.T] = true
	}
	for _, kind := range coordinator.BusKinds() {
		if !covered[kind] {
			t.Errorf("kind %q has no message in busGolden (and no line in testdata/bus.golden)", kind)
		}
	}
}

// Fields a newer release may add are ignored; a kind it adds is
// ErrUnknownKind (counted and skipped), and damage is ErrMalformed.
func TestBusDecodeErrorsAreTold(t *testing.T) {
	m, err := coordinator.Decode([]byte(`{"t":"end","s":"S1","x":"new field"}`))
	if err != nil || m != (coordinator.SessionEnded{Session: "S1"}) {
		t.Fatalf("unknown field: %#v, %v", m, err)
	}
	for wire, want := range map[string]error{
		`{"t":"newkind","s":"S1"}`: coordinator.ErrUnknownKind,
		`not json`:                 coordinator.ErrMalformed,
		`[]`:                       coordinator.ErrMalformed,
		`{}`:                       coordinator.ErrMalformed,
		`{"t":"end"}`:              coordinator.ErrMalformed,
		`{"t":"cancel","s":"S1"}`:  coordinator.ErrMalformed,
		`{"t":"takeover","s":"S"}`: coordinator.ErrMalformed,
		`{"t":"ln"}`:               coordinator.ErrMalformed,
		`{"t":"task"}`:             coordinator.ErrMalformed,
		`{"t":5}`:                  coordinator.ErrMalformed,
	} {
		if _, err := coordinator.Decode([]byte(wire)); !errors.Is(err, want) {
			t.Errorf("Decode(%s) = %v, want %v", wire, err, want)
		}
	}
	if _, err := coordinator.DecodeReply([]byte(`{"s":"S1"}`)); !errors.Is(err, coordinator.ErrMalformed) {
		t.Errorf("reply without id: %v", err)
	}
	if _, err := coordinator.DecodeReply([]byte(`{"s":"S1","i":"s:x","e":"nope"}`)); !errors.Is(err, coordinator.ErrMalformed) {
		t.Errorf("reply with a damaged error: %v", err)
	}
}

func TestReplyWireForm(t *testing.T) {
	const wire = `{"s":"S1","i":"s:c.n1.i.x","r":{"ok":true},"t":{"traceparent":"00-1-2-01"}}`
	r, err := coordinator.DecodeReply([]byte(wire))
	if err != nil {
		t.Fatal(err)
	}
	if r.Session != "S1" || r.ID != "s:c.n1.i.x" || string(r.Result) != `{"ok":true}` || r.Trace["traceparent"] != "00-1-2-01" {
		t.Fatalf("DecodeReply = %#v", r)
	}
	b, err := coordinator.EncodeReply(r)
	if err != nil || string(b) != wire {
		t.Fatalf("EncodeReply = %s, %v; want %s", b, err, wire)
	}
	// The principal id of the caller who posted the reply travels as "p".
	const withPrincipal = `{"s":"S1","p":"https://as.test#ada","i":"s:c.n1.i.x","r":{"ok":true}}`
	r, err = coordinator.DecodeReply([]byte(withPrincipal))
	if err != nil || r.Principal != "https://as.test#ada" {
		t.Fatalf("DecodeReply(%s) = %#v, %v", withPrincipal, r, err)
	}
	if b, _ := coordinator.EncodeReply(r); string(b) != withPrincipal {
		t.Fatalf("EncodeReply = %s; want %s", b, withPrincipal)
	}
	e := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "no", nil)
	b, _ = coordinator.EncodeReply(coordinator.Reply{Session: "S", ID: "s:1", Error: e})
	r, err = coordinator.DecodeReply(b)
	if err != nil || r.Error == nil || r.Error.Code != e.Code || r.Result != nil {
		t.Fatalf("error reply: %#v, %v", r, err)
	}
}

// Bus payloads cross nodes: any bytes decode to a message or an error,
// never a panic, and a decoded message encodes to a form that decodes to
// the same message.
func FuzzBusDecode(f *testing.F) {
	for _, c := range previousRelease {
		f.Add([]byte(c.wire))
	}
	for _, m := range busGolden {
		b, _ := coordinator.Encode(m)
		f.Add(b)
	}
	f.Add([]byte(`{"t":"end","s":""}`))
	f.Add([]byte(`{"t":"cancel","s":"\u0000","i":"\ud800"}`))
	f.Add([]byte(`{"s":"S1","i":"s:x","r":null,"e":{"code":1,"message":"m"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := coordinator.Decode(b); err == nil {
			enc, err := coordinator.Encode(m)
			if err != nil {
				t.Fatalf("Encode(%#v): %v", m, err)
			}
			again, err := coordinator.Decode(enc)
			if err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("round trip of %#v: %#v, %v", m, again, err)
			}
		} else if !errors.Is(err, coordinator.ErrMalformed) && !errors.Is(err, coordinator.ErrUnknownKind) {
			t.Fatalf("Decode(%q): untyped error %v", b, err)
		}
		if r, err := coordinator.DecodeReply(b); err == nil {
			enc, err := coordinator.EncodeReply(r)
			if err != nil {
				t.Fatalf("EncodeReply(%#v): %v", r, err)
			}
			if _, err := coordinator.DecodeReply(enc); err != nil {
				t.Fatalf("reply round trip of %q: %v", enc, err)
			}
			var v any
			if json.Unmarshal(enc, &v) != nil {
				t.Fatalf("EncodeReply wrote invalid JSON %q", enc)
			}
		} else if !errors.Is(err, coordinator.ErrMalformed) {
			t.Fatalf("DecodeReply(%q): untyped error %v", b, err)
		}
	})
}

// A payload on the reply topic that is not a reply is told to the
// OnUndecodable function, not dropped silently.
func TestUndecodableRepliesAreTold(t *testing.T) {
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	c := coordinator.New("n1", "i1", be.Bus, 0)
	told := make(chan error, 1)
	c.OnUndecodable(func(topic string, err error) {
		if topic == coordinator.Topic(c.Instance()) {
			told <- err
		}
	})
	stop, err := c.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if _, err := be.Bus.Publish(context.Background(), coordinator.Topic(c.Instance()), []byte(`{"s":"S1"`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-told:
		if !errors.Is(err, coordinator.ErrMalformed) {
			t.Fatalf("told %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("undecodable reply not told")
	}
}
