package clustertest_test

// Redis is the only shared state: when it is unreachable every node says
// so (HTTP 503 with a JSON-RPC error body) instead of failing obscurely
// or answering from node-local state, and when it is back the nodes serve
// fully again without a restart, with nothing lost that Redis had
// acknowledged.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// outcome is one request of the background traffic.
type outcome struct {
	what       string
	start, end time.Time
	status     int
	body       string
	err        error
	ok         bool // a 200 whose result is the expected one
}

// traffic keeps requests flowing through the router: calls on existing
// sessions and new sessions.
type traffic struct {
	mu       sync.Mutex
	outcomes []outcome
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startTraffic(t *testing.T, c *clustertest.Cluster, sessions []*mcptest.Client) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel}
	t.Cleanup(func() { tr.stop() })
	record := func(o outcome) {
		tr.mu.Lock()
		tr.outcomes = append(tr.outcomes, o)
		tr.mu.Unlock()
	}
	raw := func(cl *mcptest.Client, what string, body []byte, check func(*mcptest.Response) bool) {
		o := outcome{what: what, start: time.Now()}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		resp, err := cl.PostRaw(rctx, c.URL(), body, nil, nil)
		rcancel()
		o.end = time.Now()
		if ctx.Err() != nil {
			return // stopped mid-request: not an outcome
		}
		o.err = err
		if resp != nil {
			o.status, o.body = resp.Status, string(resp.Body)
			o.ok = err == nil && resp.Status == http.StatusOK && check(resp)
		}
		record(o)
	}
	for i, cl := range sessions {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				want := fmt.Sprintf("s%d-%d", i, n)
				_, b := mcptest.Request(t, cl, "tools/call", tool("echo", map[string]any{"text": want}))
				raw(cl, "echo", b, func(r *mcptest.Response) bool {
					got, ok := resultText(r.Final())
					return ok && got == want
				})
				sleepCtx(ctx, 20*time.Millisecond)
			}
		}()
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		cl := mcptest.New(t, c.URL())
		for ctx.Err() == nil {
			_, b := mcptest.Request(t, cl, "initialize", map[string]any{
				"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "traffic", "version": "1"},
			})
			raw(cl, "initialize", b, func(r *mcptest.Response) bool {
				return r.Header.Get("Mcp-Session-Id") != "" && r.Final() != nil && r.Final().Error == nil
			})
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}()
	return tr
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (tr *traffic) stop() []outcome {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]outcome(nil), tr.outcomes...)
}

func (tr *traffic) succeeded() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, o := range tr.outcomes {
		if o.ok {
			n++
		}
	}
	return n
}

