package inproc_test

// Faults between nodes: a node cut off the bus, and bus messages dropped
// or delayed on their way to a node.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// sampleOnB starts the sample tool on B and returns its stream and a
// reply to its sampling request.
func sampleOnB(t *testing.T, r *rig) (*mcptest.Client, *mcptest.Stream, *jsonrpc.Message) {
	t.Helper()
	cl := r.session(t, 0, map[string]any{"sampling": map[string]any{}})
	_, st := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("sample", nil))
	mustWait(t, st, "sampling request", mcptest.Has("sampling/createMessage", 1))
	res, _ := json.Marshal(map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "answer"}})
	return cl, st, &jsonrpc.Message{ID: st.Messages()[0].ID, Result: res}
}

// A reply for a node cut off the bus is refused with 503 and Retry-After
// (not accepted and lost); once the node is back, the same reply is
// accepted and wakes the waiter.
func TestReplyToCutNodeRetriedAfterHeal(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl, st, reply := sampleOnB(t, r)
	r.Nodes[1].Cut()
	resp := post(t, cl, r.Nodes[2].URL, reply)
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("reply to a cut node: got %d (Retry-After %q), want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if m := resp.Final(); m == nil || m.Error == nil || m.Error.Code != jsonrpc.CodeUnavailable {
		t.Fatalf("reply to a cut node: body %s", resp.Body)
	}
	r.Nodes[1].Heal(t)
	if resp := post(t, cl, r.Nodes[2].URL, reply); resp.Status != http.StatusAccepted {
		t.Fatalf("reply after heal: got %d %s", resp.Status, resp.Body)
	}
	mustWait(t, st, "final response", hasFinal)
	if got := text(t, mcptest.Final(st.Messages())); got != "answer via n1" {
		t.Fatalf("got %q", got)
	}
}

// A cancellation broadcast while B is cut off the bus does not reach B,
// but is recorded: B catches up when its bus comes back.
func TestCancelWhileCutReachesBOnHeal(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	id, _ := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 2}))
	r.waitStep(t, "n1 1")
	r.Nodes[1].Cut()
	cancel(t, cl, r.Nodes[2].URL, id)
	select {
	case n := <-r.cancelled:
		t.Fatalf("cancelled on %s while cut off the bus", n)
	default:
	}
	r.Nodes[1].Heal(t)
	waitCancelled(t, r, "n1")
}

// A routed reply lost on the bus on its way to B (accepted, then dropped)
// does not hang the call: B's handler gets a timeout after
// RequestTimeout and the call ends with an error.
func TestDroppedReplyDoesNotHangTheCall(t *testing.T) {
	const timeout = 200 * time.Millisecond
	r := newRig(t, inproc.Options{Server: mcp.ServerOptions{RequestTimeout: timeout}})
	var dropped atomic.Int32
	r.Nodes[1].Faults.Filter(func(topic string, _ []byte) inproc.Verdict {
		if strings.HasPrefix(topic, "reply:") {
			dropped.Add(1)
			return inproc.Verdict{Drop: true}
		}
		return inproc.Verdict{}
	})
	cl, st, reply := sampleOnB(t, r)
	sent := time.Now()
	if resp := post(t, cl, r.Nodes[2].URL, reply); resp.Status != http.StatusAccepted {
		t.Fatalf("reply: got %d %s", resp.Status, resp.Body)
	}
	mustWait(t, st, "final response", hasFinal)
	if dropped.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", dropped.Load())
	}
	if took := time.Since(sent); took > timeout+time.Second {
		t.Fatalf("the call ended %v after the reply, want about %v", took, timeout)
	}
	f := mcptest.Final(st.Messages())
	var res mcp.CallToolResult
	if f.Error == nil && (json.Unmarshal(f.Result, &res) != nil || !res.IsError) {
		t.Fatalf("got %s, want an error", describe(st.Messages()))
	}
}

