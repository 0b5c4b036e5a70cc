package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Claims live as long as the process holding them. A claim held by a
// connection names the connection by an id that starts with this
// process's instance ("<node>.<incarnation>/<token>", see NewConnID),
// and a reader takes the claim as held only while that instance holds
// its membership lease. The claim's own key thus needs no short TTL and
// no renewal every LeaseTTL/3: it has a long safety TTL (ClaimTTL),
// slid rarely by the node-wide upkeep, and the liveness of every claim
// of a node rests on the node's one membership lease.

// newConnID returns a new connection id of this process: its instance,
// '/', and a random token.
func (n *Node) newConnID() string {
	var b [9]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return n.instance + "/" + base64.RawURLEncoding.EncodeToString(b[:])
}

// LiveNodes returns the number of live processes in the cluster, this
// one included, as this node last saw them.
func (n *Node) LiveNodes() int { return n.members.count() }

// instanceOf returns the instance of a claim's holder, "" when the
// holder does not name one (then only the claim's TTL bounds it).
func instanceOf(holder string) string {
	if i := strings.LastIndexByte(holder, '/'); i > 0 {
		return holder[:i]
	}
	return ""
}

// members is the node's view of the live instances of the cluster,
// reloaded every LeaseTTL/3 (one Members call per LeaseTTL/3 for
// the whole node, however many streams and owners it watches).
type members struct {
	mu   sync.Mutex
	live map[string]bool
	ok   bool // live was refreshed at least once
}

func (m *members) set(nodes []string) {
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n] = true
	}
	m.mu.Lock()
	m.live, m.ok = live, true
	m.mu.Unlock()
}

// add records instance as live until the next refresh says otherwise,
// and forgets the earlier processes of its node id (see predecessors).
func (m *members) add(instance string) {
	node := NodeOf(instance)
	m.mu.Lock()
	if m.ok {
		for k := range m.live {
			if k != instance && NodeOf(k) == node {
				delete(m.live, k)
			}
		}
		m.live[instance] = true
	}
	m.mu.Unlock()
}

// others returns the live instances other than self.
func (m *members) others(self string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.live))
	for k := range m.live {
		if k != self {
			out = append(out, k)
		}
	}
	return out
}

// count returns the number of live instances (at least 1: this one).
func (m *members) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(1, len(m.live))
}

func (m *members) has(instance string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ok && m.live[instance]
}

// refreshMembers reloads the view of live instances.
func (n *Node) refreshMembers(ctx context.Context) error {
	nodes, err := n.be.Members.Members(ctx)
	if err != nil {
		return err
	}
	n.members.set(nodes)
	return nil
}

// aliveInstance reports whether instance holds its membership lease:
// from the node's view when it lists it (the view is at most LeaseTTL/3
// old, so a lapsed lease is seen within LeaseTTL/3 of lapsing), else from
// the store (an instance that joined since the view was loaded). This
// process is always alive to itself. An instance the store does not
// list is taken for alive when this node's own lease is missing too:
// the leases were lost together (Redis evicted their key, or lost its
// data), and each comes back at its holder's next heartbeat, so the
// store's answer proves nothing about the instance (see trustMembers).
func (n *Node) aliveInstance(ctx context.Context, instance string) (bool, error) {
	if instance == n.instance || n.members.has(instance) {
		return true, nil
	}
	alive, err := n.be.Members.Alive(ctx, instance)
	if err != nil || alive {
		return alive, err
	}
	trusted, err := n.trustMembers(ctx)
	return !trusted, err
}

// trustMembers reports whether the store's membership can tell a lost
// instance: it lists this node's own lease. When the leases vanish
// together (an evicting Redis, one restarted without its data), every
// node looks lost until its next heartbeat, and judging others then
// would end their streams and take over their tasks while they run.
func (n *Node) trustMembers(ctx context.Context) (bool, error) {
	return n.be.Members.Alive(ctx, n.instance)
}

// liveHolder returns the holder of the claim key, or "" when nobody
// holds it or the process of its holder lost its membership lease.
func (n *Node) liveHolder(ctx context.Context, key string) (string, error) {
	holder, live, err := n.claimHolder(ctx, key)
	if err != nil || !live {
		return "", err
	}
	return holder, nil
}

// claimHolder returns the holder of the claim key as the store has it
// ("" when nobody holds it), and whether it lives: its process holds
// its membership lease, or it names none.
func (n *Node) claimHolder(ctx context.Context, key string) (holder string, live bool, err error) {
	holder, err = n.be.Claims.Holder(ctx, key)
	if err != nil || holder == "" {
		return holder, false, err
	}
	inst := instanceOf(holder)
	if inst == "" {
		return holder, true, nil
	}
	live, err = n.aliveInstance(ctx, inst)
	return holder, live && err == nil, err
}

// claimHold is this process's hold on a claim: the claim lives as long
// as the process's membership lease (see liveHolder), its key's safety
// TTL is slid by the node-wide upkeep once taken, and release lets go of
// it (retrying while the store fails). The claim is taken by the store
// with a change that takes it (cluster.TaskStore.Create,
// cluster.TaskUpdate.Take: the store is handed claim, then taken is
// called); a change that releases it (cluster.TaskUpdate.Release) is
// followed by releasedWith.
type claimHold struct {
	n     *Node
	claim cluster.TaskClaim
	h     *held
	done  atomic.Bool // released, here or by a change the store applied
}

// newClaimHold prepares this process's hold on the claim key, not taken
// yet.
func (n *Node) newClaimHold(key string) *claimHold {
	return &claimHold{n: n, claim: cluster.TaskClaim{Key: key, Owner: n.newConnID(), TTL: n.claimTTL()}}
}

// taken starts renewing the claim, which the store now holds. A claim
// lost meanwhile (another process took it) just stops being renewed:
// nothing else holds on to it.
func (c *claimHold) taken() {
	c.h = &held{conn: &Conn{ID: c.claim.Owner, Cancel: func(error) {}}, claim: c.claim.Key}
	c.n.upkeep.add(c.h)
}

// releasedWith records that a change the store applied released the
// claim.
func (c *claimHold) releasedWith() { c.done.Store(true) }

// release stops renewing the claim and releases it, unless a change
// released it already. It may be called after a failed take (the store
// may have taken the claim before it failed).
func (c *claimHold) release() {
	if c.h != nil {
		c.n.upkeep.remove(c.h)
	}
	if c.done.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.n.release(ctx, c.claim.Key, c.claim.Owner)
}