// unavailable reports whether a response is the clear refusal of a node
// that cannot reach Redis: 503 with a JSON-RPC error body.
func unavailable(status int, body []byte) error {
	if status != http.StatusServiceUnavailable {
		return fmt.Errorf("status %d, want 503 (body %q)", status, body)
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil || msg.Error == nil {
		return fmt.Errorf("503 without a JSON-RPC error body: %q", body)
	}
	if msg.Error.Code != jsonrpc.CodeUnavailable {
		return fmt.Errorf("503 with error %d %q, want %d", msg.Error.Code, msg.Error.Message, jsonrpc.CodeUnavailable)
	}
	return nil
}

// Redis is killed while requests flow through the router and restarted a
// few seconds later (keeping what it acknowledged): during the outage
// every node refuses every request with 503 and a JSON-RPC error, never a
// 500 and never an answer from node-local state; once Redis is back the
// same nodes, not restarted, serve new and old sessions, subscriptions
// and cross-node replies again.
func TestRedisRestartMidTraffic(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{
		Nodes: 3, Random: true,
		RedisOptions: redistest.Options{Persist: true},
		Args:         []string{"--request-timeout", "3s"},
	})

	// Acknowledged before the outage: a session and its subscription.
	before := session(t, c, nil)
	before.Call("resources/subscribe", map[string]any{"uri": demo.CounterURI}, nil).Result(t, nil)
	var busy []*mcptest.Client
	for range 3 {
		busy = append(busy, session(t, c, nil))
	}
	tr := startTraffic(t, c, busy)
	clustertest.WaitFor(t, soon, "traffic flowing", func() bool { return tr.succeeded() >= 20 })

	c.Redis.Kill()
	down := time.Now()
	// Every node refuses every kind of request clearly.
	for i, n := range c.Nodes {
		if err := unavailable(initializeAt(t, n.URL)); err != nil {
			t.Errorf("%s: initialize during the outage: %v", n.ID, err)
		}
		resp := callAt(t, before, nodeURL(c, i), "tools/call", tool("bump_counter", nil))
		if err := unavailable(resp.Status, resp.Body); err != nil {
			t.Errorf("%s: tools/call on a session during the outage: %v", n.ID, err)
		}
		if st, err := before.Get(n.URL, ""); err == nil {
			st.Close()
			t.Errorf("%s: a GET stream opened during the outage", n.ID)
		} else if err := unavailable(st.Resp.StatusCode, []byte(errBody(err))); err != nil {
			t.Errorf("%s: GET during the outage: %v", n.ID, err)
		}
		del, err := before.Raw(context.Background(), http.MethodDelete, n.URL, nil, nil)
		if err != nil {
			t.Fatalf("%s: DELETE during the outage: %v", n.ID, err)
		}
		if err := unavailable(del.Status, del.Body); err != nil {
			t.Errorf("%s: DELETE during the outage: %v", n.ID, err)
		}
	}
	// Keep the outage on for longer than a node may cache a session (2s).
	time.Sleep(2500 * time.Millisecond)

	restart := time.Now()
	c.Redis.Restart()
	back := time.Now()
	clustertest.WaitFor(t, 30*time.Second, "every node serving new sessions again", func() bool {
		for _, n := range c.Nodes {
			if s, _ := initializeAt(t, n.URL); s != http.StatusOK {
				return false
			}
		}
		return true
	})
	t.Logf("Redis down %v; nodes serving again %v after it restarted", restart.Sub(down).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	recovered := time.Now()
	clustertest.WaitFor(t, soon, "traffic succeeding again", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, o := range tr.outcomes {
			if o.ok && o.start.After(recovered) {
				return true
			}
		}
		return false
	})
	outcomes := tr.stop()
	slices.SortFunc(outcomes, func(a, b outcome) int { return a.start.Compare(b.start) })

	// Never a 500, never an unclear error; during the outage never a
	// success served from node-local state.
	var served []outcome
	var refused []time.Duration
	for _, o := range outcomes {
		at := o.start.Sub(down).Round(time.Millisecond)
		switch {
		case o.err != nil:
			t.Errorf("%s at %+v: %v", o.what, at, o.err)
		case o.ok:
			if o.start.After(down) && o.end.Before(restart) {
				served = append(served, o)
			}
		default:
			if err := unavailable(o.status, []byte(o.body)); err != nil {
				t.Errorf("%s at %+v: %v", o.what, at, err)
			} else {
				refused = append(refused, o.end.Sub(o.start))
			}
		}
	}
	slices.Sort(refused)
	t.Logf("traffic: %d requests, %d refused with 503 (median %v, slowest %v to answer)", len(outcomes), len(refused), percentile(refused, 50), percentile(refused, 100))
	if len(refused) == 0 {
		t.Errorf("no request of the traffic was refused during the outage")
	}
	if len(served) > 0 {
		first, last := served[0], served[len(served)-1]
		t.Errorf("%d requests were served (200 with a result) while Redis was down, from %+v to %+v after it went down; e.g. %s answered %q",
			len(served), first.start.Sub(down).Round(time.Millisecond), last.start.Sub(down).Round(time.Millisecond), first.what, first.body)
	}

	// After: the session acknowledged before the outage is served by
	// every node, with its subscription.
	for i, n := range c.Nodes {
		want := "after " + n.ID
		if got := text(t, callAt(t, before, nodeURL(c, i), "tools/call", tool("echo", map[string]any{"text": want}))); got != want {
			t.Fatalf("%s: echo on the old session: got %q", n.ID, got)
		}
	}
	get := mcptest.OpenGet(t, before, nodeURL(c, 0), "")
	text(t, callAt(t, before, nodeURL(c, 1), "tools/call", tool("bump_counter", nil)))
	mustWait(t, get, soon, "resources/updated for the subscription made before the outage", mcptest.Has("notifications/resources/updated", 1))
	text(t, callAt(t, before, nodeURL(c, 2), "tools/call", tool("toggle_extra_tool", nil)))
	mustWait(t, get, soon, "tools/list_changed after the outage", mcptest.Has("notifications/tools/list_changed", 1))

	// The bus works again: a server→client request made on one node is
	// answered by a reply landing on another, for every pair of nodes.
	clustertest.WaitFor(t, 30*time.Second, "cross-node sampling working for every pair of nodes", func() bool {
		return len(crossNodeSampling(t, c, "recovered")) == 0
	})
}