// Bus messages delayed on their way to B still do their work: the routed
// reply wakes the waiter, and the cancellation reaches the handler.
func TestDelayedBusMessagesStillArrive(t *testing.T) {
	r := newRig(t, inproc.Options{})
	var delayed atomic.Int32
	r.Nodes[1].Faults.Filter(func(string, []byte) inproc.Verdict {
		delayed.Add(1)
		return inproc.Verdict{Delay: 30 * time.Millisecond}
	})
	cl, st, reply := sampleOnB(t, r)
	if resp := post(t, cl, r.Nodes[2].URL, reply); resp.Status != http.StatusAccepted {
		t.Fatalf("reply: got %d %s", resp.Status, resp.Body)
	}
	mustWait(t, st, "final response", hasFinal)
	if got := text(t, mcptest.Final(st.Messages())); got != "answer via n1" {
		t.Fatalf("got %q", got)
	}

	id, _ := mcptest.OpenCall(t, cl, r.Nodes[1].URL, "tools/call", tool("gated", gatedIn{Steps: 2}))
	r.waitStep(t, "n1 1")
	cancel(t, cl, r.Nodes[2].URL, id)
	waitCancelled(t, r, "n1")
	if delayed.Load() < 2 {
		t.Fatalf("%d messages delayed, want the reply and the cancellation", delayed.Load())
	}
}

// A GET stream taken over by a connection on C while B is cut off the
// bus (the take-over message is lost for B) ends on B once its bus comes
// back: B then checks every claim its streams hold.
func TestGetTakenOverWhileCutEndsOnHeal(t *testing.T) {
	r := newRig(t, inproc.Options{})
	cl := r.session(t, 0, nil)
	old := mcptest.OpenGet(t, cl, r.Nodes[1].URL, "")
	r.Nodes[1].Cut()
	newer := mcptest.OpenGet(t, cl, r.Nodes[2].URL, "")
	defer newer.Close()
	select {
	case <-old.Done():
		t.Fatal("the stream on the cut node ended before its bus came back")
	case <-time.After(200 * time.Millisecond):
	}
	r.Nodes[1].Heal(t)
	select {
	case <-old.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream taken over while its node was cut did not end after the heal")
	}
	select {
	case <-newer.Done():
		t.Fatal("the newer GET stream ended")
	case <-time.After(100 * time.Millisecond):
	}
}

// A killed node reaches no table of the state, on either backend, those
// of tasks and of the limiter as much as sessions: each operation of its
// view fails as unavailable, and its membership lease lapses, while the
// others still reach the state.
func TestKillCutsEveryTable(t *testing.T) {
	onBackends(t, func(t *testing.T, opts inproc.Options) {
		opts.Nodes = 2
		c := inproc.New(t, opts)
		view := c.Nodes[1].Faults.Backend()
		ctx := t.Context()
		ops := map[string]func() error{
			"Sessions.Count": func() error { _, err := view.Sessions.Count(ctx); return err },
			"Events.Read": func() error {
				_, _, err := view.Events.Read(ctx, "S", "x", 0)
				return err
			},
			"Members.Members": func() error { _, err := view.Members.Members(ctx); return err },
			"Claims.Holder":   func() error { _, err := view.Claims.Holder(ctx, "k"); return err },
			"Registry.All":    func() error { _, err := view.Registry.All(ctx); return err },
			"Limiter.Release": func() error { return view.Limiter.Release(ctx, "k", "m") },
			"Tasks.Runners":   func() error { _, err := view.Tasks.Runners(ctx, 1); return err },
			"Ping":            func() error { return view.Ping(ctx) },
		}
		if err := ops["Members.Members"](); err != nil {
			t.Fatalf("before the kill: %v", err)
		}
		c.Nodes[1].Kill()
		for name, op := range ops {
			if err := op(); !errors.Is(err, cluster.ErrUnavailable) {
				t.Errorf("%s on the killed node: got %v, want unavailable", name, err)
			}
		}
		if _, err := c.Backend.Sessions.Count(ctx); err != nil {
			t.Fatalf("the cluster's connection after the kill: %v", err)
		}
		mcptest.Eventually(t, 5*inproc.DefaultLeaseTTL, "the killed node's lease to lapse", func() bool {
			return !c.Alive(c.Nodes[1])
		})
		if !c.Alive(c.Nodes[0]) {
			t.Fatal("the live node lost its lease")
		}
	})
}
