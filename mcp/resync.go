package mcp

import (
	"context"
	"time"
)

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
