package mcp

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// The HTTP edge: concerns every request of the MCP endpoint shares,
// each a func(http.Handler) http.Handler, composed in one chain in front
// of the method routing. The endpoint serves SSE streams (GET, and POST
// answers that become streams), so the chain holds no timeout or
// compression middleware: a stream lives as long as its client keeps it,
// and every event must reach the client when it is written.

// edge returns the handler of the MCP endpoint: the edge chain, in the
// order a request crosses it, then route.
func (h *HTTPHandler) edge() http.Handler {
	return chi.Chain(
		h.accessLog, // X-Request-Id, one line per request, and the request's logger
		h.checks,    // the body's deadline, Host, Origin, the caller's rate
	).HandlerFunc(h.route)
}

// checks runs the edge's checks, each of which may answer the request
// (then the request goes no further), in one step of the chain: a
// stream's handler runs for the stream's life, and every step of the
// chain stays on its stack meanwhile, so fewer steps let the runtime
// shrink the stacks of idle streams.
func (h *HTTPHandler) checks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.boundBody(w, r)
		if h.checkHost(w, r) && h.checkOrigin(w, r) && h.limitCaller(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// ServeHTTP serves the MCP endpoint's methods (POST, GET, DELETE), after
// the checks every request passes: its body's size and read deadline,
// the Host and Origin allow lists, and the caller's request rate.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.handler.ServeHTTP(w, r)
}

// maxRequestID bounds an incoming X-Request-Id; a longer one is replaced.
const maxRequestID = 128

// requestID gives a request its id: an incoming X-Request-Id is kept
// (when at most maxRequestID bytes), else a random one is made. It is
// echoed in the response's X-Request-Id; accessLog keeps it in the
// request's information in the context (requestIDFrom).
func requestID(w http.ResponseWriter, r *http.Request) string {
	rid := r.Header.Get("X-Request-Id")
	if rid == "" || len(rid) > maxRequestID {
		rid = randomToken(12)
	}
	w.Header().Set("X-Request-Id", rid)
	return rid
}

// requestIDFrom returns the id of the request ctx belongs to ("" outside
// the HTTP edge).
func requestIDFrom(ctx context.Context) string {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info.id
	}
	return ""
}

// requestInfo is filled in while a request is served, for its log line.
// Its logger is made only when something logs: most requests log
// nothing (the access line is off below info), and a zerolog child
// logger costs a buffer.
type requestInfo struct {
	method atomic.Pointer[string] // the first one noted wins
	caller string                 // the caller key, set by limitCaller before anything reads it

	base    *zerolog.Logger // the node's
	id      string          // the request id
	session string          // the Mcp-Session-Id header
	once    sync.Once
	log     zerolog.Logger
}

// logger returns the request's logger: the node's with the request id
// and the session's tag.
func (i *requestInfo) logger() *zerolog.Logger {
	i.once.Do(func() {
		lc := i.base.With().Str("request_id", i.id)
		if i.session != "" {
			lc = lc.Str("session", telemetry.SessionTag(i.session))
		}
		i.log = lc.Logger()
	})
	return &i.log
}

type requestInfoKey struct{}

// accessLog writes one access line per request, at info (warn for a
// 5xx; only those when HTTPOptions.NoAccessLog or the logger is above
// info), with the node, the request id, the session's tag, the HTTP and
// MCP methods, the status and the duration. Handlers log through the
// request's logger, which has the same fields (Request.Logger).
//
// It also gives the request its id (requestID): one step of the chain,
// and one copy of the request, for both.
func (h *HTTPHandler) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := requestID(w, r)
		info := &requestInfo{base: &h.log, id: rid, session: r.Header.Get(headerSession)}
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
		h.logAccess(info, r.Method, rec.status, start)
	})
}

// logAccess writes a request's access line (see accessLog).
func (h *HTTPHandler) logAccess(info *requestInfo, httpMethod string, status int, start time.Time) {
	var ev *zerolog.Event
	switch {
	case status >= 500:
		ev = info.logger().Warn()
	case h.opts.NoAccessLog || !infoEnabled(&h.log):
		return
	default:
		ev = info.logger().Info()
	}
	method := ""
	if m := info.method.Load(); m != nil {
		method = *m
	}
	ev.Str("http_method", httpMethod).Str("mcp_method", method).Int("status", status).
		Float64("duration_ms", telemetry.Ms(time.Since(start))).Msg("request")
}

// infoEnabled reports whether l writes info lines.
func infoEnabled(l *zerolog.Logger) bool {
	return l.GetLevel() <= zerolog.InfoLevel && zerolog.GlobalLevel() <= zerolog.InfoLevel
}

// noteMethod records the MCP method of the request for its access line,
// unless one was noted before (a batch notes all of its methods first;
// its requests, served concurrently, note theirs in vain), and returns
// the request's edge information (nil outside the HTTP edge).
func noteMethod(ctx context.Context, method string) *requestInfo {
	info, ok := ctx.Value(requestInfoKey{}).(*requestInfo)
	if ok && info.method.Load() == nil {
		m := method // allocated only when noted
		info.method.CompareAndSwap(nil, &m)
	}
	return info
}

// statusRecorder remembers the status written. It keeps http.Flusher,
// and Unwrap keeps http.ResponseController (flushing SSE, deadlines)
// working through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client (the status is then 200 if
// none was written).
func (s *statusRecorder) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var _ http.Flusher = (*statusRecorder)(nil)

// boundBody sets the read deadline of a request with a body, whether
// the body is read or, after an early answer, discarded by the server;
// readBody lifts it once the body is read.
func (h *HTTPHandler) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		h.bodyDeadline(w)
	}
}

// checkHost refuses (403) a request whose Host header is not allowed
// (see hostAllowed), and reports whether the request may go on.
func (h *HTTPHandler) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if !h.hostAllowed(r) {
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "host %q is not allowed", r.Host))
		return false
	}
	return true
}

// checkOrigin refuses (403) a request whose Origin header is not
// allowed (see originAllowed), and reports whether the request may go
// on.
func (h *HTTPHandler) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	if !h.originAllowed(r) {
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "origin %q is not allowed", r.Header.Get("Origin")))
		return false
	}
	return true
}
