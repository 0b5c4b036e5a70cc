package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// listenURIs returns n resource URIs of the given length each.
func listenURIs(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		u := fmt.Sprintf("file:///%d/", i)
		out[i] = u + strings.Repeat("x", max(length-len(u), 0))
	}
	return out
}

// A subscriptions/listen filter is bounded as resources/subscribe is:
// no more entries in resourceSubscriptions (or taskIds) than
// MaxSubscriptions, no entry longer than MaxURIBytes; over HTTP and
// stdio, each refusal a short -32602.
func TestAbuseListenFilter(t *testing.T) {
	const maxSubs = 5
	n := newNode(t, &nodeOptions{Server: mcp.ServerOptions{MaxSubscriptions: maxSubs}})
	c := mcptest.New(t, n.url)
	for name, filter := range map[string]map[string]any{
		"resourceSubscriptions":    {"resourceSubscriptions": listenURIs(maxSubs+1, 10)},
		"resourceSubscriptions[0]": {"resourceSubscriptions": listenURIs(1, 1<<20)},
		"taskIds":                  {"taskIds": listenURIs(maxSubs+1, 10)},
	} {
		// Bounded in time: an accepted listen would never end.
		params := modernParams(map[string]any{"notifications": filter}, nil)
		body, _ := encodeRequest(t, c, "subscriptions/listen", params)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		resp, err := c.PostRaw(ctx, n.url, body, modernMod("subscriptions/listen", params, nil), nil)
		cancel()
		if err != nil {
			t.Errorf("%s: %v, want a -32602 answer", name, err)
			continue
		}
		e := wantCode(t, name, resp, jsonrpc.CodeInvalidParams)
		if !strings.Contains(e.Message, name) || len(resp.Body) > 4096 {
			t.Errorf("%s: error body of %d bytes with message %.200q, want a short one naming %s", name, len(resp.Body), e.Message, name)
		}
	}
	// At the bounds, the listen is acknowledged.
	st := openModern(t, c, n.url, "subscriptions/listen", jsonrpc.IntID(9), map[string]any{"notifications": map[string]any{
		"resourceSubscriptions": listenURIs(maxSubs, mcp.DefaultServerOptions().MaxURIBytes)}}, nil)
	if !st.WaitFor(5*time.Second, hasMethod("notifications/subscriptions/acknowledged")) {
		t.Fatalf("a listen at the bounds was not acknowledged: %v", st.Messages())
	}

	// Over stdio, with the defaults (1024 entries).
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	sc := startStdio(t, srv, nil)
	for i, filter := range []map[string]any{
		{"resourceSubscriptions": listenURIs(mcp.DefaultMaxSubscriptions+1, 10)},
		{"resourceSubscriptions": listenURIs(1, mcp.DefaultServerOptions().MaxURIBytes+1)},
	} {
		b, _ := json.Marshal(filter)
		sc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{%s,"notifications":%s}}`, i+2, stdioModernMeta, b))
		if l := sc.next("listen"); l.Error == nil || l.Error.Code != jsonrpc.CodeInvalidParams || len(l.raw) > 4096 {
			t.Errorf("stdio listen %d: got %.300s, want a short -32602", i, l.raw)
		}
	}
}

// A stdio batch is bounded as an HTTP one (64 members): a
// larger one gets one error and nothing of it runs.
func TestAbuseStdioBatch(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := blockingServer(release)
	c := startStdio(t, srv, nil)
	c.send(strings.Replace(stdioInit, "2025-11-25", mcp.Version20250326, 1), stdioInitialized)
	c.next("initialize")
	const members = 30000
	calls := make([]string, members)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block"}}`, 10+i)
	}
	before := runtime.NumGoroutine()
	c.send("[" + strings.Join(calls, ",") + "]")
	l := c.next("the answer to the batch")
	after := runtime.NumGoroutine()
	t.Logf("a batch of %d blocking calls: goroutines %d → %d", members, before, after)
	if l.Error == nil || l.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(l.Error.Message, fmt.Sprint(mcp.DefaultStdioOptions().MaxBatch)) {
		t.Fatalf("a batch of %d: got %.300s, want one -32600 naming the bound %d", members, l.raw, mcp.DefaultStdioOptions().MaxBatch)
	}
	if after > before+20 {
		t.Errorf("a refused batch left %d goroutines more", after-before)
	}
}

// Handlers running at once on a stdio connection are bounded as an
// HTTP session's share (64), a batch counting
// each member: more are refused with -31000 at once, and the slots come
// back when handlers end.
func TestAbuseStdioHandlers(t *testing.T) {
	release := make(chan struct{})
	srv := blockingServer(release)
	c := startStdio(t, srv, nil)
	c.send(strings.Replace(stdioInit, "2025-11-25", mcp.Version20250326, 1), stdioInitialized)
	c.next("initialize")
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block"}}`, id)
	}
	full := mcp.DefaultStdioOptions().MaxHandlers
	for i := range full {
		c.send(call(100 + i))
	}
	c.send(call(1))
	if l := c.next("the call past the bound"); string(l.ID) != "1" || l.Error == nil || l.Error.Code != jsonrpc.CodeUnavailable {
		t.Fatalf("call %d while %d run: got %.300s, want -31000 at once", full+1, full, l.raw)
	}
	c.send("[" + call(2) + "," + call(3) + "]")
	if l := c.next("the batch past the bound"); l.Error == nil || l.Error.Code != jsonrpc.CodeUnavailable {
		t.Fatalf("a batch while %d run: got %.300s, want one -31000", full, l.raw)
	}
	close(release)
	for range full {
		if l := c.next("a released call"); l.Error != nil {
			t.Fatalf("a running call: got %.300s", l.raw)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"block"}}`)
	if l := c.next("a call once the slots are back"); string(l.ID) != "4" || l.Error != nil {
		t.Fatalf("a call after the others ended: got %.300s", l.raw)
	}
}

// A GET or subscriptions/listen stream nobody reads ends after
// MaxStreamLifetime: the GET stream with a retry hint, the listen
// stream with its result.
func TestAbuseStreamLifetime(t *testing.T) {
	const life = 300 * time.Millisecond
	n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{MaxStreamLifetime: life}})
	for _, v := range []string{mcp.Version20250326, mcp.LatestLegacyVersion} {
		c := session(t, n.url, v, nil)
		start := time.Now()
		st := getStream(t, c, n.url, "")
		select {
		case <-st.Done():
		case <-time.After(10 * life):
			t.Fatalf("%s: the GET stream is still open after %v", v, 10*life)
		}
		if d := time.Since(start); d < life {
			t.Errorf("%s: the GET stream ended after %v, before its lifetime", v, d)
		}
		rs := st.Retries()
		if len(rs) < 2 || rs[len(rs)-1].Value != 50*time.Millisecond {
			t.Errorf("%s: retry hints %v, want the hint again at the end", v, rs)
		}
	}
	c := mcptest.New(t, n.url)
	id := jsonrpc.IntID(3)
	st := openModern(t, c, n.url, "subscriptions/listen", id, map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	select {
	case <-st.Done():
	case <-time.After(10 * life):
		t.Fatalf("the listen stream is still open after %v", 10*life)
	}
	if !st.WaitFor(time.Second, finalResponse) {
		t.Fatalf("the listen stream ended without its result: %v", st.Messages())
	}
}
