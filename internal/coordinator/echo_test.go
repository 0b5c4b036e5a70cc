package coordinator_test

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
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

// acksOn counts the acknowledgements (Invalidated) published on topic.
func acksOn(t *testing.T, be *cluster.Backend, topic string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	stop, err := be.Bus.Subscribe(t.Context(), topic, func(b []byte) {
		if m, err := coordinator.Decode(b); err == nil {
			if _, ok := m.(coordinator.Invalidated); ok {
				n.Add(1)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &n
}

// Nodes of format 2 record the copies they hold, and a change waits for
// those holders only, acknowledged on the changer's own topic; a member of
// format 1 (which records nothing) is still waited for, and a node of
// format 2 acknowledges a format-1 sender on TopicAll, as that sender
// expects: nodes of both formats mix during a rolling upgrade.
func TestEchoWaitsForHoldersAndFormatOneMembers(t *testing.T) {
	if coordinator.FormatOf("n.x"+coordinator.FormatSuffix) != coordinator.Format || coordinator.FormatOf("n.x") != 1 || coordinator.FormatOf("n.x~zz") != 1 {
		t.Fatal("FormatOf does not read the suffix")
	}
	inc := "inc" + coordinator.FormatSuffix
	be, nodes := startNodesAs(t, []string{inc, inc, inc}, time.Minute)
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := t.Context()
	direct, all := acksOn(t, be, coordinator.AckTopic(a.Instance())), acksOn(t, be, coordinator.TopicAll)
	sid := newSession(t, a.sessions)                     // a holds it
	if _, err := b.sessions.Load(ctx, sid); err != nil { // and b
		t.Fatal(err)
	}
	change := func(want ...string) *coordinator.Echo {
		holders, err := a.sessions.SetLogLevel(ctx, sid, "error")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(holders)
		if !slices.Equal(holders, want) {
			t.Fatalf("holders %q, want %q", holders, want)
		}
		e := a.ExpectInvalidation()
		e.Among(holders)
		if err := a.Publish(ctx, coordinator.InvalidateSession{Session: sid, Ack: e.Token()}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	if !change(a.Instance(), b.Instance()).Wait(ctx) {
		t.Fatal("Wait: the holder's acknowledgement did not come")
	}
	waitFor(t, "b's acknowledgement on a's topic", func() bool { return direct.Load() == 1 })
	time.Sleep(50 * time.Millisecond) // c, which holds nothing, must stay silent
	if d, o := direct.Load(), all.Load(); d != 1 || o != 0 {
		t.Fatalf("acknowledgements: %d on a's topic, %d on TopicAll; want 1 (b's) and 0 (c holds nothing)", d, o)
	}

	// A member of format 1 joins: a waits for it too, until it
	// acknowledges on TopicAll as a node of that format does.
	old := "old.inc"
	if err := be.Members.Heartbeat(ctx, old, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, coordinator.MemberJoined{Instance: old}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to count the old member", func() bool { return a.KnowsMember(old) })
	if _, err := b.sessions.Load(ctx, sid); err != nil {
		t.Fatal(err)
	}
	e := change(b.Instance()) // a's holding ended with the first change
	done := make(chan bool, 1)
	go func() { done <- e.Wait(ctx) }()
	select {
	case <-done:
		t.Fatal("Wait returned before the format-1 member acknowledged")
	case <-time.After(150 * time.Millisecond):
	}
	if err := a.Publish(ctx, coordinator.Invalidated{Session: sid, Ack: e.Token(), From: old}); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("Wait: not acknowledged after the format-1 member's acknowledgement")
	}

	// A sender of format 1: c acknowledges on TopicAll though it holds
	// nothing, since that sender waits for every node.
	before := all.Load()
	if err := a.Publish(ctx, coordinator.InvalidateSession{Session: sid, Ack: old + "|7"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b and c to acknowledge a format-1 sender on TopicAll", func() bool { return all.Load() >= before+2 })
	_ = c
}
