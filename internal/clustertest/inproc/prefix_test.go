package inproc_test

// Key prefixes: two deployments of three nodes each share one Redis,
// each under a prefix of its own and as an ACL user allowed only that
// prefix's keys and channels. Under load on both, neither sees the
// other's sessions, streams, tasks, replies or list_changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

func TestPrefixIsolation(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		srv := redistest.Start(t)
		isolation(t, []*redistest.Server{srv}, "redis://%s@"+srv.Addr())
	})
	t.Run("cluster", func(t *testing.T) {
		srvs := redistest.StartCluster(t, 3)
		var addrs []string
		for _, s := range srvs {
			addrs = append(addrs, s.Addr())
		}
		isolation(t, srvs, "redis-cluster://%s@"+strings.Join(addrs, ","))
	})
}

// deployment is three nodes under one prefix, with a GET stream (of
// session on the first node) and a listen stream for tool list changes
// on each node.
type deployment struct {
	prefix string
	*inproc.Cluster
	streams []*mcptest.Stream
	get     *mcptest.Stream // the GET stream of session
	session *mcptest.Client
}

func deploy(t *testing.T, url, prefix string) *deployment {
	d := &deployment{prefix: prefix}
	opts := inproc.Options{
		// Each deployment seals MRTR state with a key of its own.
		Server: mcp.ServerOptions{StateKeys: [][]byte{bytes.Repeat([]byte(prefix), 32)}},
		Backend: func(int) (*cluster.Backend, error) {
			c, err := redis.NewClient(fmt.Sprintf(url, prefix+":"+prefix+"-pw"), redis.ConnOptions{})
			if err != nil {
				return nil, err
			}
			b, err := redis.New(context.Background(), c, redis.Options{Prefix: prefix, CloseClient: true})
			if err != nil {
				_ = c.Close()
			}
			return b, err
		},
		Setup: func(_ int, s *mcp.Server) {
			mcp.AddTool(s, mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return prefix, nil })
			mcp.AddTool(s, mcp.Tool{Name: "extra"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
			mcp.AddTool(s, mcp.Tool{Name: "toggle"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
				_, err := s.ToggleEnabled(ctx, mcp.KindTool, "extra")
				return "", err
			})
			mcp.AddTool(s, mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
				res, err := req.Sample(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
					Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.SamplingContent{mcp.TextContent("hi")}}}})
				if err != nil {
					return "", err
				}
				return res.Text() + " via " + prefix, nil
			})
			mcp.AddTool(s, mcp.Tool{Name: "job", TaskSupport: mcp.TaskOptional}, func(context.Context, *mcp.Request, struct{}) (string, error) {
				return "done in " + prefix, nil
			})
		},
	}
	d.Cluster = inproc.New(t, opts)
	d.session = mcptest.New(t, d.Nodes[0].URL)
	d.session.Initialize(mcp.Version20251125, map[string]any{"sampling": map[string]any{}})
	for i, n := range d.Nodes {
		cl := d.session
		if i > 0 { // a session has one GET stream
			cl = mcptest.New(t, n.URL)
			cl.Initialize(mcp.Version20251125, nil)
		}
		st := mcptest.OpenGet(t, cl, n.URL, "")
		if d.get == nil {
			d.get = st
		}
		lc := mcptest.New(t)
		params := map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": mcptest.ModernMeta()}
		_, body := mcptest.Request(t, lc, "subscriptions/listen", params)
		ls, err := lc.OpenPost(n.URL, body, mcptest.ModernHeaders("subscriptions/listen", ""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ls.Close)
		mustWait(t, ls, "acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))
		d.streams = append(d.streams, st, ls)
	}
	return d
}

// busy calls whoami round-robin on d's nodes in sessions of its own
// until stop, and reports every answer that is not d's.
func (d *deployment) busy(t *testing.T, stop <-chan struct{}, wg *sync.WaitGroup, errs chan<- error, calls *atomic.Int64) {
	cl := mcptest.New(t, d.Nodes[1].URL)
	cl.Initialize(mcp.Version20251125, nil)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			msg, _ := jsonrpc.Request(cl.NextID(), "tools/call", map[string]any{"name": "whoami"})
			b, _ := jsonrpc.Encode(msg)
			ctx, cancel := context.WithTimeout(context.Background(), soon)
			resp, err := cl.PostRaw(ctx, d.Nodes[i%len(d.Nodes)].URL, b, nil, nil)
			cancel()
			var res mcp.CallToolResult
			switch {
			case err != nil:
			case resp.Final() == nil || resp.Final().Error != nil:
				err = fmt.Errorf("status %d: %s", resp.Status, resp.Body)
			case json.Unmarshal(resp.Final().Result, &res) != nil || len(res.Content) == 0 || res.Content[0].Text != d.prefix:
				err = fmt.Errorf("answer %s", resp.Final().Result)
			}
			if err != nil {
				errs <- fmt.Errorf("deployment %s under load: %w", d.prefix, err)
				return
			}
			calls.Add(1)
		}
	}()
}

