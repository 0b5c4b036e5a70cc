package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The upgrade scenario: the three nodes start as the previous release
// (cmd/server built from the previous release's commit, -previous), each
// is drained and replaced by this tree's build with its id (a rolling
// upgrade, nginx following /readyz as an ingress follows endpoints),
// then each is replaced by the previous release again (the downgrade).
// While both releases run, the client aims the second leg of its
// exchanges at a node of the other release than the first: the reply to
// a sampling request goes to a node of the other release than the one
// waiting for it, an MRTR call's second round to another release than
// its first, a task is read to its result on another release than the
// one that created it (tasks.go), and a session changed on one release
// is used on the other right after (changes.go).

// Release labels.
const (
	relPrevious = "previous"
	relThis     = "this"
)

// releases knows which release each node runs and which nodes take
// requests (ready, in nginx's upstreams).
type releases struct {
	mu    sync.Mutex
	of    map[string]string // node id → release
	url   map[string]string // node id → MCP endpoint
	ready map[string]bool
}

func newReleases(c *clustertest.Cluster, rel string) *releases {
	r := &releases{of: map[string]string{}, url: map[string]string{}, ready: map[string]bool{}}
	for _, n := range c.Nodes {
		r.of[n.ID], r.url[n.ID], r.ready[n.ID] = rel, n.URL, true
	}
	return r
}

// set records that node id runs release rel and whether it takes
// requests.
func (r *releases) set(id, rel string, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rel != "" {
		r.of[id] = rel
	}
	r.ready[id] = ready
}

// release is the release node id runs.
func (r *releases) release(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.of[id]
}

// pick returns a ready node, of another release than not when there is
// one (then other is true); "" when no node is ready.
func (r *releases) pick(not string) (id, rel string, other bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var same, diff []string
	for n, ok := range r.ready {
		switch {
		case !ok:
		case r.of[n] != not:
			diff = append(diff, n)
		default:
			same = append(same, n)
		}
	}
	if len(diff) > 0 {
		n := diff[rand.IntN(len(diff))]
		return n, r.of[n], true
	}
	if len(same) > 0 {
		n := same[rand.IntN(len(same))]
		return n, r.of[n], false
	}
	return "", "", false
}

// at returns a client of the same load that sends to node id directly
// (the balancer's when id is empty).
func (c *client) at(id string) *client {
	if id == "" || c.rel == nil {
		return c
	}
	d := *c
	d.rel.mu.Lock()
	d.url = c.rel.url[id]
	d.rel.mu.Unlock()
	return &d
}

// ownerNode is the node id in a server→client request id minted by a
// node ("c.<node>.<incarnation>.<random>"), "" for another id.
func ownerNode(id jsonrpc.ID) string {
	if !id.IsString() {
		return ""
	}
	parts := strings.Split(id.Str(), ".")
	if len(parts) < 4 || parts[0] != "c" {
		return ""
	}
	return parts[1]
}

// crossKey names a direction across releases: "previous→this".
func crossKey(from, to string) string { return from + "→" + to }

// crossStats count the exchanges whose two legs ran on different
// releases, by direction, and how many of them were answered.
type crossStats struct {
	replies, repliesOK map[string]int // sampling replies: waiting node's release → receiving node's
	mrtr, mrtrOK       map[string]int // MRTR: first round's release → second round's
	tasks, tasksOK     map[string]int // tasks: creating node's release → reading node's
	changes, changesOK map[string]int // session changes: changing node's release → next request's
}

func newCrossStats() crossStats {
	return crossStats{replies: map[string]int{}, repliesOK: map[string]int{}, mrtr: map[string]int{}, mrtrOK: map[string]int{},
		tasks: map[string]int{}, tasksOK: map[string]int{}, changes: map[string]int{}, changesOK: map[string]int{}}
}

// describe is the per-scenario line of the report.
func (cs crossStats) describe() string {
	both := func(n, ok map[string]int) string {
		var p []string
		for _, k := range []string{crossKey(relPrevious, relThis), crossKey(relThis, relPrevious)} {
			p = append(p, fmt.Sprintf("%s %d/%d", k, ok[k], n[k]))
		}
		return strings.Join(p, ", ")
	}
	return fmt.Sprintf("across releases (answered/sent): sampling replies %s; MRTR second rounds %s; tasks read to their result %s; session changes (setLevel, DELETE) seen by the next request %s",
		both(cs.replies, cs.repliesOK), both(cs.mrtr, cs.mrtrOK), both(cs.tasks, cs.tasksOK), both(cs.changes, cs.changesOK))
}

