package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/sse"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// A Redis whose maxmemory-policy evicts keys with a TTL (volatile-lru,
// the managed services' default) evicts ours under memory pressure, one
// key at a time. Each test deletes the keys of one kind in the middle of
// a call, as an eviction does, and checks what the client gets, event by
// event: the call ends with its result or a clear error within its
// bound, and never waits for something that will not come.

// evictBound is how long a call may take to end after a key it needs
// vanished: a few heartbeats (LeaseTTL/3), well under the request
// timeout the nodes of these tests wait for a reply (10 s).
const evictBound = 5 * time.Second

// evict deletes keys, as Redis's eviction would, and fails the test
// unless every one of them was there.
func evict(t *testing.T, srv *redistest.Server, keys ...string) {
	t.Helper()
	line, err := srv.Do("DEL " + strings.Join(keys, " "))
	if err != nil || line != fmt.Sprintf(":%d", len(keys)) {
		t.Fatalf("DEL %v: %q %v", keys, line, err)
	}
}

// sampleWaiting starts two nodes on a Redis of the test's, opens a
// sample call on the first and returns once the sampling request
// arrived on the call's stream: the Redis, the other node, the session,
// the stream and the request.
func sampleWaiting(t *testing.T) (*redistest.Server, *node, *mcptest.Client, *mcptest.Stream, *jsonrpc.Message) {
	t.Helper()
	srv := redistest.Start(t)
	a := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
	b := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
	c := session(t, a.url, mcp.Version20251125, samplingCaps)
	st, _ := openLegacy(t, c, a.url, "tools/call", toolCall("sample", map[string]any{"prompt": "2+2?"}, false))
	if !st.WaitFor(5*time.Second, countAtLeast("sampling/createMessage", 1)) {
		t.Fatal("no sampling request")
	}
	for _, m := range st.Messages() {
		if m.Method == "sampling/createMessage" {
			return srv, b, c, st, m
		}
	}
	panic("unreachable")
}

