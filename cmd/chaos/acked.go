package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
)

// The Sentinel failover that loses acknowledged writes: the replica
// replicates through a proxy that holds the replication stream back for
// a while (a replica far behind), and the primary dies in that window.
// The replica the sentinels promote lacks the writes of the window, those
// the nodes acknowledged to clients among them. A writer creates
// sessions on the nodes throughout, and once the failover settled every
// session whose creation a client was told of is looked up: one the
// cluster no longer knows is an acknowledged write lost. With
// --redis-wait-replicas 1 a creation in the window waits for the replica,
// does not get it, and answers -31000: nothing acknowledged is lost (the
// check fails the scenario otherwise).

func init() {
	scenarios = append(scenarios,
		scenario{"sentinel-lag", "Sentinel failover while the replica's link is held back 2 s (no --redis-wait-replicas): sessions whose creation was acknowledged in that window are lost",
			func(e *env, o *clustertest.Options) { withLaggedSentinels(e, o, false) },
			func(ctx context.Context, e *env) { laggedFailover(ctx, e, false) }},
		scenario{"sentinel-lag-wait", "the same with --redis-wait-replicas 1: a write the replica did not acknowledge answers -31000, and no acknowledged write is lost",
			func(e *env, o *clustertest.Options) { withLaggedSentinels(e, o, true) },
			func(ctx context.Context, e *env) { laggedFailover(ctx, e, true) }},
	)
}

// withLaggedSentinels is withSentinels with the replica's link to the
// primary through a proxy (e.tox, one proxy), and, with wait, the nodes
// waiting for one replica.
func withLaggedSentinels(e *env, o *clustertest.Options, wait bool) {
	o.NodeArgs = func(c *clustertest.Cluster, i int) []string {
		if e.sent == nil {
			e.tox = startToxics(e.h, 1, c.Redis.Addr())
			e.sent = startSentinels(e.h, c.Redis, e.tox.proxies[0].Listen)
		}
		args := []string{"--redis-url", e.sent.url()}
		if wait {
			args = append(args, "--redis-wait-replicas", "1", "--redis-wait-timeout", "500ms")
		}
		return args
	}
}

// laggedFailover holds the replication stream back from 10 s, kills the
// primary 2 s later, and after the failover checks the sessions created.
func laggedFailover(ctx context.Context, e *env, wait bool) {
	w := &sessionWriter{e: e}
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx) }()
	if !sleep(ctx, 10*time.Second) {
		stopWriter()
		wg.Wait()
		return
	}
	e.fault()
	e.tox.add(e.h, `{"name":"hold","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	time.Sleep(2 * time.Second)
	e.sent.primary.Kill()
	e.tox.remove(e.h, "hold")
	time.Sleep(3 * time.Second) // the failover (down-after 2 s) and the writes that fail meanwhile
	stopWriter()
	wg.Wait()
	// The old primary comes back empty and the sentinels make it the new
	// primary's replica: with --redis-wait-replicas 1 writes succeed again
	// once it has synced.
	e.sent.primary.Restart()
	if !sleep(ctx, 15*time.Second) {
		return
	}
	lost := w.check(ctx)
	e.h.Logf("acknowledged sessions: %d created, %d refused while the replica lagged or Redis failed over, %d lost in the failover",
		len(w.acked), w.refused, lost)
	e.mu.Lock()
	e.acked = ackedFigures{created: len(w.acked), refused: w.refused, lost: lost}
	if wait && lost > 0 {
		e.checks = append(e.checks, fmt.Sprintf("%d session(s) acknowledged with --redis-wait-replicas 1 were lost in the failover", lost))
	}
	e.mu.Unlock()
}

// ackedFigures are a lagged failover's: sessions whose creation was
// acknowledged, creations refused, and acknowledged ones lost.
type ackedFigures struct{ created, refused, lost int }

// sessionWriter creates sessions on the nodes, in turn, and keeps the
// ids of those whose creation was acknowledged.
type sessionWriter struct {
	e       *env
	acked   []string
	refused int
}

var initializeBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"acked","version":"1"}}}`)

func (w *sessionWriter) run(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		n := w.e.c.Nodes[i%len(w.e.c.Nodes)]
		status, sid := post(ctx, hc, n.URL, "", initializeBody)
		switch {
		case status == http.StatusOK && sid != "":
			w.acked = append(w.acked, sid)
		case status != 0:
			w.refused++
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// check looks each acknowledged session up (a ping, on any node, tried
// again while the cluster answers 503) and returns how many are gone.
func (w *sessionWriter) check(ctx context.Context) int {
	hc := &http.Client{Timeout: 5 * time.Second}
	ping := []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	lost := 0
	for i, sid := range w.acked {
		n := w.e.c.Nodes[i%len(w.e.c.Nodes)]
		for try := 0; ; try++ {
			status, _ := post(ctx, hc, n.URL, sid, ping)
			if status == http.StatusNotFound {
				lost++
			}
			if status != http.StatusServiceUnavailable && status != 0 || try == 20 || ctx.Err() != nil {
				break
			}
			sleep(ctx, 250*time.Millisecond)
		}
	}
	return lost
}

// post sends one JSON-RPC message and returns the status and the
// session id the answer names (0 when the request failed).
func post(ctx context.Context, hc *http.Client, url, session string, body []byte) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}
