// Package inproc runs a cluster inside the test process: n nodes, each a
// real mcp.Server behind a real mcp.HTTPHandler served on its own
// loopback httptest server, all on one shared in-memory backend (or each
// on its own connection to a test-started Redis, Options.Backend), with a
// round-robin router in front (clustertest.Router). Each node sees the
// backend through its own Faults, so a test can cut one node off the
// bus, drop or delay the bus messages it receives, and kill it (its HTTP
// server goes away and it can no longer reach the backend, so its
// membership lease lapses), then wait for a condition.
//
// It is the fast, deterministic counterpart of package clustertest,
// which runs the real binary as processes on a real redis-server and
// stays the place for kill -9, Redis outages and restarts: here tool
// handlers are closures the test controls (gates instead of sleeps), and
// a flow takes milliseconds.
package inproc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Options configure a cluster. The zero value means three nodes with
// the harness defaults below.
type Options struct {
	// Nodes is the number of nodes (default 3).
	Nodes int
	// Setup registers the features of node i on its server (the same on
	// every node, as in a deployment). It may be nil.
	Setup func(i int, s *mcp.Server)
	// Server is the template of every node's server options.
	Server mcp.ServerOptions
	// HTTP is the template of every node's transport options; Backend
	// and NodeID are set per node. Zero LeaseTTL and ResumeGrace take the
	// harness defaults (DefaultLeaseTTL, DefaultResumeGrace), shorter than
	// a deployment's so that failures show within a test.
	HTTP mcp.HTTPOptions
	// Random makes the router pick a random node instead of the next.
	Random bool
	// Wrap, when set, wraps every node's handler, e.g. in an
	// authentication layer (HeaderAuthn) that puts the caller's
	// mcp.Principal in the request context.
	Wrap func(http.Handler) http.Handler
	// Backend, when set, opens node i's connection to the shared state
	// (for example a Redis backend per node, all on one test-started
	// redis-server), and with i == Nodes the cluster's own
	// (Cluster.Backend); the cluster closes them. Kill closes the node's:
	// its Close must cut it off the state (redis.Options.CloseClient). By
	// default every node sees one in-memory backend.
	Backend func(i int) (*cluster.Backend, error)
}

