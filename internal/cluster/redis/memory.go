package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Every key of the deployment has a time to live, so a Redis whose
// maxmemory-policy evicts keys with one (volatile-lru, the default of
// the managed services, or any allkeys-* policy) evicts ours first when
// it runs out of memory, and whatever it evicts (a session, a stream's
// history, a claim, a lease, a task) is gone. The backend reads the
// policy of every primary from INFO memory (managed services refuse
// CONFIG GET but answer INFO) at start and every EvictionCheck, and
// Redis's evicted_keys from INFO stats.

// Eviction is what a node does on a Redis whose policy may evict the
// deployment's keys.
type Eviction string

const (
	// EvictionUnready logs a warning and fails readiness with the
	// policy as the reason, serving what it is sent: the default.
	EvictionUnready Eviction = "unready"
	// EvictionRefuse refuses to start (New fails), and fails readiness
	// when the policy changes later.
	EvictionRefuse Eviction = "refuse"
	// EvictionAccept logs the warning and stays ready: the operator
	// knows and accepts that keys may be evicted.
	EvictionAccept Eviction = "accept"
)

// DefaultEvictionCheck is how often the policy and evicted_keys are
// read again.
const DefaultEvictionCheck = 15 * time.Second

// ParseEviction checks an Eviction setting ("" is EvictionUnready).
func ParseEviction(s string) (Eviction, error) {
	switch e := Eviction(s); e {
	case "":
		return EvictionUnready, nil
	case EvictionUnready, EvictionRefuse, EvictionAccept:
		return e, nil
	}
	return "", fmt.Errorf("eviction %q: want unready, refuse or accept", s)
}

// ErrEvictionPolicy is New's error under EvictionRefuse when a primary's
// policy may evict the deployment's keys.
var ErrEvictionPolicy = errors.New("redis backend: the maxmemory-policy may evict this deployment's keys (every one has a TTL); set maxmemory-policy noeviction")

// memoryWatch holds what the checks read.
type memoryWatch struct {
	mu         sync.Mutex
	state      cluster.StoreMemory
	read       bool      // a check read the servers
	warned     time.Time // the last warning about evictions
	warnedKeys int64     // evicted_keys then (or at the first check)
	unreadable bool      // the servers refused INFO (told once)
}

// serverMemory is what INFO says of one primary.
type serverMemory struct {
	addr      string
	policy    string
	maxmemory int64
	evicted   int64
}

// evicts reports whether m's policy may evict keys with a TTL: any but
// noeviction, once a maxmemory is set (without one Redis never evicts).
func (m serverMemory) evicts() bool {
	return m.maxmemory > 0 && m.policy != "" && m.policy != "noeviction"
}

// readMemory reads INFO memory and INFO stats of every primary.
func (b *backend) readMemory(ctx context.Context) ([]serverMemory, error) {
	var mu sync.Mutex
	var out []serverMemory
	read := func(ctx context.Context, c *goredis.Client) error {
		m, err := infoMemory(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, m)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := b.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *goredis.Client:
		err = read(ctx, c)
	default:
		return nil, nil // a ring: not read
	}
	var refused goredis.Error
	switch {
	case errors.As(err, &refused) && !goredis.HasErrorPrefix(err, "LOADING"):
		return nil, fmt.Errorf("redis info memory: %w", err)
	case err != nil:
		return nil, b.fail(ctx, "info memory", err)
	}
	return out, nil
}

// infoMemory reads one server's policy, maxmemory and evicted_keys.
func infoMemory(ctx context.Context, c *goredis.Client) (serverMemory, error) {
	m := serverMemory{addr: c.Options().Addr}
	for _, section := range []string{"memory", "stats"} {
		s, err := c.Info(ctx, section).Result()
		if err != nil {
			return m, err
		}
		for _, line := range strings.Split(s, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			switch k {
			case "maxmemory_policy":
				m.policy = v
			case "maxmemory":
				m.maxmemory, _ = strconv.ParseInt(v, 10, 64)
			case "evicted_keys":
				m.evicted, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return m, nil
}

// checkMemory reads the primaries' memory settings, records them, and
// logs a policy that may evict (at start, and when it changes) and
// evictions since the last warning (at most once a minute). At start
// (first) under EvictionRefuse an evicting policy is ErrEvictionPolicy;
// a server that refuses INFO is told of once, and the node goes on.
func (b *backend) checkMemory(ctx context.Context, first bool) error {
	servers, err := b.readMemory(ctx)
	var refused goredis.Error
	switch {
	case errors.As(err, &refused) && !errors.Is(err, cluster.ErrUnavailable):
		// The server answered with an error: INFO is not allowed (an
		// ACL without it, a renamed command). The node runs without
		// knowing the policy, as it did before it checked.
		b.memory.mu.Lock()
		told := b.memory.unreadable
		b.memory.unreadable = true
		b.memory.mu.Unlock()
		if !told {
			b.log.Warn().Err(err).Msg("Redis's maxmemory-policy cannot be read (INFO refused): make sure it is noeviction, or keys of this deployment may be evicted")
		}
		return nil
	case err != nil && first:
		return err
	case err != nil:
		b.log.Debug().Err(err).Msg("memory policy not read")
		return nil
	}
	w := &b.memory
	st := cluster.StoreMemory{Checked: time.Now(), Accepted: b.opts.Eviction == EvictionAccept}
	var evicted int64
	var evicting []string
	for _, s := range servers {
		evicted += s.evicted
		if s.evicts() {
			st.Evicting = true
			st.Policy, st.MaxMemory = s.policy, s.maxmemory
			evicting = append(evicting, s.addr)
		} else if st.Policy == "" {
			st.Policy, st.MaxMemory = s.policy, s.maxmemory
		}
	}
	st.EvictedKeys = evicted
	w.mu.Lock()
	was := w.state.Evicting
	if !w.read || evicted < w.warnedKeys { // the first check, or a server restarted
		w.warnedKeys = evicted
	}
	grown := evicted - w.warnedKeys
	logEvictions := grown > 0 && time.Since(w.warned) >= time.Minute
	if logEvictions {
		w.warned, w.warnedKeys = time.Now(), evicted
	}
	w.state, w.read = st, true
	w.mu.Unlock()
	if st.Evicting && (first || !was) {
		ev := b.log.Error()
		if st.Accepted {
			ev = b.log.Warn()
		}
		ev.Str("maxmemory_policy", st.Policy).Int64("maxmemory", st.MaxMemory).Strs("servers", evicting).Str("eviction", string(b.opts.Eviction)).
			Msg("Redis may evict this deployment's keys: every key has a TTL, so under memory pressure sessions, streams, claims and tasks vanish (calls fail, sessions end); set maxmemory-policy noeviction")
	} else if was && !st.Evicting {
		b.log.Info().Str("maxmemory_policy", st.Policy).Msg("Redis no longer evicts keys")
	}
	if logEvictions {
		b.log.Warn().Int64("evicted_since_last_warning", grown).Int64("evicted_keys", evicted).Str("maxmemory_policy", st.Policy).
			Msg("Redis evicted keys: sessions, streams and tasks of this deployment may be gone")
	}
	if first && st.Evicting && b.opts.Eviction == EvictionRefuse {
		return fmt.Errorf("%w (%s with maxmemory %d on %s)", ErrEvictionPolicy, st.Policy, st.MaxMemory, strings.Join(evicting, ", "))
	}
	return nil
}

// memoryState is Backend.Memory: what the last check read.
func (b *backend) memoryState() cluster.StoreMemory {
	b.memory.mu.Lock()
	defer b.memory.mu.Unlock()
	return b.memory.state
}
