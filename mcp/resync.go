package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// Messages between nodes travel on the bus, which delivers only to
// nodes connected when they are published. Each message whose loss
// would leave someone waiting is backed by something that does not
// depend on it:
//
//   - a reply to a server→client request: Publish counts its receivers,
//     and a reply its owner did not receive is refused (503 with
//     Retry-After while the owner holds its lease, 410 after), so the
//     client sends it again (reply.go);
//   - "end" (a session was deleted): a node whose bus comes back checks
//     every session it runs requests or holds streams of (resync);
//   - "cancel": the cancellation is also recorded (for HistoryTTL), and
//     a node whose bus comes back checks its running requests (resync);
//   - "getdrop" (the GET stream a request was sent on closed): the
//     waiter also watches the stream's claim, which the holder renews
//     (RequestOnSession);
//   - "takeover": the connection that lost the GET stream fails to renew
//     its claim within LeaseTTL/3 and ends;
//   - "inv": cached sessions are dropped when the bus comes back, and the
//     cache is bypassed while it is down;
//   - "ln" (a notification for listen streams): nothing keeps it, so a
//     node whose bus comes back closes its listen streams without their
//     result, which tells clients to listen again (SPEC §7.3);
//   - follow notifications of a stream: Tail re-reads the history on the
//     reconnect hint and polls it.

// maxCancelKey bounds the request id kept with a recorded cancellation.
const maxCancelKey = 256

// cancelKey names the record of a cancelled request of a session. It is
// not a claim of the session (those are indexed under it until it ends):
// it only expires, after HistoryTTL, so a long session's cancellations
// leave nothing behind.
func cancelKey(sid, id string) string { return "cancelled:" + sid + ":" + id }

// cancelRequest cancels request id of session sid wherever it runs: the
// broadcast reaches the nodes whose bus is up, and the record the others
// when their bus comes back (resync).
func (h *HTTPHandler) cancelRequest(ctx context.Context, sid, id string) {
	if len(id) <= maxCancelKey {
		if _, err := h.be.Claims.Claim(ctx, cancelKey(sid, id), h.instance, h.opts.HistoryTTL); err != nil {
			h.log.Warn().Err(err).Msg("cancellation not recorded")
		}
	}
	if err := h.publish(ctx, coordinator.CancelRequest{Session: sid, ID: id}); err != nil {
		h.log.Warn().Err(err).Msg("cancellation not broadcast")
	}
}

// resync runs when the bus is back after a loss: it catches up, from the
// shared store, on what the messages lost meanwhile would have told this
// node.
func (h *HTTPHandler) resync() {
	h.sessions.Flush()
	h.local.mu.Lock()
	var listens []*listenConn
	for c := range h.local.listens {
		listens = append(listens, c)
	}
	sessions := map[string]struct{}{}
	var requests [][2]string
	for k := range h.local.inflight {
		if k[0] != "" {
			sessions[k[0]] = struct{}{}
			requests = append(requests, k)
		}
	}
	for sid := range h.local.conns {
		sessions[sid] = struct{}{}
	}
	h.local.mu.Unlock()
	for _, c := range listens {
		c.mu.Lock()
		c.abrupt = true
		c.mu.Unlock()
		c.end()
	}
	if len(sessions) == 0 {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		defer cancel()
		ended := map[string]bool{}
		for sid := range sessions {
			if err := h.sessions.Touch(ctx, sid); errors.Is(err, cluster.ErrNotFound) {
				ended[sid] = true
				h.endLocal(sid)
			}
		}
		for _, k := range requests {
			if ended[k[0]] || len(k[1]) > maxCancelKey {
				continue
			}
			holder, err := h.be.Claims.Holder(ctx, cancelKey(k[0], k[1]))
			if err != nil || holder == "" {
				continue
			}
			h.local.mu.Lock()
			cancel := h.local.inflight[k]
			h.local.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}()
}

// watchClaim fails waiter with err once no connection holds the claim
// key, looking every interval until ctx ends. The connection holding a
// stream renews its claim, so the claim lapses when that connection's
// node dies, and no message has to announce it.
func (h *HTTPHandler) watchClaim(ctx context.Context, key string, interval time.Duration, waiter interface{ Fail(error) }, err error) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		holder, herr := h.be.Claims.Holder(ctx, key)
		if herr == nil && holder == "" {
			waiter.Fail(err)
			return
		}
		t.Reset(interval)
	}
}
