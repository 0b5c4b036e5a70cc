package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// ErrClientCapability is returned (wrapped) when a handler asks the client
// for something it did not declare (sampling, elicitation, roots). On a
// 2026-07-28 request the error reaching the client is -32021 with
// data.requiredCapabilities.
var ErrClientCapability = errors.New("mcp: client capability not declared")

// ClientError is the client's error reply to a server→client request
// (sampling, elicitation, roots), or the failure to get one (timeout,
// connection gone). Unlike a *Error returned by a handler, it is
// not a protocol error of the request being served: a typed tool reports
// it as an isError result.
type ClientError struct {
	Method  string
	Code    int64
	Message string
	Data    json.RawMessage
}

func (e *ClientError) Error() string {
	if strings.HasPrefix(e.Message, e.Method) {
		return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
	}
	return fmt.Sprintf("%s failed: %s (code %d)", e.Method, e.Message, e.Code)
}

// Is matches a *Error with the same code, so errors.Is(err,
// &Error{Code: c}) works on it too.
func (e *ClientError) Is(target error) bool {
	t, ok := target.(*jsonrpc.Error)
	return ok && t.Code == e.Code
}

// ErrNoChannel is returned when a server→client request cannot be sent
// because the transport has no channel for it.
var ErrNoChannel = errors.New("mcp: no channel to the client")

// outbound is what a transport provides to one request: a way to send
// notifications related to it and, on handshake-era revisions, requests
// to the client whose replies come back later.
type outbound interface {
	// notify sends a notification related to the request (progress, log).
	notify(ctx context.Context, msg *jsonrpc.Message) error
	// request sends a server→client request related to the request and
	// waits for the reply until ctx ends.
	request(ctx context.Context, method string, params any) (json.RawMessage, error)
	// streaming reports whether the response became an SSE stream.
	streaming() bool
	// nextEventID is the id the stream's next event will carry ("" when
	// the transport has none).
	nextEventID() string
	// closeStream closes the client's connection of an SSE response
	// early, after a retry hint; the request goes on and the client
	// resumes the stream (SSE polling, 2025-11-25).
	closeStream()
}

