package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/callers"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// HTTPOptions configure the Streamable HTTP transport. A zero field
// means its documented default (DefaultHTTPOptions; see also
// docs/CONFIGURATION.md); a negative number or duration is an error
// (Validate).
type HTTPOptions struct {
	// Backend is the shared state. nil means a fresh in-memory backend
	// (a complete single-node server).
	Backend *Backend
	// NodeID names this node in logs and in routed request ids (default:
	// a fresh random id). A restarted process may reuse it: each start
	// also draws a random incarnation, and what the node owns (its
	// membership lease, its streams, its request ids) names both, so
	// nothing waits on a previous process that had the same id.
	NodeID string
	// SessionTTL is the idle timeout of a session (default 30m).
	SessionTTL time.Duration
	// MaxSessions caps live sessions in the deployment (default 10000).
	MaxSessions int
	// MaxBodyBytes bounds a POST body (default 4 MiB).
	MaxBodyBytes int64
	// RetryHint is the SSE retry field sent on streams (default 1s).
	RetryHint time.Duration
	// KeepAlive is the interval of SSE comment keep-alives: a stream
	// quiet for KeepAlive gets one (default 15s).
	KeepAlive time.Duration
	// MaxEvents is the history kept per stream (default 1000).
	MaxEvents int
	// MaxStreams is the number of ended streams per session keeping
	// history for resumption, least recently used evicted first (default
	// 100). Streams not yet ended (the GET stream, POST streams before
	// their final response) are never evicted for it.
	MaxStreams int
	// HistoryTTL is how long a stream's history lives after its last
	// event or, while a connection of the cluster reads or produces it,
	// after that connection closed (default 10m).
	HistoryTTL time.Duration
	// MaxWaiters bounds pending server→client requests on this node
	// (default 10000).
	MaxWaiters int
	// MaxWaitersPerSession is one session's share of MaxWaiters: the
	// server→client requests one session may have pending on this node at
	// once (default 100, never more than half of MaxWaiters). Past it the
	// handler's request fails at once, so one session with many
	// unanswered requests cannot starve the others.
	MaxWaitersPerSession int
	// ResumeGrace is how long a server→client request delivered on a
	// stream whose connection dropped waits for the client to resume the
	// stream before it fails (default 10s).
	ResumeGrace time.Duration
	// AllowedOrigins lists Origin values accepted (exact, or "*" for
	// any). Requests without Origin are always accepted.
	AllowedOrigins []string
	// AllowLoopbackOrigins accepts http(s)://localhost, 127.0.0.1 and
	// [::1] origins on any port (set it when bound to loopback).
	AllowLoopbackOrigins bool
	// AllowedHosts lists Host header values accepted besides loopback
	// names (localhost, 127.0.0.0/8, [::1], any port): a name alone
	// matches any port, name:port only that port, "*" any Host. When
	// empty, a request that arrived on a loopback address must name a
	// loopback host (DNS-rebinding protection) and others may name any;
	// when set, every request must name a listed or loopback host.
	AllowedHosts []string
	// SessionCacheTTL is how long a node reuses a session it created or
	// read (at most SessionTTL/4) instead of reading the store on every
	// request (default 30s; NoSessionCache turns the cache off). A change
	// to a session (its log level, its end) is answered once every node
	// that may hold a copy has acknowledged dropping it, or after a
	// bounded wait (about a second) past which a node that did not
	// acknowledge no longer answers from its copy: a node answers from
	// its cache only while it has received every change published up to
	// 250ms ago. So the client's next request sees the change on any
	// node. Each answer from the cache first looks at the node's bus
	// connection (a peek at its socket, no round trip): when Redis is
	// down or the connection is closed, the request reads the store and
	// fails like any other, never a silent answer from a node-local
	// copy; a partition that delivers nothing stops the answers from the
	// cache within 250ms. The TTL bounds what remains: a copy used
	// between the bus's return
	// after an outage and the node's resync, a node that joined and is
	// not yet known to the one making a change, a session Redis evicts.
	// The cache needs Linux (the peek); elsewhere it is never used. Set
	// it alike on every node.
	SessionCacheTTL time.Duration
	// LeaseTTL is the membership lease of the node (default 5s).
	LeaseTTL time.Duration
	// MaxFanOuts bounds the notification fan-outs (list_changed,
	// resources/updated) this node runs at once (default 4). The same
	// notification waits at most once while others run, and at most 1024
	// distinct ones wait; past that they are dropped and counted in
	// mcp_fanouts_dropped_total.
	MaxFanOuts int
	// MaxHandlers bounds the request handlers running at once on this
	// node; each member of a batch counts (default 1024).
	// More work is refused with 503 and Retry-After.
	MaxHandlers int
	// MaxSessionHandlers is one session's share of MaxHandlers on this
	// node (default 64); more is refused with 429.
	MaxSessionHandlers int
	// MaxBatch bounds the members of a 2025-03-26 batch (default
	// 64); a larger batch is refused with 413.
	MaxBatch int
	// MaxStreamBacklog bounds the notifications a handler may have
	// queued on its response stream for recording (default 1024): past
	// it, the handler's next send waits until the queue drains. The
	// queue is recorded in group commits of up to 256 events.
	MaxStreamBacklog int
	// MaxInflightBytes is the budget of request bodies held by this node
	// at once, each counted from the moment its reading starts until its
	// handler returns (default 64 MiB, at least
	// MaxBodyBytes). New work past it is refused with 503 and Retry-After
	// before its body is read.
	MaxInflightBytes int64
	// BodyReadTimeout bounds the reading of a POST body; a client that
	// stalls gets 408 (default 30s). Streams are not
	// affected: the deadline is lifted once the body is read.
	BodyReadTimeout time.Duration
	// MaxOpenStreams bounds the GET, resumed and subscriptions/listen
	// streams open on this node (default 5000); more are
	// refused with 503 and Retry-After.
	MaxOpenStreams int
	// StreamWriteTimeout bounds one write on an SSE stream; a client that
	// stops reading loses the stream after it (default
	// 30s).
	StreamWriteTimeout time.Duration
	// MaxStreamLifetime bounds how long a GET or subscriptions/listen
	// stream stays open (default 1h), so that one
	// nobody reads does not stay forever. A GET stream then ends with the
	// retry hint (the client reconnects, resuming from its last event); a
	// listen stream with its result (the client listens again).
	MaxStreamLifetime time.Duration
	// MaxCallerSessions caps the live sessions one caller (see
	// TrustedProxies) may hold in the whole deployment (default 1000,
	// never more than half of MaxSessions: one caller cannot fill the
	// deployment's cap). Past it, initialize gets 429 with Retry-After. A
	// session's place is freed by DELETE or when the session expires.
	MaxCallerSessions int
	// MaxCallerStreams caps the GET, resumed and subscriptions/listen
	// streams one caller may have open in the whole deployment (default
	// 1000); more get 429. The places of a node that dies free within
	// six LeaseTTLs (the streams' lease, renewed every two).
	MaxCallerStreams int
	// CallerRate is the requests a second one caller may make to the
	// whole deployment (default 1000): a token bucket kept in the shared
	// store. Past it and CallerBurst, requests get 429 with Retry-After
	// until the bucket refills. The check costs no round trip per
	// request; each node lets a caller past the shared bucket by at most
	// a quarter of CallerBurst, a debt the caller then waits out
	// (docs/CONFIGURATION.md).
	CallerRate int
	// CallerBurst is how many requests one caller may make at once, the
	// size of its bucket (default 2000).
	CallerBurst int
	// TrustedProxies lists the proxies (CIDR ranges or addresses) whose
	// X-Forwarded-For (or Forwarded) header names the client. A caller
	// is the principal of an authenticated request; otherwise its client
	// address, an IPv6 one grouped by /64: the peer's address, or, when
	// the peer is a trusted proxy, the rightmost untrusted address of the
	// forwarding chain. Empty: forwarding headers are ignored.
	TrustedProxies []string
	// NoCallerLimits turns the per-caller limits off (when a gateway in
	// front enforces its own).
	NoCallerLimits bool
	// RecordTimeout is how long a node keeps trying to record a
	// request's final response in history when the store fails (the
	// live connection gets it at once); past it, clients resuming the
	// stream get an error instead (default 1m).
	RecordTimeout time.Duration
	// RecordRetry is how long a node keeps trying to record a stream's
	// events while the store is unavailable, holding the events after
	// them (the handler goes on until MaxStreamBacklog are held): a
	// retry finds a try whose reply was lost recorded, so the stream
	// goes on without a gap or a repeat. Past it the stream ends at the
	// first event not recorded and the call fails with -31000 (default
	// 10s).
	RecordRetry time.Duration
	// TaskTTL is how long a task's record lives after its creation when
	// the client names no TTL (default 1h).
	TaskTTL time.Duration
	// MinTaskTTL is the shortest TTL a client may name for a task
	// (default 1s); a shorter one is refused.
	MinTaskTTL time.Duration
	// MaxTaskTTL is the longest TTL a client may name for a task
	// (default 24h); a longer one is refused.
	MaxTaskTTL time.Duration
	// TaskPollInterval is the poll interval suggested to clients in each
	// task (default 500ms).
	TaskPollInterval time.Duration
	// MaxTasksPerOwner bounds the live task records of one principal, or
	// of one client address without authentication (default 1000).
	MaxTasksPerOwner int
	// MaxTaskResultBytes bounds a task's result (default 1 MiB): a larger
	// one fails the task with an error saying so.
	MaxTaskResultBytes int
	// TaskCacheBytes bounds the records of ended tasks a node keeps to
	// answer tasks/get and tasks/result without reading the store again
	// (default 8 MiB; every node keeps some): an ended task's record never
	// changes.
	TaskCacheBytes int
	// TaskAttempts bounds the runs of an idempotent task whose node was
	// lost (default 3): past it the task fails.
	TaskAttempts int
	// TaskSweepBatch bounds the tasks of lost nodes one sweep of this node
	// ends (default 100; the sweep runs every third of the lease).
	TaskSweepBatch int
	// Logger receives transport logs, among them one access line per
	// request at info level (see ServeHTTP). The handler adds "node"
	// (NodeID) and "incarnation" to each line: a logger given here does
	// not carry them.
	Logger *slog.Logger
	// Zerolog, for programs that log with zerolog (the reference node
	// does), is used instead of Logger when set.
	Zerolog *zerolog.Logger
	// NoAccessLog turns the access lines off (those of 5xx answers,
	// logged at warn, stay).
	NoAccessLog bool
	// NoSessionCache turns the session cache off (SessionCacheTTL): every
	// legacy-era request reads its session from the store.
	NoSessionCache bool
}

