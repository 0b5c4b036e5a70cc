package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The end of a POST stream: its final response, which the live
// connection gets even when recording it fails, and is recorded once the
// store answers again.
//
// Recording the stream's history, holding the stream while it is
// produced, recording its final later, and ending resumed streams whose
// producer is gone, are coordinator.Node's (poststream.go, record.go,
// nodeloss.go).

// unrecorded is emit's error when a message could not be appended to the
// stream's history: err (a *coordinator.RecordFailure) says why.
type unrecorded struct {
	data []byte
	err  error
}

func (u *unrecorded) Error() string { return u.err.Error() }
func (u *unrecorded) Unwrap() error { return u.err }

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
		// The node records a final the store refused once it is back,
		// holding the stream meanwhile: resumers wait for it.
		var final []byte
		err := p.emit(context.WithoutCancel(ctx), msg, true, true)
		var u *unrecorded
		if errors.As(err, &u) {
			final, err = u.data, u.err
		}
		if p.prod != nil {
			p.prod.Close(final, err)
		}
		p.mu.Lock()
		if p.closed != nil {
			p.closed()
		}
		p.sw.Close()
		p.mu.Unlock()
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
