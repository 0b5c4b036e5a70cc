package mcp

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// refusal is work a node turns away before running it: the HTTP status
// (503 when the node is full, 429 when one session used its share) and
// the JSON-RPC error of the body. Refusals carry Retry-After.
type refusal struct {
	status int
	err    *jsonrpc.Error
	after  time.Duration // Retry-After; 0: HTTPOptions.RetryHint
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, err: jsonrpc.NewError(jsonrpc.CodeUnavailable, fmt.Sprintf(format, args...), nil)}
}

// limits admits work on one node: handler slots for the node and for
// each session, a budget of request bytes in flight, and open streams.
// It is safe for concurrent use.
type limits struct {
	o *HTTPOptions

	mu       sync.Mutex
	handlers int
	shares   map[string]int // session → handlers running
	bytes    int64
	streams  int
}

func newLimits(o *HTTPOptions) *limits {
	return &limits{o: o, shares: map[string]int{}}
}

// ticket is what one POST holds: body bytes and handler slots. release
// gives everything back once; a handler that outlives its response takes
// the ticket over with handOver.
type ticket struct {
	l      *limits
	bytes  int64
	share  string
	n      int
	handed atomic.Bool
	once   sync.Once
}

// reserve takes n bytes of the in-flight budget for a body about to be
// read, or refuses.
func (l *limits) reserve(n int64) (*ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bytes+n > l.o.MaxInflightBytes {
		return nil, refuse(http.StatusServiceUnavailable, "this node holds as many request bytes as it may (%d); retry shortly", l.o.MaxInflightBytes)
	}
	l.bytes += n
	return &ticket{l: l, bytes: n}, nil
}

// shrink returns the part of the reservation the body did not use.
func (t *ticket) shrink(used int64) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	if used < t.bytes {
		t.l.bytes -= t.bytes - used
		t.bytes = used
	}
}

// admit takes n handler slots for session (empty: no session share), or
// refuses: 503 when the node is full, 429 when the session's share is.
func (t *ticket) admit(session string, n int) error {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handlers+n > l.o.MaxHandlers {
		return refuse(http.StatusServiceUnavailable, "this node runs as many requests as it may (%d); retry shortly", l.o.MaxHandlers)
	}
	if session != "" && l.shares[session]+n > l.o.MaxSessionHandlers {
		return refuse(http.StatusTooManyRequests, "this session runs as many requests on this node as it may (%d); wait for some to finish", l.o.MaxSessionHandlers)
	}
	l.handlers += n
	if session != "" {
		l.shares[session] += n
	}
	t.share, t.n = session, n
	return nil
}

// handOver moves the ticket to a handler that outlives the response:
// release no longer frees it, the returned function does.
func (t *ticket) handOver() func() {
	t.handed.Store(true)
	return func() { t.once.Do(t.settle) }
}

// release frees the ticket unless it was handed over.
func (t *ticket) release() {
	if !t.handed.Load() {
		t.once.Do(t.settle)
	}
}

func (t *ticket) settle() {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bytes -= t.bytes
	l.handlers -= t.n
	if t.share != "" {
		if l.shares[t.share] -= t.n; l.shares[t.share] <= 0 {
			delete(l.shares, t.share)
		}
	}
}

// openStream takes one of the node's open-stream slots, or refuses.
func (l *limits) openStream() (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams >= l.o.MaxOpenStreams {
		return nil, refuse(http.StatusServiceUnavailable, "this node has as many open streams as it may (%d); retry shortly", l.o.MaxOpenStreams)
	}
	l.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.streams--
			l.mu.Unlock()
		})
	}, nil
}

// usage reports the handlers running, the bytes held and the streams
// open (for metrics and tests).
func (l *limits) usage() (handlers int, bytes int64, streams int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handlers, l.bytes, l.streams
}

// writeRefusal answers work the node turned away: its status, a
// Retry-After of the refusal's wait, or else of the retry hint (at least
// a second), and the JSON-RPC error.
func (h *HTTPHandler) writeRefusal(w http.ResponseWriter, id jsonrpc.ID, err error) {
	var rf *refusal
	if !errors.As(err, &rf) {
		writeError(w, statusOf(err, false), id, rpcError(err))
		return
	}
	after := h.opts.RetryHint
	if rf.after > 0 {
		after = rf.after
	}
	secs := int(math.Ceil(after.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeError(w, rf.status, id, rf.err)
}

// bodyDeadline bounds the arrival of a request's body by
// BodyReadTimeout. It is set before anything else: a request answered
// early (refused) has its unread body discarded by the server, which
// must not wait for a body that stalls either. readBody lifts it once
// the body is in, so that a response streamed afterwards, and the
// server's watch for the client going away, are not cut. A
// ResponseWriter that cannot set deadlines reads unbounded.
func (h *HTTPHandler) bodyDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.opts.BodyReadTimeout))
}

// readBody reads a POST body within MaxBodyBytes and BodyReadTimeout,
// holding its bytes in the node's budget; the ticket it returns is
// released by the caller (or handed to the handler). When the body
// cannot be had it writes the answer: 503 when the budget is spent,
// 413 too large, 408 too slow.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *ticket, bool) {
	need := r.ContentLength
	if need < 0 || need > h.opts.MaxBodyBytes {
		need = h.opts.MaxBodyBytes
	}
	tk, err := h.admit.reserve(need)
	if err != nil {
		h.writeRefusal(w, jsonrpc.ID{}, err)
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		// The deadline stays: the server must not wait for the rest of
		// a stalled body before it closes the connection.
		tk.release()
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "body exceeds %d bytes", h.opts.MaxBodyBytes))
		case errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the request body did not arrive within %v", h.opts.BodyReadTimeout))
		default:
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "reading body: %v", err))
		}
		return nil, nil, false
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	tk.shrink(int64(len(body)))
	return body, tk, true
}

// errStalled ends a stream whose client stopped reading it (or left).
var errStalled = errors.New("mcp: a write to the stream failed or blocked past StreamWriteTimeout")

// sseWriter returns an SSE writer on w with the handler's write timeout
// and keep-alive interval; onFail runs when a write fails.
func (h *HTTPHandler) sseWriter(w http.ResponseWriter, onFail func()) *sse.Writer {
	return sse.NewWriter(w, sse.WriterOptions{WriteTimeout: h.opts.StreamWriteTimeout, KeepAlive: h.opts.KeepAlive, OnFail: onFail})
}
