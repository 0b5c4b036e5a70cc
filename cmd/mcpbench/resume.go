package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// What --resume-cut and --check-sessions add for runs with a fault: a
// stream that a dying server (or the proxy in front of it) cuts before
// the response is resumed with GET + Last-Event-ID, as a client would;
// and at the end every session is probed, to count those the server
// lost. Their counters cover the whole run, warm-up included, so that
// every cut stream is counted once as resumed or lost.

// resumeRetry is the pause between attempts to resume a cut stream.
const resumeRetry = 100 * time.Millisecond

// isCut tells a call's SSE stream that ended before its response — the
// connection closed or was reset — from every other failure (a
// callback's error, a JSON-RPC error, an HTTP status).
func isCut(ex *exchange, err error) bool {
	var ce *bench.ClassError
	if err == nil || ex == nil || !ex.sse || ex.final != nil || errors.Is(err, errCut) || errors.As(err, &ce) {
		return false
	}
	switch bench.Kind(err) {
	case "eof", "conn_reset", "broken_pipe":
		return true
	}
	return false
}

// callResuming is a tools/call on the worker's session; with
// --resume-cut a stream cut before the response is resumed on url
// (through a balancer: wherever it routes the session) from its last
// event id, again after each new cut, until the response or the
// operation's deadline. A stream that cannot be resumed — no event id,
// the server answers 4xx (session or stream unknown), the deadline
// passes — fails the operation with class stream_lost.
func (w *worker) callResuming(ctx context.Context, url string, id int64, body []byte, name string, onMsg func(incoming) error) (*exchange, error) {
	r, cl := w.r, w.r.cl
	ex, err := cl.call(ctx, url, w.sess, id, body, "tools/call", name, onMsg)
	if !r.cfg.resumeCut || !isCut(ex, err) {
		return ex, err
	}
	r.count("streams_cut", 1, true)
	lost := func(err error) (*exchange, error) {
		r.count("streams_lost", 1, true)
		return ex, &bench.ClassError{Class: "stream_lost", Err: fmt.Errorf("stream cut and not resumed: %w", err)}
	}
	for {
		if ex.lastID == "" {
			return lost(bench.Errorf("no_event_id", "cut before any event id: %v", err))
		}
		resp, gerr := cl.openGet(ctx, url, w.sess, ex.lastID)
		if gerr != nil {
			if !retryable(ctx, gerr) {
				return lost(fmt.Errorf("resuming GET: %w", gerr))
			}
			time.Sleep(resumeRetry)
			continue
		}
		err = readStreamUntil(resp.Body, id, ex, onMsg)
		resp.Body.Close()
		if ex.final != nil {
			r.count("streams_resumed", 1, true)
			return ex, err
		}
		if !isCut(ex, err) || ctx.Err() != nil {
			return lost(err)
		}
	}
}

// retryable: an attempt to resume failed in a way worth another try
// (a server error, a proxy without a live node, a refused or dropped
// connection) and the operation has time left.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *bench.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	}
	return bench.Class(err) == "node_lost"
}

// reopenGet resumes a session's GET stream cut at lastID (from its
// start when it had no event id), retrying like callResuming for up to
// the operation timeout; nil when it could not.
func (w *worker) reopenGet(ctx context.Context, lastID string) io.ReadCloser {
	r, cl := w.r, w.r.cl
	r.count("get_streams_cut", 1, true)
	octx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	for {
		// The stream outlives this function: its request has ctx.
		resp, err := cl.openGet(ctx, cl.urls[cl.pick()], w.sess, lastID)
		if err == nil {
			r.count("get_streams_resumed", 1, true)
			return resp.Body
		}
		if !retryable(octx, err) {
			if ctx.Err() == nil {
				r.count("get_streams_lost", 1, true)
			}
			return nil
		}
		time.Sleep(resumeRetry)
	}
}

// checkSession pings a session at the end of a run (--check-sessions):
// sessions_alive when it answers, sessions_lost when the server no
// longer knows it (404), sessions_unchecked otherwise.
func (r *runner) checkSession(ctx context.Context, url string, s *session) {
	cl := r.cl
	id := s.newID()
	_, err := cl.call(ctx, url, s, id, cl.requestBody(id, "ping", nil, nil), "ping", "", nil)
	switch {
	case err == nil:
		r.count("sessions_alive", 1, true)
	case bench.Class(err) == "session_not_found":
		r.count("sessions_lost", 1, true)
	default:
		r.count("sessions_unchecked", 1, true)
	}
}