// HTTPHandler serves the MCP endpoint (POST, GET, DELETE) for one node.
type HTTPHandler struct {
	srv   *Server
	opts  HTTPOptions
	log   zerolog.Logger
	admit *limits // handler slots, bytes in flight and open streams of this node
	// callers enforces the per-caller limits of the deployment.
	callers *callerLimits

	ctx    context.Context // lives until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	gets   streamCount // GET and resumed streams (Drain and Close wait for them; a GET stream may be taken over from net/http)
	work   *workers    // runs legacy request handlers

	sessions *session.Store
	// node is this process as a cluster member: bus, registry of live
	// requests and streams, membership, fan-out and drain.
	node    *coordinator.Node
	tasks   *taskEngine
	metrics *telemetry.Metrics

	handler http.Handler // the edge chain and route (see edge)

	ownBackend bool // the backend was made here, so Close closes it
	closeOnce  sync.Once
}

// NewHTTPHandler returns the Streamable HTTP handler of s. Close it to
// release its background work. Invalid options (see
// HTTPOptions.Validate and ServerOptions.Validate) are an error.
func (s *Server) NewHTTPHandler(opts *HTTPOptions) (*HTTPHandler, error) {
	h := &HTTPHandler{srv: s}
	if opts != nil {
		h.opts = *opts
	}
	if err := errors.Join(s.opts.Validate(), h.opts.Validate()); err != nil {
		return nil, err
	}
	h.opts.defaults()
	if len(s.opts.StateKeys) == 0 && h.opts.Backend != nil && h.opts.Backend.Name() != "memory" {
		// Every retry of a request that asked for input (2026-07-28) may
		// land on another node, which could not open a state sealed
		// with this process's own key.
		return nil, ErrNoStateKeys
	}
	if h.opts.Backend == nil {
		h.opts.Backend = NewMemoryBackend()
		h.ownBackend = true
	}
	h.log = logger(h.opts.Logger, h.opts.Zerolog).With().Str("node", h.opts.NodeID).Logger()
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.work = newWorkers(h.ctx)
	h.metrics = telemetry.NewMetrics(h.opts.NodeID)
	h.node = h.opts.Backend.node(h.nodeConfig())
	h.log = h.log.With().Str("incarnation", h.node.Waiters.Incarnation()).Logger()
	h.sessions = h.node.Sessions
	h.tasks = &taskEngine{node: h.node, opts: &h.opts}
	h.node.Tasks.Configure(coordinator.TaskOptions{Resolve: s.resolveTask(h.tasks), MaxAttempts: h.opts.TaskAttempts,
		MaxResultBytes: h.opts.MaxTaskResultBytes, MaxWaiters: h.opts.MaxWaiters, ListenMethod: taskNotification,
		SweepBatch: h.opts.TaskSweepBatch, CacheBytes: h.opts.TaskCacheBytes, Changed: h.taskStatus})
	s.taskEngine.Store(true)
	h.admit = newLimits(&h.opts)
	trusted, _ := parseTrustedProxies(h.opts.TrustedProxies) // Validate checked them
	h.callers = &callerLimits{Ledger: h.node.Callers, trusted: trusted, log: h.log.With().Str("component", "callers").Logger()}
	h.handler = h.edge()
	h.metrics.GaugeFunc("mcp_handlers_running", "Request handlers running on this node (each batch member counts).",
		func() float64 { n, _, _ := h.admit.usage(); return float64(n) })
	h.metrics.GaugeFunc("mcp_inflight_bytes", "Request body bytes held by this node's running requests.",
		func() float64 { _, b, _ := h.admit.usage(); return float64(b) })
	h.metrics.GaugeFunc("mcp_streams_admitted", "GET, resumed and subscriptions/listen streams open on this node.",
		func() float64 { _, _, s := h.admit.usage(); return float64(s) })
	h.metrics.GaugeFunc("mcp_pending_requests", "Server→client requests waiting for a reply on this node.",
		func() float64 { return float64(h.node.Waiters.Pending()) })
	h.metrics.GaugeFunc("mcp_sessions_live", "Live sessions in the deployment (read from the shared store at scrape time).",
		func() float64 {
			ctx, cancel := context.WithTimeout(h.ctx, time.Second)
			defer cancel()
			n, err := h.sessions.Count(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		})
	if err := h.node.Start(); err != nil {
		h.Close()
		return nil, err
	}
	s.attach(h)
	s.linkFeatures(h)
	return h, nil
}

// nodeConfig returns the node's settings of h's options.
func (h *HTTPHandler) nodeConfig() coordinator.Config {
	o := &h.opts
	return coordinator.Config{
		NodeID: o.NodeID, MaxWaiters: o.MaxWaiters, MaxWaitersPerSession: o.MaxWaitersPerSession,
		Session:  session.Options{TTL: o.SessionTTL, MaxSessions: o.MaxSessions, CacheTTL: o.SessionCacheTTL},
		LeaseTTL: o.LeaseTTL, SessionTTL: o.SessionTTL, HistoryTTL: o.HistoryTTL, MaxEvents: o.MaxEvents, MaxStreams: o.MaxStreams,
		MaxFanOuts: o.MaxFanOuts, RecordRetry: o.RecordRetry, RecordTimeout: o.RecordTimeout,
		Callers: callers.Options{Rate: o.CallerRate, Burst: o.CallerBurst, MaxSessions: o.MaxCallerSessions, MaxStreams: o.MaxCallerStreams,
			SessionTTL: o.SessionTTL, LeaseTTL: o.LeaseTTL, Off: o.NoCallerLimits},
		Log: h.log, Metrics: h.metrics, Refresh: h.loadFeatures,
	}
}

// NodeID returns this node's id.
func (h *HTTPHandler) NodeID() string { return h.opts.NodeID }

// Close stops background work, ends this node's streams and fails its
// pending server→client requests. It does not close a backend passed in
// HTTPOptions; the in-memory backend made when none was passed is closed.
// Close is idempotent.
func (h *HTTPHandler) Close() {
	h.closeOnce.Do(func() {
		h.srv.detach(h)
		h.srv.unlinkFeatures(h)
		h.cancel()
		h.gets.wait(context.Background(), true)
		h.wg.Wait()
		h.node.Shutdown(jsonrpc.ErrDraining)
		if h.ownBackend {
			_ = h.opts.Backend.Close()
		}
	})
}

// MetricsHandler serves the node's metrics in the Prometheus text format.
func (h *HTTPHandler) MetricsHandler() http.Handler { return h.metrics.Handler() }

// route serves the MCP endpoint's methods, behind the edge chain.
func (h *HTTPHandler) route(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.servePost(w, r)
	case http.MethodGet:
		h.serveGet(w, r)
	case http.MethodDelete:
		h.serveDelete(w, r)
	default:
		methodNotAllowed(w, r)
	}
}

