package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// Faults of the store under a POST stream: every event the client gets
// follows the one before it (no gap, no id twice), and a call either ends
// whole or with the cluster's error, in words for a user.

// redisBackend opens a backend of its own on the Redis at url, closed
// at the end of the test.
func redisBackend(t *testing.T, url string) *mcp.Backend {
	t.Helper()
	be, err := redisbackend.Open(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// redisProxy starts a toxiproxy proxy on loopback in front of srv; the
// caller stops it (its place among the test's cleanups matters).
func redisProxy(t *testing.T, srv *redistest.Server) *toxiproxy.Proxy {
	t.Helper()
	ps := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(ps, "redis", "127.0.0.1:0", srv.Addr())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// redisNodeAt starts a node on the Redis at url.
func redisNodeAt(t *testing.T, url string, opts mcp.HTTPOptions) *node {
	t.Helper()
	opts.Backend = redisBackend(t, url)
	return newNode(t, &nodeOptions{HTTP: opts})
}

// streamKeys returns the Redis keys of the history of the stream st's
// last event belongs to (the default prefix), and that event's seq.
func streamKeys(t *testing.T, c *mcptest.Client, st *mcptest.Stream) (meta, events string, seq uint64) {
	t.Helper()
	id, err := sse.ParseEventID(lastEventID(t, st))
	if err != nil {
		t.Fatal(err)
	}
	keys := "mcp:{" + c.Session + "}:"
	return keys + "m:" + id.Stream, keys + "e:" + id.Stream, id.Seq
}

// streamSeqs returns the seqs of st's message events, in arrival order,
// and fails the test on an id of another stream. A final response the
// node could not record comes without an id field, so it keeps the id
// before it (SSE): it is left out.
func streamSeqs(t *testing.T, st *mcptest.Stream) []uint64 {
	t.Helper()
	var seqs []uint64
	stream, prev := "", ""
	for _, ev := range st.Events() {
		repeated := ev.ID == prev
		prev = ev.ID
		if ev.ID == "" || len(ev.Data) == 0 {
			continue
		}
		if msg, err := jsonrpc.Decode(ev.Data); repeated && err == nil && msg.Kind() == jsonrpc.KindResponse {
			continue
		}
		id, err := sse.ParseEventID(ev.ID)
		if err != nil {
			t.Fatalf("event id %q: %v", ev.ID, err)
		}
		if stream == "" {
			stream = id.Stream
		} else if id.Stream != stream {
			t.Fatalf("event id %q is of another stream than %q", ev.ID, stream)
		}
		seqs = append(seqs, id.Seq)
	}
	return seqs
}

// checkContiguous fails the test unless seqs run 1, 2, 3, … without a
// gap or a repeat.
func checkContiguous(t *testing.T, what string, seqs []uint64) {
	t.Helper()
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Errorf("%s: event seqs %v: a gap or a repeat at position %d", what, seqs, i+1)
			return
		}
	}
}

// checkUserError fails the test unless err is the cluster's -31000 error
// with a message that names no internals.
func checkUserError(t *testing.T, what string, err *jsonrpc.Error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	if err.Code != jsonrpc.CodeUnavailable {
		t.Errorf("%s: error %d %q, want %d", what, err.Code, err.Message, jsonrpc.CodeUnavailable)
	}
	for _, leak := range []string{"cluster:", "redis", "stream \"", "internal error"} {
		if strings.Contains(strings.ToLower(err.Message), leak) {
			t.Errorf("%s: message %q names internals (%q)", what, err.Message, leak)
		}
	}
}

// Redis executes an append but its reply is lost (the connection holds
// and drops every byte Redis sends, as in a partition), while the
// handler's next notification waits behind it. Before, the node gave up
// on the batch, wrote the next one and carried on: the client got
// progress 1, then 3, a hole nothing could fill. The batch is retried
// under its token until the store answers, so the retry finds the first
// try recorded and the client gets every event in order, once.
func TestRecordReplyLostLeavesNoHole(t *testing.T) {
	srv := redistest.Start(t)
	p := redisProxy(t, srv)
	// One try per command, given up after 1s without a reply.
	n := redisNodeAt(t, "redis://"+p.Listen+"?read_timeout=1s&max_retries=-1", mcp.HTTPOptions{})
	// The proxy's links stop before the node's goroutines are counted.
	t.Cleanup(p.Stop)
	c := session(t, n.url, mcp.Version20251125, nil)
	live, _ := openLegacy(t, c, n.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{1, 1, 1}}, true))
	n.probe.waitReached(t, 0)
	if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 1)) {
		t.Fatal("no progress 1")
	}

	if _, err := p.Toxics.AddToxicJson(strings.NewReader(`{"name":"drop","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	n.probe.release <- struct{}{} // progress 2: recorded, its reply dropped
	n.probe.waitReached(t, 1)
	time.Sleep(200 * time.Millisecond) // its batch is in flight
	n.probe.release <- struct{}{}      // progress 3 waits behind it
	time.Sleep(200 * time.Millisecond)
	// Redis answers again: only progress 2's reply was lost.
	if err := p.Toxics.RemoveToxic(t.Context(), "drop"); err != nil {
		t.Fatal(err)
	}

	got := finalOf(t, live, 20*time.Second, "the call")
	checkContiguous(t, "live stream", streamSeqs(t, live))
	if vs := mcptest.ProgressValues(live.Messages()); fmt.Sprint(vs) != "[1 2 3]" {
		t.Errorf("progress %v, want [1 2 3]", vs)
	}
	if got != nil && (got.Error != nil || !strings.Contains(string(got.Result), "gated")) {
		t.Errorf("final: %s / %v, want the result", got.Result, got.Error)
	}
}

// A failover to a replica that had not received the stream's last
// append (asynchronous replication): the history the node writes to has
// lost an event the client was sent. Before, the next append took the
// lost event's seq again and the call completed as if whole; the client
// got one id twice. The node notices at its next append and ends the
// call with -31000, in words for a user, and sends nothing more.
func TestRecordAfterHistoryLostEndsTheCall(t *testing.T) {
	for _, lose := range []string{"the last event", "the whole stream"} {
		t.Run(lose, func(t *testing.T) {
			srv := redistest.Start(t)
			n := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
			c := session(t, n.url, mcp.Version20251125, nil)
			live, _ := openLegacy(t, c, n.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{2, 2}}, true))
			n.probe.waitReached(t, 0)
			if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 2)) {
				t.Fatal("no progress 1 and 2")
			}
			meta, events, seq := streamKeys(t, c, live)
			var cmds []string
			if lose == "the last event" {
				cmds = []string{fmt.Sprintf("HSET %s last %d", meta, seq-1), "RPOP " + events}
			} else {
				cmds = []string{"DEL " + meta + " " + events}
			}
			for _, cmd := range cmds {
				if line, err := srv.Do(cmd); err != nil || strings.HasPrefix(line, "-") {
					t.Fatalf("%s: %q %v", cmd, line, err)
				}
			}
			n.probe.release <- struct{}{} // progress 3 and 4, then the result

			got := finalOf(t, live, 10*time.Second, "the call")
			seqs := streamSeqs(t, live)
			checkContiguous(t, "live stream", seqs)
			if len(seqs) != 2 {
				t.Errorf("events %v after the history lost one: want none after 2", seqs)
			}
			if got != nil {
				checkUserError(t, "final", got.Error)
			}
		})
	}
}

// The demo progress tool ignores the error of the log message it sends
// after its last progress. Before, that message took the error of the
// progress notification the node could not record, and the call
// returned its result as if whole, without that notification. A stream
// ends at the first event it could not record, and the call with it.
func TestRecordFailureEndsTheCallThoughTheHandlerIgnoresIt(t *testing.T) {
	srv := redistest.Start(t)
	n := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
	c := session(t, n.url, mcp.Version20251125, nil)
	live, _ := openLegacy(t, c, n.url, "tools/call", toolCall("progress", map[string]any{"steps": 3, "delayMs": 1000}, true))
	if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 2)) {
		t.Fatal("no progress 1 and 2")
	}
	meta, events, _ := streamKeys(t, c, live)
	if line, err := srv.Do("DEL " + meta + " " + events); err != nil || line != ":2" {
		t.Fatalf("DEL the stream: %q %v", line, err)
	}
	got := finalOf(t, live, 10*time.Second, "the call")
	checkContiguous(t, "live stream", streamSeqs(t, live))
	if vs := mcptest.ProgressValues(live.Messages()); fmt.Sprint(vs) != "[1 2]" {
		t.Errorf("progress %v, want [1 2] and nothing after the stream lost its history", vs)
	}
	if got != nil {
		checkUserError(t, "final", got.Error)
	}
}