// HeaderAuthn is a stand-in authentication layer for tests: a request
// with an X-Test-Subject header is the principal of that subject (issuer
// https://as.test); one without is anonymous.
func HeaderAuthn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sub := r.Header.Get("X-Test-Subject"); sub != "" {
			p := &mcp.Principal{Issuer: "https://as.test", Subject: sub}
			r = r.WithContext(mcp.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// Harness defaults.
const (
	DefaultLeaseTTL    = time.Second
	DefaultResumeGrace = 2 * time.Second
)

// Cluster is a running in-process cluster.
type Cluster struct {
	T testing.TB
	// Backend is the state the nodes share (the cluster's own connection
	// to it with Options.Backend).
	Backend *cluster.Backend
	Nodes   []*Node
	Router  *clustertest.Router
}

// Node is one node.
type Node struct {
	ID      string
	URL     string // MCP endpoint
	Server  *mcp.Server
	Handler *mcp.HTTPHandler
	// Faults is the node's view of the shared backend.
	Faults *Faults

	http     *httptest.Server
	killOnce sync.Once
}

// New starts a cluster; it is stopped when the test ends.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	n := opts.Nodes
	if n <= 0 {
		n = 3
	}
	c := &Cluster{T: t}
	if opts.Backend == nil {
		c.Backend = memory.New(memory.Options{Logger: testLogger(t, "backend")})
	} else {
		b, err := opts.Backend(n)
		if err != nil {
			t.Fatalf("the cluster's connection: %v", err)
		}
		c.Backend = b
	}
	t.Cleanup(c.stop)
	urls := make([]string, n)
	for i := range n {
		node, err := c.start(i, opts)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		c.Nodes = append(c.Nodes, node)
		urls[i] = node.URL
	}
	c.Router = clustertest.NewRouter(urls, opts.Random)
	return c
}

func (c *Cluster) start(i int, opts Options) (*Node, error) {
	id := fmt.Sprintf("n%d", i)
	conn := c.Backend
	if opts.Backend != nil {
		b, err := opts.Backend(i)
		if err != nil {
			return nil, err
		}
		conn = b
	}
	f := newFaults(conn, opts.Backend != nil)
	so := opts.Server
	if len(so.StateKeys) == 0 {
		// The nodes of a cluster share their state keys (a shared
		// backend without them is refused).
		so.StateKeys = [][]byte{[]byte("inproc-state-key-0123456789abcde")}
	}
	srv := mcp.NewServer(mcp.Implementation{Name: "inproc", Version: "1.0.0"}, &so)
	if opts.Setup != nil {
		opts.Setup(i, srv)
	}
	ho := opts.HTTP
	ho.NodeID = id
	ho.Backend = backendwrap.Wrap(f.Backend()).(*mcp.Backend)
	if ho.LeaseTTL == 0 {
		ho.LeaseTTL = DefaultLeaseTTL
	}
	if ho.ResumeGrace == 0 {
		ho.ResumeGrace = DefaultResumeGrace
	}
	if ho.Logger == nil && ho.Zerolog == nil {
		l := testLogger(c.T, id)
		ho.Zerolog = &l
	}
	ho.NoAccessLog = true
	h, err := srv.NewHTTPHandler(&ho)
	if err != nil {
		if f.closeOwn != nil {
			_ = f.closeOwn()
		}
		return nil, err
	}
	var served http.Handler = h
	if opts.Wrap != nil {
		served = opts.Wrap(h)
	}
	hs := httptest.NewServer(served)
	return &Node{ID: id, URL: hs.URL + "/mcp", Server: srv, Handler: h, Faults: f, http: hs}, nil
}

// URLs returns the MCP endpoints of the nodes, in order.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL
	}
	return out
}

// Alive reports whether the shared backend holds a membership lease of
// node's process.
func (c *Cluster) Alive(n *Node) bool {
	members, err := c.Backend.Members.Members(context.Background())
	if err != nil {
		c.T.Fatalf("members: %v", err)
	}
	for _, m := range members {
		if len(m) > len(n.ID) && m[:len(n.ID)+1] == n.ID+"." {
			return true
		}
	}
	return false
}

// Cut takes node's bus connection down (see Faults).
func (n *Node) Cut() { n.Faults.Cut() }

// Heal brings node's bus connection back (see Faults).
func (n *Node) Heal(t testing.TB) {
	t.Helper()
	if err := n.Faults.Heal(); err != nil {
		t.Fatal(err)
	}
}

// Kill stops node abruptly: its listener closes and every connection to
// it is cut at once, and from then on it reaches neither the bus nor the
// store, so it cannot record anything, answer anyone or renew its lease
// (which lapses after LeaseTTL). Its handlers keep running in the test
// process, isolated, until the cluster stops.
func (n *Node) Kill() {
	n.killOnce.Do(func() {
		n.Faults.kill()
		_ = n.http.Listener.Close()
		n.http.CloseClientConnections()
	})
}

// stop closes every node (and its own connection), then the cluster's
// backend.
func (c *Cluster) stop() {
	if c.Router != nil {
		c.Router.Close()
	}
	for _, n := range c.Nodes {
		n.http.CloseClientConnections()
		n.Handler.Close()
		n.http.Close()
		n.Faults.late.Wait()
		if n.Faults.closeOwn != nil {
			_ = n.Faults.closeOwn()
		}
	}
	if c.Backend != nil {
		_ = c.Backend.Close()
	}
}

// testLogger routes a component's logs to t.Log (shown for failed
// tests, and with -v).
func testLogger(t testing.TB, name string) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: tlog{t}, NoColor: true}).With().Str("c", name).Logger().Level(zerolog.InfoLevel)
}

type tlog struct{ t testing.TB }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
