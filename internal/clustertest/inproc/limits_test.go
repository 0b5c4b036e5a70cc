package inproc_test

// Per-caller limits across three nodes sharing one backend: a caller
// over its limit gets 429 with Retry-After and a JSON-RPC error on any
// node, while another caller is served.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// caller is a client on every node of c, seen as the client address
// addr (through X-Forwarded-For) or as principal sub (through the
// stand-in authentication layer inproc.HeaderAuthn).
func caller(t *testing.T, c *inproc.Cluster, header, value string) *mcptest.Client {
	cl := mcptest.New(t, c.URLs()...)
	cl.Header.Set(header, value)
	return cl
}

// initialize sends an initialize (no notifications/initialized) on the
// client's next node and returns the response.
func initialize(t *testing.T, cl *mcptest.Client) *mcptest.Response {
	t.Helper()
	msg, err := jsonrpc.Request(cl.NextID(), "initialize", map[string]any{
		"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "limits", "version": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return post(t, cl, cl.URL(), msg)
}

// wantTooMany fails unless resp is a 429 with a Retry-After of at least
// a second and a JSON-RPC error body.
func wantTooMany(t *testing.T, what string, status int, h http.Header, body []byte) {
	t.Helper()
	if status != http.StatusTooManyRequests {
		t.Fatalf("%s: got status %d (%s), want 429", what, status, body)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("%s: Retry-After %q, want whole seconds >= 1", what, h.Get("Retry-After"))
	}
	var m struct {
		Error *struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeUnavailable {
		t.Fatalf("%s: body %s, want a JSON-RPC error %d", what, body, jsonrpc.CodeUnavailable)
	}
}

// openSessions initializes sessions in a loop (round robin over the
// nodes) until one is refused, and returns the sessions opened and the
// refusal.
func openSessions(t *testing.T, cl *mcptest.Client, most int) ([]string, *mcptest.Response) {
	t.Helper()
	var ids []string
	for range most + 1 {
		resp := initialize(t, cl)
		if resp.Status != http.StatusOK {
			return ids, resp
		}
		ids = append(ids, resp.Header.Get("Mcp-Session-Id"))
	}
	t.Fatalf("%d sessions opened, the limit is %d", len(ids), most)
	return nil, nil
}

// Limits under load: one caller opening sessions in a loop across three
// nodes hits its own limit, while another caller still works; a DELETE
// on any node, or an expiry, frees a place.
func TestCallerSessionLimitAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		name, header, a, b string
		opts               inproc.Options
	}{
		{"address via trusted proxy", "X-Forwarded-For", "203.0.113.1", "203.0.113.2",
			inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerSessions: 4, TrustedProxies: []string{"127.0.0.0/8"}}}},
		{"principal", "X-Test-Subject", "ada", "bob",
			inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerSessions: 4}, Wrap: inproc.HeaderAuthn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := inproc.New(t, tc.opts)
			a, b := caller(t, c, tc.header, tc.a), caller(t, c, tc.header, tc.b)
			ids, refused := openSessions(t, a, 4)
			if len(ids) != 4 {
				t.Fatalf("caller a opened %d sessions before a refusal, want 4", len(ids))
			}
			wantTooMany(t, "initialize past the caller's sessions", refused.Status, refused.Header, refused.Body)
			if refused.Header.Get("Mcp-Session-Id") != "" {
				t.Fatal("a refused initialize issued a session id")
			}
			if resp := initialize(t, b); resp.Status != http.StatusOK {
				t.Fatalf("caller b: initialize got %d (%s), want 200", resp.Status, resp.Body)
			}
			// DELETE on another node frees one place, and only one.
			a.Session = ids[0]
			if st := a.Delete(c.Nodes[2].URL); st != http.StatusNoContent {
				t.Fatalf("DELETE: got %d", st)
			}
			a.Session = ""
			more, refused := openSessions(t, a, 1)
			if len(more) != 1 {
				t.Fatalf("after a DELETE: opened %d, want 1", len(more))
			}
			wantTooMany(t, "initialize past the caller's sessions again", refused.Status, refused.Header, refused.Body)
			if got := metric(t, c, "mcp_caller_refused_sessions_total"); got != 2 {
				t.Fatalf("mcp_caller_refused_sessions_total over the nodes: got %v, want 2", got)
			}
		})
	}
}

// A caller's expired session frees its place by itself.
func TestCallerExpiredSessionFreesItsPlace(t *testing.T) {
	const ttl = 500 * time.Millisecond
	c := inproc.New(t, inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerSessions: 1, SessionTTL: ttl}})
	cl := mcptest.New(t, c.URLs()...)
	ids, refused := openSessions(t, cl, 1)
	wantTooMany(t, "second session", refused.Status, refused.Header, refused.Body)
	// A used session stays: using it renews its place.
	cl.Session = ids[0]
	for range 3 {
		time.Sleep(ttl / 2)
		callAt(t, cl, cl.URL(), "ping", nil).Result(t, nil)
	}
	cl.Session = ""
	if resp := initialize(t, cl); resp.Status != http.StatusTooManyRequests {
		t.Fatalf("while the first session is used: initialize got %d, want 429", resp.Status)
	}
	deadline := time.Now().Add(10 * ttl)
	for {
		resp := initialize(t, cl)
		if resp.Status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session's place was not freed: initialize still gets %d", resp.Status)
		}
		time.Sleep(ttl / 5)
	}
}

