package coordinator_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// With the backend's AppendLinger, a producer's notifications may wait
// for company, but not past an event its caller waits on: a
// server→client request (or the final message) added after them ends
// the wait, so it is recorded at once and the notifications with (or
// before) it, each once, in order.
func TestProducerNotificationsLingerRequestsDoNot(t *testing.T) {
	const linger = 3 * time.Second
	srv := redistest.Start(t)
	be := redisBackend(t, goredis.NewClient(&goredis.Options{Addr: srv.Addr()}), redis.Options{Prefix: "linger", AppendLinger: linger})
	// A long lease: no heartbeat (a script call that does not wait)
	// ends the wait during the test.
	node := startNode(t, be, func(c *coordinator.Config) { c.LeaseTTL = 10 * time.Minute })
	ctx := t.Context()
	const sess = "S1"
	if err := be.Sessions.Create(ctx, sess, nil, time.Minute, 0, cluster.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A notification alone waits for company, up to the linger.
	p := node.Produce(sess, "x1", "n:1", nil)
	start := time.Now()
	done, _ := p.Notify([]byte("n1"), func(uint64, error) {})
	select {
	case <-done:
		t.Fatalf("a lone notification was recorded after %v, before the linger (%v)", time.Since(start), linger)
	case <-time.After(linger / 3):
	}
	// A server→client request after it ends the wait.
	var seqs []uint64
	req, _ := p.Add([]byte("request"), false, func(seq uint64, err error) {
		if err != nil {
			t.Errorf("the request: %v", err)
		}
		seqs = append(seqs, seq)
	})
	select {
	case <-req:
	case <-time.After(linger / 3):
		t.Fatalf("the request waited with the notification (%v since it)", time.Since(start))
	}
	if d := time.Since(start); d >= linger {
		t.Fatalf("the request was recorded %v after the notification: it waited out the linger", d)
	}
	<-done
	final, _ := p.Add([]byte("final"), true, func(seq uint64, err error) { seqs = append(seqs, seq) })
	<-final
	evs, info, err := be.Events.Read(ctx, sess, "x1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, string(ev.Data))
	}
	if len(got) != 3 || got[0] != "n1" || got[1] != "request" || got[2] != "final" || !info.Done {
		t.Fatalf("history %q (done %v), want [n1 request final], done", got, info.Done)
	}
	if len(seqs) != 2 || seqs[0] != 2 || seqs[1] != 3 {
		t.Fatalf("the request and final got seqs %v, want [2 3]", seqs)
	}
}
