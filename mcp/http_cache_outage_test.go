package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

var echoCallBody = []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)

// With the session cache on (the default), the request right after
// redis-server dies is refused with 503 on a node that has the session
// cached and answers the tool without the store: the check before each
// answer from a copy looks at the bus connection's socket, so it does
// not wait for the node to notice the loss.
func TestSessionCacheRefusesRightAfterRedisDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	for i := range 6 {
		srv := redistest.Start(t)
		n := newRedisRoundTripNode(t, srv.URL(), mcp.HTTPOptions{LeaseTTL: time.Minute})
		hdr := n.initialize(t)
		for range 20 { // warm: the copy answers, the bus proven current
			n.call(t, hdr)
			time.Sleep(time.Millisecond)
		}
		srv.Kill()
		rec := n.post(echoCallBody, hdr)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("round %d: tools/call right after redis-server died: %d %s, want 503", i, rec.Code, rec.Body)
		}
	}
}

// A node whose Redis connection stalls without closing (a partition: no
// FIN, no RST; toxiproxy drops every byte both ways) stops answering
// from its session cache within cluster.BusFresh, although it has not
// noticed the loss (its health probe takes twice PingInterval): the
// request reads the store and fails.
func TestSessionCacheStopsWithinFreshOnSilentStall(t *testing.T) {
	srv := redistest.Start(t)
	p := redisProxy(t, srv)
	t.Cleanup(p.Stop)
	n := newRedisRoundTripNode(t, "redis://"+p.Listen, mcp.HTTPOptions{LeaseTTL: time.Minute})
	hdr := n.initialize(t)
	for range 20 {
		n.call(t, hdr)
		time.Sleep(time.Millisecond)
	}
	for _, dir := range []string{"upstream", "downstream"} {
		spec := `{"name":"stall_` + dir + `","type":"timeout","stream":"` + dir + `","attributes":{"timeout":0}}`
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(cluster.BusFresh)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(echoCallBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK && !strings.Contains(rec.Body.String(), `"error"`) {
		t.Errorf("tools/call %v after the connection stalled: answered from the cache: %d %s", cluster.BusFresh, rec.Code, rec.Body)
	}
	t.Logf("tools/call after the stall: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	p.Toxics.ResetToxics(t.Context())
}
