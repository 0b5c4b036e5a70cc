package mcp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// TestRedisRoundTripsPerSessionLife counts the round trips of a whole
// 2025-11-25 session on one node on Redis, as the churn benchmark runs
// it: initialize, notifications/initialized, one tools/call and DELETE,
// with the per-caller limits on, each step counted on its own. The
// caller's session lease is taken in the script that creates the
// session and released in the one that ends it, so initialize and
// DELETE cost one each; notifications/initialized and the call load the
// session (one each) unless the node has it cached, which it has from
// initialize on (session.Store.Create keeps what it wrote).
func TestRedisRoundTripsPerSessionLife(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name     string
		cacheTTL time.Duration
		max      float64
	}{
		{"uncached", 0, 4},
		{"cached", time.Hour, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newRedisRoundTripNode(t, srv.URL(), mcp.HTTPOptions{SessionCacheTTL: c.cacheTTL, NoSessionCache: c.cacheTTL == 0, LeaseTTL: time.Minute})
			n.sessionLife(t, n.initialize(t)) // warms the scripts
			var hdrs []map[string]string
			var total float64
			var debits int64
			step := func(name string, f func(i int)) {
				i := 0
				per, d := roundTripsPerCall(t, srv.URL(), func() { f(i); i++ })
				t.Logf("%s: %.2f round trips", name, per)
				total += per
				debits += d
			}
			step("initialize", func(int) { hdrs = append(hdrs, n.initialize(t)) })
			step("notifications/initialized", func(i int) { n.initialized(t, hdrs[i]) })
			step("tools/call", func(i int) { n.call(t, hdrs[i]) })
			step("DELETE", func(i int) { n.delete(t, hdrs[i]) })
			t.Logf("%s: %.2f round trips per session life", c.name, total)
			if total > c.max+float64(4*2+debits)/roundTripCalls {
				t.Errorf("got %.2f round trips per session life, want at most %v", total, c.max)
			}
		})
	}
}

func (n roundTripNode) sessionLife(t *testing.T, hdr map[string]string) {
	t.Helper()
	n.initialized(t, hdr)
	n.call(t, hdr)
	n.delete(t, hdr)
}

func (n roundTripNode) initialized(t *testing.T, hdr map[string]string) {
	t.Helper()
	if rec := n.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), hdr); rec.Code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", rec.Code, rec.Body)
	}
}

func (n roundTripNode) delete(t *testing.T, hdr map[string]string) {
	t.Helper()
	if rec := n.del(hdr); rec.Code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
}