// Request is the context of one inbound request. Handlers use it to learn
// about the client and to talk back: progress, log messages, and
// sampling, elicitation and roots requests. The same handler code serves
// every revision: on handshake-era revisions those requests are real
// server→client requests that wait for the reply; on 2026-07-28 they end
// the current round with an input_required result and are answered from
// the client's inputResponses when it retries (multi round-trip requests).
// A handler that uses them on 2026-07-28 is therefore run again from the
// start on each retry and must ask in the same order each time.
type Request struct {
	// Method is the JSON-RPC method.
	Method string
	// Params are the raw params.
	Params json.RawMessage

	id            jsonrpc.ID
	srv           *Server
	sessionID     string
	version       string
	modern        bool
	caps          ClientCapabilities
	clientInfo    *Implementation
	principal     *Principal
	logLevel      LogLevel // threshold; "" sends nothing
	progressToken json.RawMessage
	pm            *paramMembers // Params split: see members
	out           outbound
	edge          *requestInfo // the HTTP request's, for Logger; nil on stdio
	logger        *slog.Logger
	zlogger       *zerolog.Logger
	zlogOnce      sync.Once
	loggerOnce    sync.Once

	mu        sync.Mutex
	lastProg  float64
	inputs    map[string]json.RawMessage // MRTR answers known in this round
	retry     bool                       // the request carried inputResponses or requestState
	asked     int                        // MRTR input requests made in this round
	pending   map[string]inputRequest    // MRTR input requests of this round
	askedKeys map[string]bool            // MRTR keys asked in this round
	state     []byte                     // handler state carried across rounds
	stateID   string                     // id of the requestState this retry carried
	// tasks is the node's task engine (nil where requests cannot become
	// tasks); run is the task this request runs as (nil when not one).
	tasks  *taskEngine
	run    *coordinator.TaskRun
	remote string // the client's address, for the per-owner bound without auth
	// once records single-use tokens in the shared store (nil: the
	// server's process-local table).
	once func(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// RequestID returns the JSON-RPC id rendered as a string (for logs).
func (r *Request) RequestID() string { return r.id.String() }

// Logger returns a logger for this request, a *slog.Logger whatever the
// options were given (ServerOptions.Logger or Zerolog): on HTTP it
// carries the node, the request id (X-Request-Id), the session and the
// method. It is safe for concurrent use.
func (r *Request) Logger() *slog.Logger {
	r.loggerOnce.Do(func() { r.logger = telemetry.ToSlog(*r.zlog()) })
	return r.logger
}

// zlog is the request's logger as the layers below use it.
func (r *Request) zlog() *zerolog.Logger {
	r.zlogOnce.Do(func() {
		var l zerolog.Logger
		if r.edge != nil {
			l = r.edge.logger().With().Str("mcp_method", r.Method).Logger()
		} else {
			l = r.srv.log.With().Str("method", r.Method).Logger()
		}
		r.zlogger = &l
	})
	return r.zlogger
}

// ProtocolVersion returns the revision this request is served under.
func (r *Request) ProtocolVersion() string { return r.version }

// Stateless reports whether this is a 2026-07-28 request (no session,
// no server→client requests: sampling, elicitation and roots go through
// multi round-trip requests).
func (r *Request) Stateless() bool { return r.modern }

// SessionID returns the legacy session id ("" on stateless requests and
// on stdio).
func (r *Request) SessionID() string { return r.sessionID }

// ClientCapabilities returns what the client declared.
func (r *Request) ClientCapabilities() ClientCapabilities { return r.caps }

// ClientInfo returns the client's self-description (may be nil).
func (r *Request) ClientInfo() *Implementation { return r.clientInfo }

// Principal returns the verified caller (subject, scopes, claims), or
// nil when the request was not authenticated. See WithPrincipal.
func (r *Request) Principal() *Principal { return r.principal }

// Streaming reports whether the response has been upgraded to an SSE
// stream.
func (r *Request) Streaming() bool { return r.out != nil && r.out.streaming() }

// NextEventID returns the SSE id the response stream's next event will
// carry ("" when the transport assigns none).
func (r *Request) NextEventID() string {
	if r.out == nil {
		return ""
	}
	return r.out.nextEventID()
}

// CloseSSEStream ends the client's connection of this request's SSE
// stream early, after a retry hint, while the handler goes on: the client
// reconnects with Last-Event-ID and receives the rest of the stream,
// including the result, from history (SSE polling; handshake-era HTTP
// 2025-11-25 and later only; a no-op elsewhere).
func (r *Request) CloseSSEStream() {
	if r.out != nil {
		r.out.closeStream()
	}
}

// progressParams are the params of notifications/progress, in the
// order of their names.
type progressParams struct {
	Message       string          `json:"message,omitempty"`
	Progress      float64         `json:"progress"`
	ProgressToken json.RawMessage `json:"progressToken"`
	Total         float64         `json:"total,omitempty"`
}

// Progress sends notifications/progress if the request asked for progress
// (a progressToken in _meta); otherwise it does nothing. progress must
// increase from call to call; total <= 0 means unknown.
func (r *Request) Progress(ctx context.Context, progress, total float64, message string) error {
	if len(r.progressToken) == 0 || r.out == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err // nothing more is sent for a cancelled request
	}
	r.mu.Lock()
	if progress < r.lastProg {
		r.mu.Unlock()
		return fmt.Errorf("mcp: progress must increase (%v after %v)", progress, r.lastProg)
	}
	r.lastProg = progress
	r.mu.Unlock()
	p := progressParams{ProgressToken: r.progressToken, Progress: progress, Total: max(total, 0)}
	if atLeast(r.version, Version20250326) {
		p.Message = message
	}
	msg, err := jsonrpc.Notification("notifications/progress", p)
	if err != nil {
		return err
	}
	return r.sendNotification(ctx, msg)
}

// Log sends notifications/message at level if it passes the client's
// threshold (logging/setLevel on a session; the logLevel _meta on a
// 2026-07-28 request, without which nothing is sent).
func (r *Request) Log(ctx context.Context, level LogLevel, logger string, data any) error {
	if !level.Valid() {
		return fmt.Errorf("mcp: invalid log level %q", level)
	}
	if r.out == nil || r.logLevel == "" || !level.enabled(r.logLevel) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err // nothing more is sent for a cancelled request
	}
	p := map[string]any{"level": level, "data": data}
	if logger != "" {
		p["logger"] = logger
	}
	msg, err := jsonrpc.Notification("notifications/message", p)
	if err != nil {
		return err
	}
	return r.sendNotification(ctx, msg)
}

