package coordinator_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// An Echo returns once every other live node has acknowledged the
// invalidation it was sent with (InvalidateSession or SessionEnded), and
// not for an invalidation sent without it.
func TestEchoWaitsForEveryOtherNodesAcknowledgement(t *testing.T) {
	be, nodes := startNodes(t, 3)
	a := nodes[0]
	ctx := t.Context()
	for _, c := range []struct {
		name    string
		publish func(sid string, e *coordinator.Echo) error
	}{
		{"InvalidateSession", func(sid string, e *coordinator.Echo) error {
			return a.Publish(ctx, coordinator.InvalidateSession{Session: sid, Ack: e.Token()})
		}},
		{"SessionEnded", func(sid string, e *coordinator.Echo) error {
			notice, err := a.SessionEndNotice(sid, e)
			if err != nil {
				return err
			}
			_, err = be.Bus.Publish(ctx, notice.Topic, notice.Msg)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sid := newSession(t, a.sessions)
			e := a.ExpectInvalidation()
			if err := c.publish(sid, e); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if !e.Wait(ctx) {
				t.Fatal("Wait: not every node acknowledged")
			}
			if d := time.Since(start); d > coordinator.EchoWait/2 {
				t.Fatalf("Wait took %v", d)
			}
			// Sent without the token: nobody acknowledges it.
			other := a.ExpectInvalidation()
			if err := a.Publish(ctx, coordinator.InvalidateSession{Session: sid}); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if other.Wait(short) {
				t.Fatal("Wait returned as if acknowledged, for an invalidation sent without its token")
			}
		})
	}
}

// The messages of the acknowledgements survive the wire.
func TestAcknowledgementWireForm(t *testing.T) {
	for _, m := range []coordinator.Message{
		coordinator.InvalidateSession{Session: "S1", Ack: "n.i|1"},
		coordinator.SessionEnded{Session: "S1", Ack: "n.i|2"},
		coordinator.Invalidated{Session: "S1", Ack: "n.i|2", From: "m.j"},
		coordinator.MemberJoined{Instance: "m.j"},
	} {
		b, err := coordinator.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := coordinator.Decode(b)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: got %#v, %v; want %#v", b, got, err, m)
		}
	}
}