// replyAt posts the client's answer to asked on url and returns the
// status.
func replyAt(t *testing.T, c *mcptest.Client, url string, asked *jsonrpc.Message) int {
	t.Helper()
	r, _ := jsonrpc.Response(asked.ID, samplingReply)
	b, err := jsonrpc.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.PostRaw(context.Background(), url, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status
}

// endsWithError waits for the stream's final response and fails the
// test unless it came within evictBound and tells of an error (a
// JSON-RPC error, or a tool result marked isError). It returns the
// final message.
func endsWithError(t *testing.T, st *mcptest.Stream, what string) *jsonrpc.Message {
	t.Helper()
	start := time.Now()
	final := finalOf(t, st, evictBound, what)
	if final == nil {
		return nil
	}
	if final.Error == nil && !strings.Contains(string(final.Result), `"isError":true`) {
		t.Errorf("%s: final %s, want an error", what, final.Result)
	}
	t.Logf("%s: ended after %v: %s %v", what, time.Since(start).Round(10*time.Millisecond), final.Result, final.Error)
	return final
}

// The session of a sample call is evicted while its node waits for the
// client's answer. Before, the answer's POST (on another node) got 404,
// and the call waited for it until the request timeout: the client got
// the sampling request, then nothing. The node waiting finds the
// session gone at its next heartbeat and ends the call with an error.
func TestEvictedSessionEndsTheWaitingCall(t *testing.T) {
	srv, b, c, st, asked := sampleWaiting(t)

	evict(t, srv, "mcp:{"+c.Session+"}:s")
	if got := replyAt(t, c, b.url, asked); got != http.StatusNotFound {
		t.Errorf("answer on the evicted session: %d, want 404", got)
	}
	endsWithError(t, st, "the sample call")
	if ms := st.Messages(); len(ms) != 2 || ms[0].Method != "sampling/createMessage" {
		t.Errorf("stream carried %s, want the sampling request and the final response", describeMsgs(ms))
	}
}

// The membership of every node is evicted (one key holds the leases)
// while a node waits for the client's answer. The answer reaches the
// waiting node over the bus all the same, and the call completes; the
// nodes' next heartbeats (every LeaseTTL/3) take their leases again.
func TestEvictedMembershipIsTakenAgain(t *testing.T) {
	srv, b, c, st, asked := sampleWaiting(t)

	evict(t, srv, "mcp:nodes")
	if got := replyAt(t, c, b.url, asked); got != http.StatusAccepted {
		t.Errorf("answer: %d, want 202", got)
	}
	final := finalOf(t, st, evictBound, "the sample call")
	if final == nil || final.Error != nil || !strings.Contains(string(final.Result), `"4"`) {
		t.Errorf("final %v, want the answer", final)
	}
	mcptest.Eventually(t, evictBound, "both nodes' leases", func() bool {
		line, err := srv.Do("ZCARD mcp:nodes")
		return err == nil && line == ":2"
	})
}

// The history of a POST stream is evicted while a client follows it on
// another node (it resumed there after a cut). The producer's next
// append finds the meta gone and the call fails; before, the follower
// waited for events that would not come until its poll a minute later.
// The append tells the followers to read again: they find the stream
// gone and end it at once with the call's error.
func TestEvictedHistoryEndsTheResumedStream(t *testing.T) {
	for _, kind := range []string{"meta", "events", "both"} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.Start(t)
			a := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
			b := redisNodeAt(t, srv.URL(), mcp.HTTPOptions{})
			c := session(t, a.url, mcp.Version20251125, nil)
			live, _ := openLegacy(t, c, a.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{2, 2}}, true))
			a.probe.waitReached(t, 0)
			if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 2)) {
				t.Fatal("no progress 1 and 2")
			}
			meta, events, _ := streamKeys(t, c, live)
			last := lastEventID(t, live)
			live.Close()
			resumed := getStream(t, c, b.url, last)
			time.Sleep(200 * time.Millisecond) // following
			switch kind {
			case "meta":
				evict(t, srv, meta)
			case "events":
				evict(t, srv, events)
			default:
				evict(t, srv, meta, events)
			}
			a.probe.release <- struct{}{} // progress 3 and 4, then the result
			select {
			case <-resumed.Done():
			case <-time.After(evictBound):
				t.Fatalf("the resumed stream still open %v after its history vanished; it carried %s", evictBound, describeMsgs(resumed.Messages()))
			}
			ms := resumed.Messages()
			if kind == "events" {
				// The meta still says where the stream ends: the
				// appends go on after it, and this client, which had
				// the events before, misses nothing (a resume from
				// before them is told the history is gone).
				if vs := mcptest.ProgressValues(ms); fmt.Sprint(vs) != "[3 4]" {
					t.Errorf("progress %v, want [3 4]", vs)
				}
				if f := mcptest.Final(ms); f == nil || f.Error != nil {
					t.Errorf("final %v, want the result", f)
				}
				return
			}
			if vs := mcptest.ProgressValues(ms); len(vs) != 0 {
				t.Errorf("progress %v after the history vanished, want none", vs)
			}
			final := mcptest.Final(ms)
			if final == nil {
				t.Fatalf("the resumed stream ended without the call's error; it carried %s", describeMsgs(ms))
			}
			checkUserError(t, "final", final.Error)
		})
	}
}

// A Redis whose policy may evict the deployment's keys: the node
// serves, but is not ready, and says why; the metrics show the policy
// and the keys Redis evicted. An operator who accepts evictions keeps
// the node ready (the warning and the metrics stay); one who refuses
// them gets no backend at all.
func TestEvictingRedisMakesTheNodeUnready(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}})
	for _, tc := range []struct {
		eviction string
		ready    bool
	}{{"", false}, {"accept", true}} {
		t.Run("eviction="+tc.eviction, func(t *testing.T) {
			be, err := redisbackend.Open(t.Context(), srv.URL(), &redisbackend.Options{Eviction: tc.eviction})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = be.Close() })
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: be}})
			err = n.h.Ready(t.Context())
			if (err == nil) != tc.ready || err != nil && !strings.Contains(err.Error(), "maxmemory-policy volatile-lru") {
				t.Errorf("Ready: %v, want ready %v (else the policy as the reason)", err, tc.ready)
			}
			if got := gauge(t, n, "mcp_redis_evicting"); got != 1 {
				t.Errorf("mcp_redis_evicting %v, want 1", got)
			}
			c := session(t, n.url, mcp.Version20251125, nil)
			if got := resultText(t, c.Call("tools/call", toolCall("echo", map[string]any{"text": "hi"}, false), nil)); got != "hi" {
				t.Errorf("echo on the unready node: %q", got)
			}
		})
	}
	refusing, err := redisbackend.Open(t.Context(), srv.URL(), &redisbackend.Options{Eviction: "refuse"})
	if err == nil {
		_ = refusing.Close()
	}
	if !errors.Is(err, redisbackend.ErrEvictionPolicy) {
		t.Errorf("Open under refuse: %v, want ErrEvictionPolicy", err)
	}
}