// failures lists what breaks the promise across releases: an exchange
// across releases that was not answered, or a direction never tried.
func (cs crossStats) failures() []string {
	var out []string
	for _, c := range []struct {
		what  string
		n, ok map[string]int
	}{{"sampling replies", cs.replies, cs.repliesOK}, {"MRTR second rounds", cs.mrtr, cs.mrtrOK}, {"tasks", cs.tasks, cs.tasksOK}, {"session changes", cs.changes, cs.changesOK}} {
		for _, k := range []string{crossKey(relPrevious, relThis), crossKey(relThis, relPrevious)} {
			switch {
			case c.n[k] == 0:
				out = append(out, fmt.Sprintf("no %s %s", c.what, k))
			case c.ok[k] < c.n[k]:
				out = append(out, fmt.Sprintf("%s %s: %d of %d not answered", c.what, k, c.n[k]-c.ok[k], c.n[k]))
			}
		}
	}
	return out
}

// upgrade replaces every node by this build, then by the previous
// release again, spreading the six replacements over the load.
func upgrade(ctx context.Context, e *env) {
	deadline, _ := ctx.Deadline()
	if !sleep(ctx, 5*time.Second) {
		return
	}
	this := clustertest.Binary(e.h)
	steps := 2 * len(e.c.Nodes)
	// A replacement takes about 4 s (drain delay, in-flight calls, the
	// start); the rest of the load is spread between them.
	gap := max(time.Second, (time.Until(deadline)-3*time.Second)/time.Duration(steps)-4*time.Second)
	for step := range steps {
		i := step % len(e.c.Nodes)
		bin, rel := this, relThis
		if step >= len(e.c.Nodes) {
			bin, rel = e.cfg.previous, relPrevious
		}
		e.fault()
		began := time.Now()
		cycle(e, i, true, func(n *clustertest.Node) {
			n.RestartWith(bin)
			e.rel.set(n.ID, rel, false)
		})
		what := map[string]string{relThis: "this build", relPrevious: "the previous release"}[rel]
		e.h.Logf("%s: %s runs %s, from %s (drained, replaced and ready in %s)", e.h.name, e.c.Nodes[i].ID, what,
			began.Format("15:04:05.000"), time.Since(began).Round(100*time.Millisecond))
		e.mu.Lock()
		e.steps++
		e.mu.Unlock()
		if step == len(e.c.Nodes)-1 && e.c.Redis.Cluster() {
			e.sharded = waitSharded(e, 3*time.Second)
		}
		if step < steps-1 && !sleep(ctx, gap) {
			return
		}
	}
}

// upgradeSetup starts the nodes as the previous release.
func upgradeSetup(e *env, o *clustertest.Options) {
	if e.cfg.previous == "" {
		e.h.Fatalf("the upgrade scenario needs -previous: cmd/server of the previous release (scripts/previous.sh builds it)")
	}
	o.Binary = e.cfg.previous
}

// onCluster runs the cluster's Redis as a one-node Redis Cluster, which
// the nodes reach as a Cluster (the sharded pub/sub code paths).
func onCluster(o *clustertest.Options) {
	o.RedisOptions.Cluster = true
	o.NodeArgs = func(c *clustertest.Cluster, i int) []string {
		return []string{"--redis-url", "redis-cluster://" + c.Redis.Addr()}
	}
}

// waitSharded waits up to d for every node holding a membership lease
// to be among the nodes that read sharded channels, the set the nodes'
// publish mode follows (internal/cluster/redis, sharded.go): then they
// publish sharded within a second.
func waitSharded(e *env, d time.Duration) bool {
	rc := goredis.NewClient(&goredis.Options{Addr: e.c.Redis.Addr()})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		now, err := rc.Time(ctx).Result()
		if err == nil {
			since := func(key string) ([]string, error) {
				return rc.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: key, ByScore: true, Start: strconv.FormatInt(now.UnixMilli(), 10), Stop: "+inf"}).Result()
			}
			live, err1 := since("mcp:nodes")
			readers, err2 := since("{mcp:nodes}:sharded")
			if err1 == nil && err2 == nil && len(live) > 0 && !slices.ContainsFunc(live, func(n string) bool { return !slices.Contains(readers, n) }) {
				e.h.Logf("%s: every live node reads sharded channels: %v", e.h.name, live)
				return true
			}
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

// upgradeFailures is what the upgrade scenario adds to a run's verdict.
func upgradeFailures(e *env, st *stats) []string {
	var out []string
	if e.c.Redis.Cluster() && !e.sharded {
		out = append(out, "with every node on this build, not every live node read sharded channels")
	}
	if want := 2 * len(e.c.Nodes); e.steps < want {
		out = append(out, fmt.Sprintf("the upgrade and downgrade did not finish within the load: %d of %d replacements (use a longer -duration)", e.steps, want))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	out = append(out, st.cross.failures()...)
	if st.tasksFailed > 0 {
		out = append(out, fmt.Sprintf("%d task(s) not read to their result", st.tasksFailed))
	}
	return out
}