// X-Forwarded-For from a peer that is not a trusted proxy is ignored:
// every address it claims is the same caller.
func TestCallerForwardedForFromUntrustedPeerIgnored(t *testing.T) {
	c := inproc.New(t, inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerSessions: 2, TrustedProxies: []string{"192.0.2.0/24"}}})
	for i, addr := range []string{"203.0.113.1", "203.0.113.2"} {
		if resp := initialize(t, caller(t, c, "X-Forwarded-For", addr)); resp.Status != http.StatusOK {
			t.Fatalf("session %d: got %d", i, resp.Status)
		}
	}
	resp := initialize(t, caller(t, c, "X-Forwarded-For", "203.0.113.3"))
	wantTooMany(t, "a third 'client' behind an untrusted peer", resp.Status, resp.Header, resp.Body)
}

// The request rate is the caller's across the deployment: spending the
// burst on one node leaves nothing on another, while another caller is
// served.
func TestCallerRateAcrossNodes(t *testing.T) {
	c := inproc.New(t, inproc.Options{HTTP: mcp.HTTPOptions{CallerRate: 2, CallerBurst: 5, TrustedProxies: []string{"127.0.0.1"}}})
	a, b := caller(t, c, "X-Forwarded-For", "203.0.113.1"), caller(t, c, "X-Forwarded-For", "203.0.113.2")
	ping := func(cl *mcptest.Client, node int) *mcptest.Response {
		return callAt(t, cl, c.Nodes[node].URL, "ping", nil)
	}
	// initialize and notifications/initialized take two of the five;
	// three pings pass on n0, the fourth is refused.
	a.URLs, b.URLs = c.URLs()[:1], c.URLs()[:1]
	a.Initialize(mcp.Version20251125, nil)
	b.Initialize(mcp.Version20251125, nil)
	for i := range 3 {
		if resp := ping(a, 0); resp.Status != http.StatusOK {
			t.Fatalf("ping %d within the burst: got %d (%s)", i+1, resp.Status, resp.Body)
		}
	}
	resp := ping(a, 0)
	wantTooMany(t, "ping past the burst on n0", resp.Status, resp.Header, resp.Body)
	// n1 hears of the spent bucket when it debits what it admitted: at
	// most one more ping gets through there.
	admitted := 0
	for range 5 {
		if ping(a, 1).Status == http.StatusOK {
			admitted++
		}
		time.Sleep(40 * time.Millisecond)
	}
	if admitted > 1 {
		t.Fatalf("n1 admitted %d pings of a caller whose burst was spent on n0, want at most 1", admitted)
	}
	last := ping(a, 2)
	if last.Status == http.StatusOK {
		// n2 may admit one too, once; the next is refused.
		time.Sleep(40 * time.Millisecond)
		last = ping(a, 2)
	}
	wantTooMany(t, "ping on n2", last.Status, last.Header, last.Body)
	for node := range 3 {
		if resp := ping(b, node); resp.Status != http.StatusOK {
			t.Fatalf("caller b on n%d: got %d", node, resp.Status)
		}
	}
}

// Open streams are counted per caller across nodes; closing one frees
// its place.
func TestCallerStreamLimitAcrossNodes(t *testing.T) {
	c := inproc.New(t, inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerStreams: 2}})
	var clients []*mcptest.Client
	for i := range 3 {
		cl := mcptest.New(t, c.Nodes[i].URL)
		cl.Initialize(mcp.Version20251125, nil)
		clients = append(clients, cl)
	}
	var open []*mcptest.Stream
	for i := range 2 {
		st, err := clients[i].Get(c.Nodes[i].URL, "")
		if err != nil {
			t.Fatalf("GET stream %d: %v", i, err)
		}
		t.Cleanup(st.Close)
		open = append(open, st)
	}
	st, err := clients[2].Get(c.Nodes[2].URL, "")
	if err == nil {
		st.Close()
		t.Fatal("a third GET stream of the caller was opened, the limit is 2")
	}
	wantTooMany(t, "third stream", st.Resp.StatusCode, st.Resp.Header, []byte(jsonBody(err)))
	open[0].Close()
	deadline := time.Now().Add(soon)
	for {
		st, err := clients[2].Get(c.Nodes[2].URL, "")
		if err == nil {
			st.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jsonBody extracts the body from a mcptest stream error ("...: <body>").
func jsonBody(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == '{' {
			return s[i:]
		}
	}
	return s
}

// The stream places of a node that dies free within its lease: its
// leases are no longer renewed.
func TestCallerStreamPlacesOfADeadNodeFree(t *testing.T) {
	const lease = 200 * time.Millisecond
	c := inproc.New(t, inproc.Options{HTTP: mcp.HTTPOptions{MaxCallerStreams: 1, LeaseTTL: lease}})
	a := mcptest.New(t, c.Nodes[0].URL)
	a.Initialize(mcp.Version20251125, nil)
	st, err := a.Get(c.Nodes[0].URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	b := mcptest.New(t, c.Nodes[1].URL)
	b.Initialize(mcp.Version20251125, nil)
	if st, err := b.Get(c.Nodes[1].URL, ""); err == nil {
		st.Close()
		t.Fatal("a second stream of the caller was opened, the limit is 1")
	}
	c.Nodes[0].Kill()
	start := time.Now()
	for {
		st, err := b.Get(c.Nodes[1].URL, "")
		if err == nil {
			st.Close()
			break
		}
		if time.Since(start) > soon {
			t.Fatalf("the dead node's stream place was not freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A stream's lease is six LeaseTTLs.
	if d := time.Since(start); d > 8*lease {
		t.Fatalf("the place freed after %v, want within about the lease (%v)", d, 6*lease)
	}
}

// metric sums a metric without labels over every node's /metrics.
func metric(t *testing.T, c *inproc.Cluster, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, n := range c.Nodes {
		rec := httptest.NewRecorder()
		n.Handler.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for line := range strings.Lines(rec.Body.String()) {
			if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], name) && (f[0] == name || f[0][len(name)] == '{') {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				sum += v
			}
		}
	}
	return sum
}
