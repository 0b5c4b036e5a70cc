package mcp

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/callers"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The per-caller limits at the edge: the caller's key (callerKey), the
// node's ledger of the deployment's limits (package internal/callers,
// kept in the backend's Limiter), and its refusals as answers.

// callerLimits is the node's ledger and what the edge adds to it.
type callerLimits struct {
	*callers.Ledger
	trusted     []netip.Prefix
	log         zerolog.Logger
	proxyWarned atomic.Bool // untrustedProxy warned
}

// callerRefusal turns a refusal of the limits into the node's answer:
// 429 for a caller over a limit, 503 when this node cannot track it;
// other errors as they are.
func callerRefusal(err error) error {
	var r *callers.Refusal
	if !errors.As(err, &r) {
		return err
	}
	if r.Busy {
		return refuse(http.StatusServiceUnavailable, "%s", r.Msg)
	}
	rf := refuse(http.StatusTooManyRequests, "%s", r.Msg)
	rf.after = r.Wait
	return rf
}

// untrustedProxy warns, once per node, when an anonymous request names a
// client in X-Forwarded-For or Forwarded but comes from a peer that is
// not a trusted proxy: every client behind that proxy then counts as
// one caller, the proxy, and they share one caller's limits.
func (c *callerLimits) untrustedProxy(r *http.Request) {
	if r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == "" {
		return
	}
	peer := parseHop(r.RemoteAddr)
	if isTrusted(peer, c.trusted) || !c.proxyWarned.CompareAndSwap(false, true) {
		return
	}
	c.log.Warn().Str("peer", peer.String()).
		Msg("requests arrive through a proxy this node does not trust: every anonymous client behind it counts as one caller for the per-caller limits (--caller-rate, --caller-max-sessions, --caller-max-streams); name the proxy in --trusted-proxies (MCP_TRUSTED_PROXIES)")
}

// limitCaller is the edge step of the request rate: it works out the
// caller's key once (kept in the request's info) and refuses a caller
// over its rate with 429 and Retry-After; it reports whether the request
// may go on.
func (h *HTTPHandler) limitCaller(w http.ResponseWriter, r *http.Request) bool {
	key := callerKey(r, h.callers.trusted)
	if !h.callers.Off() && !h.callers.proxyWarned.Load() && strings.HasPrefix(key, "a:") {
		h.callers.untrustedProxy(r)
	}
	if err := h.callers.Allow(key, time.Now()); err != nil {
		h.writeRefusal(w, jsonrpc.ID{}, callerRefusal(err))
		return false
	}
	noteCaller(r.Context(), key)
	return true
}

// openStream takes a stream place on this node and one of the caller's
// in the deployment, for a stream of session (or none), or refuses.
func (h *HTTPHandler) openStream(r *http.Request, session string) (func(), error) {
	slot, err := h.admit.openStream()
	if err != nil {
		return nil, err
	}
	mine, err := h.callers.OpenStream(r.Context(), callerKey(r, h.callers.trusted), session)
	if err != nil {
		slot()
		return nil, callerRefusal(err)
	}
	return func() { mine(); slot() }, nil
}
