package inproc_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

const toolsChanged = "notifications/tools/list_changed"

// onBackends runs a cluster test on the in-memory backend and on a Redis
// backend per node, all on one test-started redis-server.
func onBackends(t *testing.T, run func(t *testing.T, opts inproc.Options)) {
	t.Run("memory", func(t *testing.T) { run(t, inproc.Options{}) })
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		run(t, inproc.Options{Backend: func(int) (*cluster.Backend, error) {
			o, err := redis.ParseURL(rs.URL())
			if err != nil {
				return nil, err
			}
			c := goredis.NewUniversalClient(o)
			b, err := redis.New(context.Background(), c, redis.Options{CloseClient: true})
			if err != nil {
				_ = c.Close()
			}
			return b, err
		}})
	})
}

// demoCluster starts a cluster serving the demo pack (toggle_extra_tool
// and the tool 'extra' it switches, disabled at start) and opens, for
// each node, a session's GET stream and a listen stream for tool list
// changes on it.
func demoCluster(t *testing.T, opts inproc.Options) (*inproc.Cluster, []*mcptest.Stream) {
	opts.Setup = func(_ int, s *mcp.Server) { demo.Register(s) }
	c := inproc.New(t, opts)
	var streams []*mcptest.Stream
	for i, n := range c.Nodes {
		cl := mcptest.New(t, c.Nodes[(i+1)%len(c.Nodes)].URL)
		cl.Initialize(mcp.Version20251125, nil)
		streams = append(streams, mcptest.OpenGet(t, cl, n.URL, ""))

		lc := mcptest.New(t)
		params := map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": mcptest.ModernMeta()}
		_, body := mcptest.Request(t, lc, "subscriptions/listen", params)
		st, err := lc.OpenPost(n.URL, body, mcptest.ModernHeaders("subscriptions/listen", ""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		mustWait(t, st, "acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))
		streams = append(streams, st)
	}
	return c, streams
}

// toggleAt calls toggle_extra_tool on node i and returns its answer.
func toggleAt(t *testing.T, c *inproc.Cluster, cl *mcptest.Client, i int) string {
	t.Helper()
	return text(t, callAt(t, cl, c.Nodes[i].URL, "tools/call", map[string]any{"name": "toggle_extra_tool"}).Final())
}

// settle is how long a test waits for notifications that should not
// come: fan-outs run in the background, and from different nodes in no
// set order, so a later one cannot vouch that an earlier one is over.
const settle = 300 * time.Millisecond

// exactly waits until every stream has n tools/list_changed, then checks
// that no more arrive.
func exactly(t *testing.T, streams []*mcptest.Stream, n int) {
	t.Helper()
	for i, st := range streams {
		mustWait(t, st, fmt.Sprintf("list_changed %d on stream %d", n, i), mcptest.Has(toolsChanged, n))
	}
	time.Sleep(settle)
	for i, st := range streams {
		if got := st.Count(toolsChanged); got != n {
			t.Errorf("stream %d: got %d list_changed, want %d", i, got, n)
		}
	}
}

// Toggles sent round-robin to the three nodes in quick succession each
// flip the cluster's state, whatever the node last saw of it, and each
// produce exactly one list_changed on every open stream.
func TestToggleRoundRobinEachFlips(t *testing.T) {
	onBackends(t, func(t *testing.T, opts inproc.Options) {
		c, streams := demoCluster(t, opts)
		// No node has caught up with the others' changes when the next
		// toggle reaches it: the change messages arrive late.
		for _, n := range c.Nodes {
			n.Faults.Filter(func(_ string, msg []byte) inproc.Verdict {
				if bytes.Contains(msg, []byte(`"t":"reg"`)) {
					return inproc.Verdict{Delay: 150 * time.Millisecond}
				}
				return inproc.Verdict{}
			})
		}
		cl := mcptest.New(t, c.Nodes[0].URL)
		cl.Initialize(mcp.Version20251125, nil)
		const rounds = 9
		for k := range rounds {
			want := "added"
			if k%2 == 1 {
				want = "removed"
			}
			if got := toggleAt(t, c, cl, k%len(c.Nodes)); got != want {
				t.Fatalf("toggle %d on node %d: got %q, want %q", k+1, k%len(c.Nodes), got, want)
			}
		}
		exactly(t, streams, rounds)
		// An odd number of toggles: 'extra' is on, on every node.
		for _, n := range c.Nodes {
			mcptest.Eventually(t, soon, n.ID+" to see 'extra' enabled", func() bool {
				return n.Server.Enabled(mcp.KindTool, "extra")
			})
		}
	})
}

// SetEnabled notifies exactly when the cluster's state changed: two
// nodes disabling the disabled 'extra' at once notify nobody, two
// enabling it at once notify once.
func TestSetEnabledConcurrentNotifiesOnce(t *testing.T) {
	onBackends(t, func(t *testing.T, opts inproc.Options) {
		c, streams := demoCluster(t, opts)
		for _, on := range []bool{false, true, true} {
			var wg sync.WaitGroup
			for _, n := range c.Nodes[:2] {
				wg.Go(func() {
					if err := n.Server.SetEnabled(t.Context(), mcp.KindTool, "extra", on); err != nil {
						t.Errorf("SetEnabled(%v) on %s: %v", on, n.ID, err)
					}
				})
			}
			wg.Wait()
		}
		exactly(t, streams, 1)
	})
}
