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
// Recording the stream's history, holding the stream while it is
// produced, and ending resumed streams whose producer is gone, are
// coordinator.Node's (record.go, nodeloss.go).

// unrecorded is emit's error when a message could not be appended to the
// stream's history: err for the client, cause from the backend.
type unrecorded struct {
	data       []byte
	err, cause error
}

func (u *unrecorded) Error() string { return u.err.Error() }
func (u *unrecorded) Unwrap() error { return u.err }

// recordError is what a client is told when an event of its stream
// could not be recorded: the cluster's -31000, in its terms.
func recordError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrUnavailable):
		return rpcError(err)
	case errors.Is(err, cluster.ErrDiverged), errors.Is(err, cluster.ErrNotFound):
		return jsonrpc.NewError(jsonrpc.CodeUnavailable, "the shared state lost part of this request's stream (a failover, or the session ended); retry the request", nil)
	}
	return jsonrpc.NewError(jsonrpc.CodeUnavailable, "this request's stream could not be recorded; retry the request", nil)
}

// finish sends the final response: the terminating SSE event, or a JSON
// body (406 when the response needed a stream the client refused).
func (p *postOut) finish(ctx context.Context, res json.RawMessage, err error) {
	if lost := p.lostError(); lost != nil {
		// The stream ended at an event it could not record: the call
		// ends with the cluster's error there, not with what the
		// handler made of it.
		res, err = nil, lost
	}
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
		if err := p.emit(context.WithoutCancel(ctx), msg, true, true); err != nil {
			var u *unrecorded
			if errors.As(err, &u) && errors.Is(u.cause, cluster.ErrUnavailable) {
				// Resumers wait for the final: record it once the
				// store is back, holding the stream meanwhile.
				p.h.node.RecordLater(p.session, p.stream, u.data, unhold, p.h.opts.RecordTimeout)
				unhold = nil
			} else {
				p.h.log.Warn().Err(err).Str("session", telemetry.SessionTag(p.session)).Msg("final response not recorded")
			}
		}
		p.mu.Lock()
		if p.unlist != nil {
			p.unlist()
		}
		if p.closed != nil {
			p.closed()
		}
		p.sw.Close()
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
	if err != nil && writeScopeChallenge(p.w, p.conn, p.req.id, err) {
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