// methodNotAllowed answers a request of another method than route's.
// (Kept out of route, under which an idle stream's handler parks: the
// smaller its frame, the smaller the parked stack.)
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, POST, DELETE")
	writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "method %s is not allowed on the MCP endpoint", r.Method))
}

// writeError writes an HTTP error with a JSON-RPC error body.
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, err error) {
	b, _ := jsonrpc.Encode(jsonrpc.ErrorResponse(id, err))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// statusOf maps an error to the HTTP status it deserves, in one place.
func statusOf(err error, modern bool) int {
	switch {
	case isUnavailable(err), errors.Is(err, jsonrpc.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, jsonrpc.ErrDraining):
		return http.StatusServiceUnavailable
	case isFull(err):
		return http.StatusServiceUnavailable
	case errors.Is(err, session.ErrFormat):
		return http.StatusServiceUnavailable
	case errors.Is(err, session.ErrCorrupt):
		return http.StatusInternalServerError
	}
	e := jsonrpc.AsError(err)
	switch e.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest:
		return http.StatusBadRequest
	case jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingClientCapability, jsonrpc.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound:
		if modern {
			return http.StatusNotFound
		}
	}
	return http.StatusOK
}

// rpcError turns backend errors into the JSON-RPC error a client sees.
func rpcError(err error) error {
	switch {
	case isUnavailable(err):
		return jsonrpc.NewError(jsonrpc.CodeUnavailable, "shared state is unavailable; retry later", nil)
	case isFull(err):
		return jsonrpc.NewError(jsonrpc.CodeUnavailable, "too many sessions; retry later", nil)
	case errors.Is(err, session.ErrFormat):
		// A node of a newer release made the session (a rolling upgrade):
		// another node may read it.
		return jsonrpc.NewError(jsonrpc.CodeUnavailable, "this session was made by a newer release of the server; retry later", nil)
	case errors.Is(err, session.ErrCorrupt):
		return jsonrpc.NewError(jsonrpc.CodeInternalError, "the session's stored state is unreadable; initialize a new session", nil)
	case errors.Is(err, context.Canceled):
		// The answer of a cancelled request (notifications/cancelled,
		// session end) that must still end its HTTP response.
		return jsonrpc.NewError(jsonrpc.CodeCancelled, "request cancelled", nil)
	}
	return err
}