// Sample asks the client's model for a completion (sampling/createMessage).
func (r *Request) Sample(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error) {
	if r.caps.Sampling == nil {
		return nil, r.capabilityError("sampling", map[string]any{"sampling": map[string]any{}})
	}
	if (len(p.Tools) > 0 || p.ToolChoice != nil) && (r.caps.Sampling.Tools == nil || !atLeast(r.version, Version20251125)) {
		return nil, r.capabilityError("sampling.tools", map[string]any{"sampling": map[string]any{"tools": map[string]any{}}})
	}
	if p.MaxTokens <= 0 {
		return nil, errors.New("mcp: sampling needs maxTokens > 0")
	}
	raw, err := r.roundTrip(ctx, "sampling/createMessage", p)
	if err != nil {
		return nil, err
	}
	var res CreateMessageResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcp: malformed sampling result: %w", err)
	}
	return &res, nil
}

// Elicit asks the user for input through the client (elicitation/create).
// Form mode needs RequestedSchema; URL mode (Mode "url") needs URL and, on
// 2025-11-25, an ElicitationID.
func (r *Request) Elicit(ctx context.Context, p *ElicitParams) (*ElicitResult, error) {
	e := r.caps.Elicitation
	if !atLeast(r.version, Version20250618) {
		e = nil // elicitation arrived in 2025-06-18
	}
	if p.Mode == "url" {
		if !e.supportsURL() || !atLeast(r.version, Version20251125) {
			return nil, r.capabilityError("elicitation.url", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}})
		}
		if p.URL == "" || (!r.modern && p.ElicitationID == "") {
			return nil, errors.New("mcp: URL elicitation needs url and elicitationId")
		}
		if r.modern {
			p.ElicitationID = "" // removed in 2026-07-28
		}
	} else {
		if !e.supportsForm() {
			return nil, r.capabilityError("elicitation", map[string]any{"elicitation": map[string]any{}})
		}
		if p.RequestedSchema == nil {
			return nil, errors.New("mcp: form elicitation needs requestedSchema")
		}
		if !atLeast(r.version, Version20251125) {
			p.Mode = ""
		}
	}
	raw, err := r.roundTrip(ctx, "elicitation/create", p)
	if err != nil {
		return nil, err
	}
	var res ElicitResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcp: malformed elicitation result: %w", err)
	}
	return &res, nil
}

// ListRoots asks the client for its roots (roots/list).
func (r *Request) ListRoots(ctx context.Context) (*ListRootsResult, error) {
	if r.caps.Roots == nil {
		return nil, r.capabilityError("roots", map[string]any{"roots": map[string]any{}})
	}
	raw, err := r.roundTrip(ctx, "roots/list", nil)
	if err != nil {
		return nil, err
	}
	var res ListRootsResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcp: malformed roots result: %w", err)
	}
	return &res, nil
}

// State returns the handler state carried across MRTR rounds (set with
// SetState on an earlier round; nil on the first).
func (r *Request) State() []byte { return r.state }

// SetState sets handler state to carry to the next MRTR round. It is
// sealed into requestState, so the client cannot read or change it.
func (r *Request) SetState(b []byte) { r.state = b }

// InputResponses returns the MRTR answers known in this round, keyed by
// the input request keys the server issued.
func (r *Request) InputResponses() map[string]json.RawMessage { return r.inputs }

