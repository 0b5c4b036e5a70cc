package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// A heartbeat that failed is tried again within heartbeatRetry, not at
// the next LeaseTTL/3: a store back in a moment (a Redis Cluster whose
// replica took over) renews the lease before it runs out.
func TestHeartbeatRetriedSoonAfterAFailure(t *testing.T) {
	be, down := failing(t, "Members.Heartbeat")
	beats := &beatTimes{Membership: be.Members}
	be.Members = beats
	const lease = 3 * time.Second // renewed every second
	startNode(t, be, func(c *coordinator.Config) { c.LeaseTTL = lease })
	down.Store(true)
	time.Sleep(lease/3 + 200*time.Millisecond) // the renewal due at one second fails
	down.Store(false)
	back := time.Now()
	deadline := back.Add(lease / 3)
	for beats.last().Before(back) {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within %v of the store's return", lease/3)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := beats.last().Sub(back); took > 400*time.Millisecond {
		t.Errorf("the lease was renewed %v after the store came back, want within the retry (250ms)", took)
	}
}

// beatTimes records when a heartbeat last got through.
type beatTimes struct {
	cluster.Membership
	mu sync.Mutex
	at time.Time
}

func (b *beatTimes) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	err := b.Membership.Heartbeat(ctx, node, ttl)
	if err == nil {
		b.mu.Lock()
		b.at = time.Now()
		b.mu.Unlock()
	}
	return err
}

func (b *beatTimes) last() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at
}