// Redis comes back after an outage of a few seconds: as soon as a node
// serves calls again it also receives what other nodes route to it, so
// the reply to a server→client request, landing on another node, reaches
// the call waiting for it (instead of being dropped while the node's bus
// connection is still down, leaving the call to hang until the request
// timeout).
func TestRepliesRoutedAsSoonAsNodesServeAgain(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true, Args: []string{"--request-timeout", "3s"}})
	if errs := crossNodeSampling(t, c, "before"); len(errs) > 0 {
		t.Fatalf("before the outage: %v", errs)
	}
	c.Redis.Kill()
	time.Sleep(4 * time.Second)
	c.Redis.Restart()
	clustertest.WaitFor(t, 30*time.Second, "every node serving new sessions again", func() bool {
		for _, n := range c.Nodes {
			if s, _ := initializeAt(t, n.URL); s != http.StatusOK {
				return false
			}
		}
		return true
	})
	for _, err := range crossNodeSampling(t, c, "after") {
		t.Errorf("right after the nodes serve again: %v", err)
	}
}

// initializeAt opens a session on url and returns the HTTP status and
// body.
func initializeAt(t *testing.T, url string) (int, []byte) {
	t.Helper()
	probe := mcptest.New(t, url)
	_, b := mcptest.Request(t, probe, "initialize", map[string]any{
		"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "probe", "version": "1"},
	})
	resp, err := probe.PostRaw(context.Background(), url, b, nil, nil)
	if err != nil {
		t.Fatalf("initialize at %s: %v", url, err)
	}
	return resp.Status, resp.Body
}

// crossNodeSampling runs, at once, one sampling round trip for every
// ordered pair of distinct nodes: the call on the first, the client's
// reply on the second. It returns the failures.
func crossNodeSampling(t *testing.T, c *clustertest.Cluster, tag string) []error {
	t.Helper()
	type pair struct {
		call, reply int
		cl          *mcptest.Client
	}
	var pairs []pair
	for i := range c.Nodes {
		for j := range c.Nodes {
			if i != j {
				cl := session(t, c, sampleCaps)
				pairs = append(pairs, pair{i, j, pinned(t, cl, nodeURL(c, j))})
			}
		}
	}
	errs := make([]error, len(pairs))
	var wg sync.WaitGroup
	for k, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := fmt.Sprintf("%s %d", tag, k)
			msg, _ := jsonrpc.Request(p.cl.NextID(), "tools/call", tool("sample", map[string]any{"prompt": prompt}))
			b, _ := jsonrpc.Encode(msg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := p.cl.PostRaw(ctx, nodeURL(c, p.call), b, nil, answerSampling) // the reply goes to p.reply
			if err == nil {
				if got, ok := resultText(resp.Final()); !ok || got != "re:"+prompt {
					err = fmt.Errorf("got %s", describe(resp.Messages))
				}
			}
			if err != nil {
				errs[k] = fmt.Errorf("sampling called on %s, answered via %s: %w (after %v)", c.Nodes[p.call].ID, c.Nodes[p.reply].ID, err, time.Since(start).Round(time.Millisecond))
			}
		}()
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100].Round(time.Millisecond)
}

// errBody extracts the body mcptest puts in the error of a refused GET.
func errBody(err error) string {
	s := err.Error()
	if i := strings.Index(s, "{"); i >= 0 {
		return s[i:]
	}
	return s
}