// The claim of a client following a POST stream on another node (it
// resumed there) is evicted: the producer, which keeps the request
// going only while some connection follows it, finds no follower at its
// next look (every ResumeGrace) and fails the request, and the follower
// gets that error (-31004, request cancelled) after the events before
// it: a clear end, not a wait, though the client was there.
func TestEvictedFollowClaimEndsTheCallWithAnError(t *testing.T) {
	srv := redistest.Start(t)
	opts := mcp.HTTPOptions{ResumeGrace: time.Second}
	a := redisNodeAt(t, srv.URL(), opts)
	b := redisNodeAt(t, srv.URL(), opts)
	c := session(t, a.url, mcp.Version20251125, nil)
	live, _ := openLegacy(t, c, a.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{2, 2}}, true))
	a.probe.waitReached(t, 0)
	if !live.WaitFor(5*time.Second, countAtLeast("notifications/progress", 2)) {
		t.Fatal("no progress 1 and 2")
	}
	last := lastEventID(t, live)
	id, err := sse.ParseEventID(last)
	if err != nil {
		t.Fatal(err)
	}
	live.Close()
	resumed := getStream(t, c, b.url, last)
	claim := "mcp:{" + c.Session + "}:c:follow:" + id.Stream
	mcptest.Eventually(t, evictBound, "the follower's claim", func() bool { line, _ := srv.Do("EXISTS " + claim); return line == ":1" })
	evict(t, srv, claim)
	final := finalOf(t, resumed, evictBound, "the resumed call")
	if final != nil && final.Error == nil {
		t.Errorf("final %s, want the request's error", final.Result)
	}
	if vs := mcptest.ProgressValues(resumed.Messages()); len(vs) != 0 {
		t.Errorf("progress %v on the resumed stream, want none (the gate was not opened)", vs)
	}
	if final != nil {
		t.Logf("final: %d %q", final.Error.Code, final.Error.Message)
	}
}

// describeMsgs names the messages of a stream, for a failure.
func describeMsgs(ms []*jsonrpc.Message) string {
	var p []string
	for _, m := range ms {
		switch {
		case m.Method != "":
			p = append(p, m.Method)
		case m.Error != nil:
			p = append(p, fmt.Sprintf("error %d %q", m.Error.Code, m.Error.Message))
		default:
			p = append(p, fmt.Sprintf("result %.80s", m.Result))
		}
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// The record of a running task is evicted while its client waits on
// tasks/result. The runner's outcome finds no record to write to; the
// reader must not wait for it past the bound.
func TestEvictedTaskEndsItsReader(t *testing.T) {
	srv := redistest.Start(t)
	gate := make(chan struct{})
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: redisBackend(t, srv.URL())}, Setup: legacyTaskTools(gate, make(chan struct{}, 1))})
	c := session(t, n.url, mcp.Version20251125, nil)
	task := startLegacyTask(t, c, "job", false)
	id, _ := task["taskId"].(string)
	got := make(chan *mcptest.Response, 1)
	go func() { got <- c.Call("tasks/result", map[string]any{"taskId": id}, nil) }()
	time.Sleep(300 * time.Millisecond) // waiting
	evict(t, srv, "mcp:t:{"+id+"}")
	close(gate) // the job ends: its outcome has no record to go to
	select {
	case resp := <-got:
		f := resp.Final()
		if f == nil || f.Error == nil {
			t.Errorf("tasks/result: %.300s, want an error (the task's record is gone)", resp.Body)
		} else {
			t.Logf("tasks/result: %d %q", f.Error.Code, f.Error.Message)
		}
	case <-time.After(evictBound):
		t.Fatalf("tasks/result still waiting %v after the task's record vanished and its job ended", evictBound)
	}
}
