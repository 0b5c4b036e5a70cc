package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// The end of a POST stream: its final response, which the live
// connection gets even when recording it fails, and is recorded once the
// store answers again.
//
// A POST stream is held by its producer: a claim renewed while the
// request runs and until its final response is recorded. A node that
// follows the stream for a resumed connection ends it with an error for
// the request when its producer lets the claim lapse (it gave up
// recording, its process died or was restarted under the same node id),
// so no resumed stream waits for an end that nobody will append.

// produceKey names the claim of the producer of a POST stream. Stream
// ids are unique in the deployment, and the claim outside the session's
// namespace needs no release: it lapses within LeaseTTL of its last
// renewal, and after the final is recorded nobody asks for it.
func produceKey(stream string) string { return "produce:" + stream }

// holdStream claims the production of stream and renews the claim every
// LeaseTTL/3 (retrying sooner while the store fails, taking the claim
// back if it lapsed meanwhile) until the returned function is called.
func (h *HTTPHandler) holdStream(ctx context.Context, stream string) (func(), error) {
	key, holder := produceKey(stream), h.instance+"/"+randomToken(9)
	if _, err := h.be.Claims.Claim(ctx, key, holder, h.opts.LeaseTTL); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := h.opts.LeaseTTL / 3
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			ok, err := h.be.Claims.Renew(hctx, key, holder, h.opts.LeaseTTL)
			if err == nil && !ok {
				_, err = h.be.Claims.Claim(hctx, key, holder, h.opts.LeaseTTL)
			}
			if err != nil {
				t.Reset(min(every, 100*time.Millisecond))
				continue
			}
			t.Reset(every)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// recordLater appends a final message the store refused, retrying with
// backoff for up to RecordTimeout (and while the node runs); unhold is
// called at the end, so the stream's claim lapses if the final never
// made it. A store that answers with anything but ErrUnavailable (the
// stream ended, expired or its session is gone) ends the attempts.
// A drain waits for it like for a running request; the session's end
// stops it.
func (h *HTTPHandler) recordLater(session, stream string, data []byte, unhold func()) {
	ctx, cancel := context.WithTimeout(h.ctx, h.opts.RecordTimeout)
	removeInflight := h.node.Local.AddInflight(session, "record:"+stream, cancel)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer unhold()
		defer removeInflight()
		defer cancel()
		wait := 50 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				h.log.Warn().Str("session", telemetry.SessionTag(session)).Str("stream", stream).Msg("final response not recorded: gave up; resumers get an error")
				return
			case <-time.After(wait):
			}
			_, err := h.be.Events.Append(ctx, session, stream, data, true, h.lim)
			if err == nil {
				h.log.Info().Str("session", telemetry.SessionTag(session)).Str("stream", stream).Msg("final response recorded after a store outage")
				return
			}
			if !errors.Is(err, cluster.ErrUnavailable) {
				if ctx.Err() == nil {
					h.log.Warn().Err(err).Str("stream", stream).Msg("final response not recorded")
				}
				return
			}
			wait = min(2*wait, time.Second)
		}
	}()
}

// abandonedError ends a resumed stream whose producer stopped holding it.
func abandonedError(id jsonrpc.ID, owner string) *jsonrpc.Message {
	return jsonrpc.ErrorResponse(id, jsonrpc.NewError(jsonrpc.CodeNodeLost,
		"the node running this request stopped before its response was recorded; retry it",
		map[string]any{"node": owner}))
}

// unrecorded is emit's error when a message could not be appended to the
// stream's history: err for the client, cause from the backend.
type unrecorded struct {
	data       []byte
	err, cause error
}

func (u *unrecorded) Error() string { return u.err.Error() }
func (u *unrecorded) Unwrap() error { return u.err }

// finish sends the final response: the terminating SSE event, or a JSON
// body (406 when the response needed a stream the client refused).
func (p *postOut) finish(ctx context.Context, res json.RawMessage, err error) {
	p.h.observe(p.req, res, err, time.Since(p.start))
	var msg *jsonrpc.Message
	if err != nil {
		msg = jsonrpc.ErrorResponse(p.req.id, rpcError(err))
	} else {
		msg = &jsonrpc.Message{ID: p.req.id, Result: res}
	}
	p.mu.Lock()
	upgraded, refused := p.sw != nil, p.refused
	p.mu.Unlock()
	if upgraded {
		unhold := p.unhold
		if err := p.emit(context.WithoutCancel(ctx), msg, true); err != nil {
			var u *unrecorded
			if errors.As(err, &u) && errors.Is(u.cause, cluster.ErrUnavailable) {
				// Resumers wait for the final: record it once the
				// store is back, holding the stream meanwhile.
				p.h.recordLater(p.session, p.stream, u.data, unhold)
				unhold = nil
			} else {
				p.h.log.Warn().Err(err).Str("session", telemetry.SessionTag(p.session)).Msg("final response not recorded")
			}
		}
		p.mu.Lock()
		if p.stopKeep != nil {
			p.stopKeep()
		}
		if p.unlist != nil {
			p.unlist()
		}
		if p.closed != nil {
			p.closed()
		}
		p.sw.close()
		p.mu.Unlock()
		if unhold != nil {
			unhold()
		}
		return
	}
	if refused {
		writeError(p.w, http.StatusNotAcceptable, p.req.id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "this response needs text/event-stream, which the client's Accept excludes"))
		return
	}
	status := http.StatusOK
	if err != nil {
		status = statusOf(err, p.req.modern)
	}
	b, _ := jsonrpc.Encode(msg)
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(status)
	_, _ = p.w.Write(b)
}