func (r *Request) capabilityError(what string, required map[string]any) error {
	if r.modern {
		return jsonrpc.NewError(jsonrpc.CodeMissingClientCapability,
			"missing required client capability: "+what,
			map[string]any{"requiredCapabilities": required})
	}
	return fmt.Errorf("%w: %s", ErrClientCapability, what)
}

// roundTrip performs one server→client request: a real one on
// handshake-era revisions, an MRTR input request on 2026-07-28.
func (r *Request) roundTrip(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if r.run != nil {
		// A task continued from an MRTR round (ContinueAsTask) first
		// finds the answers the client gave in that round.
		if resp, ok := r.knownInput(ctx); ok {
			return resp, nil
		}
		return r.taskInput(ctx, method, params)
	}
	if !r.modern {
		if r.out == nil {
			return nil, ErrNoChannel
		}
		rctx, cancel := context.WithTimeout(ctx, r.srv.opts.requestTimeout())
		defer cancel()
		res, err := r.sendRequest(rctx, method, params)
		if err != nil && ctx.Err() == nil {
			// The client's refusal or silence is the handler's to
			// report (a typed tool turns it into an isError result),
			// not a protocol error of the request that asked.
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				return nil, &ClientError{Method: method, Code: je.Code, Message: je.Message, Data: je.Data}
			}
		}
		return res, err
	}
	switch r.Method {
	case "tools/call", "resources/read", "prompts/get":
	default:
		return nil, fmt.Errorf("mcp: %s cannot ask the client for input on a stateless request", r.Method)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name, _ := ctx.Value(inputKeyCtx{}).(*string)
	key, err := r.nextInputKey(name)
	if err != nil {
		return nil, err
	}
	if resp, ok := r.inputs[key]; ok {
		return resp, nil
	}
	if params == nil {
		params = struct{}{}
	}
	r.pending[key] = inputRequest{Method: method, Params: params}
	return nil, &inputRequired{}
}

// knownInput returns the MRTR answer to the next input request, when the
// request carried it (a task continued from an MRTR round).
func (r *Request) knownInput(ctx context.Context) (json.RawMessage, bool) {
	if !r.modern || len(r.inputs) == 0 {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name, _ := ctx.Value(inputKeyCtx{}).(*string)
	key, err := r.nextInputKey(name)
	if err != nil {
		return nil, false
	}
	resp, ok := r.inputs[key]
	return resp, ok
}

// nextInputKey names the next MRTR input request of this round: name
// when set (WithInputKey), else input-N (N counting this round's requests
// from 1). A key asked twice in one round is an error. r.mu is held.
func (r *Request) nextInputKey(name *string) (string, error) {
	r.asked++
	key := fmt.Sprintf("input-%d", r.asked)
	if name != nil {
		if *name == "" {
			return "", errors.New("mcp: empty input key")
		}
		key = *name
	}
	if r.askedKeys[key] {
		return "", fmt.Errorf("mcp: input key %q used twice in one round", key)
	}
	if r.askedKeys == nil {
		r.askedKeys = map[string]bool{}
		r.pending = map[string]inputRequest{}
	}
	r.askedKeys[key] = true
	return key, nil
}

type inputKeyCtx struct{}

// WithInputKey returns a context that names the input request of an
// Elicit, Sample or ListRoots made with it on a 2026-07-28 (stateless)
// request: it is keyed key in the result's inputRequests and answered
// from inputResponses[key] on the client's retry. Without it the keys are
// input-1, input-2, … in the order the handler asks. A key may be asked
// once per round (a second ask with the same key fails), and must not be
// empty. Handshake-era requests ignore it.
func WithInputKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, inputKeyCtx{}, &key)
}

// IsInputRequired reports whether err is what Elicit, Sample or ListRoots
// return on a stateless request whose answer the client has not sent
// yet. A handler that needs several answers at once asks for each, goes
// on past these errors, and then returns one of them: the client gets
// every unanswered request in one input_required result.
func IsInputRequired(err error) bool {
	var ir *inputRequired
	return errors.As(err, &ir)
}