func isolation(t *testing.T, srvs []*redistest.Server, url string) {
	for _, p := range []string{"a", "b"} {
		acl := fmt.Sprintf("ACL SETUSER %s on >%s-pw ~%s:* ~{%s:nodes}:sharded &%s:* +@all", p, p, p, p, p)
		for _, s := range srvs {
			if r, err := s.Do(acl); err != nil || r != "+OK" {
				t.Fatalf("%s: %q, %v", acl, r, err)
			}
		}
	}
	a, b := deploy(t, url, "a"), deploy(t, url, "b")
	stop, errs := make(chan struct{}), make(chan error, 4)
	var wg sync.WaitGroup
	var calls atomic.Int64
	a.busy(t, stop, &wg, errs, &calls)
	b.busy(t, stop, &wg, errs, &calls)

	for _, pair := range [][2]*deployment{{a, b}, {b, a}} {
		x, y := pair[0], pair[1]
		t.Run(x.prefix+" unseen by "+y.prefix, func(t *testing.T) {
			// Membership: the same node ids in both, three members each.
			if m, err := x.Backend.Members.Members(t.Context()); err != nil || len(m) != 3 {
				t.Errorf("members of %s: %v, %v; want its three nodes", x.prefix, m, err)
			}
			// list_changed: x's streams get one per toggle, y's none.
			before := map[*mcptest.Stream]int{}
			for _, st := range append(x.streams, y.streams...) {
				before[st] = st.Count(toolsChanged)
			}
			callAt(t, x.session, x.Nodes[2].URL, "tools/call", map[string]any{"name": "toggle"})
			for i, st := range x.streams {
				mustWait(t, st, fmt.Sprintf("%s stream %d: list_changed", x.prefix, i), mcptest.Has(toolsChanged, before[st]+1))
			}
			time.Sleep(settle)
			for i, st := range y.streams {
				if n := st.Count(toolsChanged); n != before[st] {
					t.Errorf("%s stream %d: %d list_changed after %s toggled, want %d", y.prefix, i, n, x.prefix, before[st])
				}
			}
			// Sessions and streams: x's session and its GET stream's
			// events are unknown on every node of y.
			last := lastID(x.get)
			for _, n := range y.Nodes {
				if resp := callAt(t, x.session, n.URL, "tools/call", map[string]any{"name": "whoami"}); resp.Status != http.StatusNotFound {
					t.Errorf("%s's session on %s/%s: got %d %s, want 404", x.prefix, y.prefix, n.ID, resp.Status, resp.Body)
				}
				if st, err := x.session.Get(n.URL, last); err == nil {
					st.Close()
					t.Errorf("%s's stream resumed on %s/%s (Last-Event-ID %s)", x.prefix, y.prefix, n.ID, last)
				}
			}
			// Replies: a reply to x's sampling request posted to y goes
			// nowhere; posted to another node of x, it wakes the call.
			_, st := mcptest.OpenCall(t, x.session, x.Nodes[1].URL, "tools/call", map[string]any{"name": "sample"})
			mustWait(t, st, "sampling request", mcptest.Has("sampling/createMessage", 1))
			res, _ := json.Marshal(map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "ok"}})
			reply := &jsonrpc.Message{ID: st.Messages()[0].ID, Result: res}
			if resp := post(t, x.session, y.Nodes[0].URL, reply); resp.Status != http.StatusNotFound {
				t.Errorf("reply posted to %s: got %d, want 404", y.prefix, resp.Status)
			}
			if resp := post(t, x.session, x.Nodes[2].URL, reply); resp.Status != http.StatusAccepted {
				t.Fatalf("reply posted to %s: got %d %s", x.prefix, resp.Status, resp.Body)
			}
			mustWait(t, st, "sampling call's result", hasFinal)
			if got := text(t, mcptest.Final(st.Messages())); got != "ok via "+x.prefix {
				t.Errorf("sampling call: got %q", got)
			}
			// Tasks: a task of x is known on x's nodes only.
			tc := mcptest.New(t)
			created := taskReq(t, tc, x.Nodes[0].URL, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, 0)
			id, _ := created["taskId"].(string)
			if id == "" {
				t.Fatalf("tools/call job: %v, want a task", created)
			}
			taskReq(t, tc, x.Nodes[1].URL, "tasks/get", id, map[string]any{"taskId": id}, 0)
			for _, n := range y.Nodes {
				taskReq(t, tc, n.URL, "tasks/get", id, map[string]any{"taskId": id}, jsonrpc.CodeInvalidParams)
			}
		})
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := calls.Load(); n < 20 {
		t.Errorf("only %d calls of the load; want it running throughout", n)
	} else {
		t.Logf("%d calls of the load, each answered by its own deployment", n)
	}
	// Every key the deployments wrote is under their prefixes.
	for _, s := range srvs {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
		keys, err := c.Keys(t.Context(), "*").Result()
		c.Close()
		if err != nil || len(keys) == 0 {
			t.Fatalf("KEYS on %s: %d keys, %v", s.Addr(), len(keys), err)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "a:") && !strings.HasPrefix(k, "b:") && !strings.HasPrefix(k, "{a:") && !strings.HasPrefix(k, "{b:") {
				t.Errorf("key %q is under neither prefix", k)
			}
		}
	}
}