// acceptable reports whether the Accept header allows mime type want. A
// range with q=0 excludes the type (RFC 9110 §12.5.1); the most specific
// matching range decides.
func acceptable(r *http.Request, want string) bool {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return true
	}
	major := want[:strings.IndexByte(want, '/')]
	best, ok := -1, false
	for _, line := range accept {
		for more := true; more; {
			var part string
			part, line, more = strings.Cut(line, ",")
			mt, params, err := parseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			rank := -1
			switch mt {
			case want:
				rank = 2
			case major + "/*":
				rank = 1
			case "*/*":
				rank = 0
			}
			if rank > best {
				best, ok = rank, !zeroQuality(params["q"])
			}
		}
	}
	return ok
}

// isMediaType reports whether the Content-Type value v is the media type
// want (with any parameters).
func isMediaType(v, want string) bool {
	mt, _, err := parseMediaType(v)
	return err == nil && mt == want
}

// parseMediaType is mime.ParseMediaType, without its parser for the
// common value that is a bare lower-case type/subtype.
func parseMediaType(v string) (string, map[string]string, error) {
	if plainMediaType(v) {
		return v, nil, nil
	}
	return mime.ParseMediaType(v)
}

// plainMediaType reports whether v is type/subtype alone, both of
// lower-case letters, digits and "-.+*": mime.ParseMediaType returns such a
// value as it is, with no parameters.
func plainMediaType(v string) bool {
	slash := strings.IndexByte(v, '/')
	if slash <= 0 || slash == len(v)-1 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case i == slash:
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '+', c == '*':
		default:
			return false
		}
	}
	return true
}

// zeroQuality reports whether an Accept q parameter is zero ("0",
// "0.", "0.0", ... up to three decimals).
func zeroQuality(q string) bool {
	if q == "" {
		return false
	}
	return strings.TrimRight(strings.TrimPrefix(q, "0"), "0") == "." || q == "0"
}

func randomToken(n int) string { return randomTokenAfter("", n) }

// randomTokenAfter returns prefix followed by randomToken(n), as one
// string (the random bytes and their encoding stay on the stack for the
// tokens this package makes).
func randomTokenAfter(prefix string, n int) string {
	var raw [24]byte
	var out [64]byte
	b := raw[:]
	if n > len(raw) {
		b = make([]byte, n)
	}
	b = b[:n]
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return string(base64.RawURLEncoding.AppendEncode(append(out[:0], prefix...), b))
}

// newSessionID returns 192 bits from the CSPRNG, URL-safe.
func newSessionID() string { return randomToken(24) }

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mcp: marshal: %v", err))
	}
	return b
}
