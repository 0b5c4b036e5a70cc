package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Through the repository's nginx configuration, with the nodes trusting
// exactly nginx (as compose, scripts/cluster.sh and make chaos run
// them), every anonymous client is a caller of its own: ten clients,
// each with an address of its own on loopback, each make their burst of
// requests unrefused, while one greedy client is held to its share,
// though it names other addresses in X-Forwarded-For. Without the
// forwarded address (or with nginx not trusted) the ten clients would
// be one caller, and most of their requests would be refused.
func TestNginxCountsEachClientAsItsOwnCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, two nodes and nginx")
	}
	const burst = 10
	h := &harness{name: t.Name(), t: t}
	t.Cleanup(h.cleanup)
	c := clustertest.Start(t, clustertest.Options{Nodes: 2, Args: []string{
		"--caller-rate", "1", "--caller-burst", fmt.Sprint(burst), "--trusted-proxies", "127.0.0.1",
	}})
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	ngx := startNginx(h, filepath.Join(moduleRoot(), "deploy/nginx/compose.conf"), addrs)

	// from returns a client whose connections come from 127.0.0.<host>.
	from := func(host int) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}, Timeout: 3 * time.Second}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	}
	// A stateless 2026-07-28 echo, as the chaos load sends it.
	msg, _ := jsonrpc.Request(jsonrpc.IntID(1), "tools/call", map[string]any{
		"name": "echo", "arguments": map[string]any{"text": "hi"}, "_meta": modernMeta(),
	})
	body, cl := encode(msg), &client{url: ngx.url}
	echo := func(hc *http.Client, xff string) int {
		req := cl.newRequest(context.Background(), http.MethodPost, nil, body, "tools/call", "echo")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("echo: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	for i := range 10 {
		hc := from(20 + i)
		for j := range burst {
			if st := echo(hc, ""); st != http.StatusOK {
				t.Fatalf("client 127.0.0.%d, request %d of its burst of %d: %d, want 200 (a caller of its own)", 20+i, j+1, burst, st)
			}
		}
	}
	greedy := from(40)
	ok, refused := 0, 0
	for i := range 6 * burst {
		switch st := echo(greedy, fmt.Sprintf("198.51.100.%d", i+1)); st {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("greedy request %d: %d", i+1, st)
		}
	}
	// Each node admits up to a burst before it hears of the shared debt,
	// and the rate refills one a second.
	if max := len(c.Nodes)*burst + 5; ok > max {
		t.Errorf("the greedy client got %d of %d requests through, want at most %d (its burst on each node)", ok, ok+refused, max)
	}
	t.Logf("greedy client: %d answered, %d refused with 429", ok, refused)
}
