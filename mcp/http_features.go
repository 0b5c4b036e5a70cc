package mcp

import (
	"context"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
)

// The enabled state of features as cluster state (see Server.SetEnabled):
// the handler keeps it in the backend's Registry, tells every node with a
// "reg" bus message, and reloads it on that message, after a bus
// reconnect and on every heartbeat, so a lost message delays a node by
// one heartbeat at most.

// setFeature records the state and tells every node.
func (h *HTTPHandler) setFeature(ctx context.Context, key string, on bool) (bool, error) {
	changed, err := h.be.Registry.Set(ctx, key, on)
	if err != nil {
		return false, rpcError(err)
	}
	if changed {
		if err := h.publish(ctx, coordinator.RegistryChanged{}); err != nil {
			h.log.Warn().Err(err).Msg("feature change not broadcast; nodes see it at their next heartbeat")
		}
	}
	return changed, nil
}

// loadFeatures reads the shared state into the server.
func (h *HTTPHandler) loadFeatures(ctx context.Context) {
	all, err := h.be.Registry.All(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("loading the enabled state of features failed")
		}
		return
	}
	h.srv.setSharedFeatures(all)
}

// reloadFeatures asks the heartbeat loop to reload the state soon; it
// never blocks (bus callbacks call it).
func (h *HTTPHandler) reloadFeatures() {
	select {
	case h.reload <- struct{}{}:
	default: // a reload is already due
	}
}

// fanOutLimiter bounds the fan-outs of one node: at most max run at once,
// and one waiting per notification (method and uri): a change arriving
// while the same notification waits for its turn is already covered by
// it, since a fan-out reads the session list when it starts. At most
// maxWaiting distinct notifications wait; past that, more are dropped
// (and counted).
type fanOutLimiter struct {
	slots      chan struct{}
	maxWaiting int

	mu      sync.Mutex
	waiting map[[2]string]bool
}

func newFanOutLimiter(running, waiting int) *fanOutLimiter {
	return &fanOutLimiter{slots: make(chan struct{}, running), maxWaiting: waiting, waiting: map[[2]string]bool{}}
}

// enter reports whether a fan-out of (method, uri) should be started:
// false when the same one already waits, or too many wait.
func (l *fanOutLimiter) enter(method, uri string) bool {
	k := [2]string{method, uri}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting[k] || len(l.waiting) >= l.maxWaiting {
		return false
	}
	l.waiting[k] = true
	return true
}

// acquire waits for a slot; the fan-out then no longer counts as waiting.
func (l *fanOutLimiter) acquire(ctx context.Context, method, uri string) bool {
	defer func() {
		l.mu.Lock()
		delete(l.waiting, [2]string{method, uri})
		l.mu.Unlock()
	}()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *fanOutLimiter) release() { <-l.slots }

// fanOutTimeout bounds one fan-out.
const fanOutTimeout = time.Minute
