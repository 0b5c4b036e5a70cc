package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// sessionOps are the session mutations some legacy methods make. The
// transport implements them against its session store.
type sessionOps interface {
	setLogLevel(ctx context.Context, level LogLevel) error
	subscribe(ctx context.Context, uri string) error
	unsubscribe(ctx context.Context, uri string) error
}

// Methods by era.
var (
	modernOnly = map[string]bool{"server/discover": true, "subscriptions/listen": true}
	legacyOnly = map[string]bool{
		"initialize": true, "ping": true, "logging/setLevel": true,
		"resources/subscribe": true, "resources/unsubscribe": true,
	}
	// cacheable results carry ttlMs/cacheScope on 2026-07-28.
	cacheable = map[string]bool{
		"server/discover": true, "tools/list": true, "prompts/list": true,
		"resources/list": true, "resources/templates/list": true, "resources/read": true,
		"skills/list": true, "skills/get": true,
	}
)

// requestMeta is the reserved part of a request's _meta.
type requestMeta struct {
	ProgressToken   json.RawMessage `json:"progressToken"`
	ProtocolVersion *string         `json:"io.modelcontextprotocol/protocolVersion"`
	Capabilities    json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo      *Implementation `json:"io.modelcontextprotocol/clientInfo"`
	LogLevel        *LogLevel       `json:"io.modelcontextprotocol/logLevel"`
	// The trace context (W3C), read by startSpan; raw, so that a
	// malformed one is ignored rather than refused.
	TraceParent json.RawMessage `json:"traceparent"`
	TraceState  json.RawMessage `json:"tracestate"`
	Baggage     json.RawMessage `json:"baggage"`
}

// metaVersion returns the _meta protocol version of a request's params,
// when there is one and it is a string.
func metaVersion(pm *paramMembers) (string, bool) {
	if v := pm.meta.ProtocolVersion; v != nil {
		return *v, true
	}
	return "", false
}

// IsModernMessage reports whether a request carries the 2026-07-28
// per-request protocol version in its _meta. A malformed value counts: the
// request is a stateless one, and its _meta gets it -32602.
func IsModernMessage(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(MetaProtocolVersion)) {
		return false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	_, ok := p.Meta[MetaProtocolVersion]
	return ok
}

// newModernRequest builds the context of a stateless request from its
// _meta, or returns the JSON-RPC error the request deserves. pm is
// msg.Params split, or nil.
func (s *Server) newModernRequest(msg *jsonrpc.Message, pm *paramMembers, principal *Principal) (*Request, error) {
	if !pm.of(msg.Params) {
		pm = splitParams(msg.Params)
	}
	if pm.metaErr != nil {
		return nil, pm.metaErr
	}
	m := &pm.meta
	if m.ProtocolVersion == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "missing _meta."+MetaProtocolVersion, map[string]any{"field": "_meta." + MetaProtocolVersion})
	}
	if !IsModernVersion(*m.ProtocolVersion) {
		// A stateless request can only name a per-request revision: the
		// error lists those, so it never names the requested one as
		// supported (a session-based revision needs initialize).
		return nil, unsupportedVersion(*m.ProtocolVersion, ModernVersions)
	}
	if len(m.Capabilities) == 0 || string(m.Capabilities) == "null" {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "missing _meta."+MetaClientCapabilities, map[string]any{"field": "_meta." + MetaClientCapabilities})
	}
	if m.Capabilities[0] != '{' {
		return nil, invalidParam("_meta."+MetaClientCapabilities, "must be an object")
	}
	req := &Request{
		Method: msg.Method, Params: msg.Params, id: msg.ID, srv: s,
		version: *m.ProtocolVersion, modern: true, clientInfo: m.ClientInfo,
		principal: principal, progressToken: m.ProgressToken, pm: pm,
	}
	if err := json.Unmarshal(m.Capabilities, &req.caps); err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid _meta."+MetaClientCapabilities+": "+err.Error(), nil)
	}
	if m.LogLevel != nil {
		if !m.LogLevel.Valid() {
			return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("invalid log level %q", *m.LogLevel), map[string]any{"field": "_meta." + MetaLogLevel})
		}
		req.logLevel = *m.LogLevel
	}
	return req, nil
}

// newLegacyRequest builds the context of a request on a session.
// principal is the caller of this request (the session is bound to its
// ID when it was created).
func (s *Server) newLegacyRequest(msg *jsonrpc.Message, st *session.Session, principal *Principal) (*Request, error) {
	pm := splitParams(msg.Params)
	if pm.metaErr != nil {
		return nil, pm.metaErr
	}
	req := &Request{
		Method: msg.Method, Params: msg.Params, id: msg.ID, srv: s,
		sessionID: st.ID, version: st.Version, principal: principal,
		progressToken: pm.meta.ProgressToken, pm: pm,
	}
	if err := req.readSession(st); err != nil {
		return nil, err
	}
	return req, nil
}

// initializeParams are the params of initialize.
type initializeParams struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ClientCapabilities `json:"capabilities"`
	ClientInfo      *Implementation    `json:"clientInfo"`
}

// initialize negotiates a session: it returns the result to send and the
// session's initial state (without its id).
func (s *Server) initialize(params json.RawMessage) (json.RawMessage, *session.Session, error) {
	var p initializeParams
	if len(params) == 0 {
		return nil, nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "initialize needs params", nil)
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid initialize params: "+err.Error(), nil)
	}
	// The session stores what the client says about itself: bound it.
	var sizes struct {
		ClientInfo   json.RawMessage `json:"clientInfo"`
		Capabilities json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &sizes) // decoded above
	if n := s.opts.maxClientInfoBytes(); len(sizes.ClientInfo) > n {
		return nil, nil, invalidParam("clientInfo", fmt.Sprintf("is larger than %d bytes", n))
	}
	if n := s.opts.maxCapabilitiesBytes(); len(sizes.Capabilities) > n {
		return nil, nil, invalidParam("capabilities", fmt.Sprintf("are larger than %d bytes", n))
	}
	if p.ProtocolVersion == "" {
		return nil, nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "missing protocolVersion", map[string]any{"field": "protocolVersion"})
	}
	v := p.ProtocolVersion
	if !IsLegacyVersion(v) {
		v = LatestLegacyVersion
	}
	st := newSession(v, sizes.Capabilities, sizes.ClientInfo)
	res := map[string]any{
		"protocolVersion": v,
		"capabilities":    s.capabilities(v),
		"serverInfo":      s.implFor(v),
	}
	if s.opts.Instructions != "" {
		res["instructions"] = s.opts.Instructions
	}
	b, err := json.Marshal(res)
	return b, st, err
}

// implFor returns the server identity without fields too new for v.
func (s *Server) implFor(v string) Implementation {
	impl := s.impl
	if !atLeast(v, Version20250618) {
		impl.Title = ""
	}
	if !atLeast(v, Version20251125) {
		impl.Description, impl.Icons, impl.WebsiteURL = "", nil, ""
	}
	return impl
}

// discover answers server/discover.
func (s *Server) discover() map[string]any {
	res := map[string]any{
		"supportedVersions": SupportedVersions,
		"capabilities":      s.capabilities(Version20260728),
	}
	if s.opts.Instructions != "" {
		res["instructions"] = s.opts.Instructions
	}
	return res
}

// call runs a request (anything but initialize and subscriptions/listen,
// which transports handle) and returns the encoded result.
func (s *Server) call(ctx context.Context, req *Request, sess sessionOps) (json.RawMessage, error) {
	if req.modern && legacyOnly[req.Method] || !req.modern && (modernOnly[req.Method] || skillsMethods[req.Method]) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not available in protocol version %s", req.Method, req.version)
	}
	ctx, span := s.startSpan(ctx, req)
	defer span.End()
	res, err := s.receive(ctx, req, func(ctx context.Context, _ string, req *Request) (json.RawMessage, error) {
		// Inside the middleware, which thus refuses a request before
		// its requestState is unsealed, and sees a bad one's error.
		if req.modern {
			if err := s.openRound(req); err != nil {
				return nil, err
			}
		}
		res, err := s.runWithInputs(ctx, req, func(ctx context.Context) (any, error) {
			return s.method(ctx, req, sess)
		})
		if err != nil {
			return nil, err
		}
		return s.finish(req, res)
	})
	if err != nil {
		// Bounded like the error the client gets: messages may quote
		// megabytes of input.
		msg := jsonrpc.Truncate(err.Error(), jsonrpc.MaxMessageBytes)
		span.RecordError(errors.New(msg))
		span.SetStatus(codes.Error, msg)
		return nil, err
	}
	return res, nil
}

// startSpan starts the span of one MCP request, a child of the trace
// context in the request's _meta (traceparent) or else of ctx (HTTP
// headers). Attributes are computed only when the span records; with no
// tracer provider installed nothing is made (telemetry.Enabled), but ctx
// keeps the trace context for the bus messages the request sends.
func (s *Server) startSpan(ctx context.Context, req *Request) (context.Context, trace.Span) {
	pm := req.members()
	ctx = telemetry.FromTraceMeta(ctx, pm.meta.TraceParent, pm.meta.TraceState, pm.meta.Baggage)
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	ctx, span := telemetry.Tracer().Start(ctx, "mcp "+req.Method, trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		attribute.String("mcp.method.name", req.Method),
		attribute.String("mcp.protocol.version", req.version),
		attribute.String("jsonrpc.request.id", req.id.String()),
	)
	if req.sessionID != "" {
		span.SetAttributes(attribute.String("mcp.session.id", req.sessionID))
	}
	name, _ := stringMember(pm.Name)
	uri, _ := stringMember(pm.URI)
	switch req.Method {
	case "tools/call":
		span.SetAttributes(attribute.String("gen_ai.tool.name", name))
	case "prompts/get":
		span.SetAttributes(attribute.String("gen_ai.prompt.name", name))
	case "resources/read":
		span.SetAttributes(attribute.String("mcp.resource.uri", uri))
	}
	return ctx, span
}

func (s *Server) method(ctx context.Context, req *Request, sess sessionOps) (any, error) {
	switch req.Method {
	case "ping":
		return struct{}{}, nil
	case "server/discover":
		return s.discover(), nil
	case "tools/list":
		return s.listTools(ctx, req)
	case "tools/call":
		return s.callTool(ctx, req)
	case "tasks/get", "tasks/update", "tasks/cancel":
		if req.modern {
			return s.tasksMethod(ctx, req)
		}
		if req.Method != "tasks/update" {
			return s.legacyTasksMethod(ctx, req)
		}
	case "tasks/result", "tasks/list":
		if !req.modern {
			return s.legacyTasksMethod(ctx, req)
		}
	case "resources/list":
		return s.listResources(ctx, req)
	case "resources/templates/list":
		return s.listTemplates(ctx, req)
	case "resources/read":
		return s.readResource(ctx, req)
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if err := decodeParams(req.Params, &p); err != nil {
			return nil, err
		}
		if p.URI == "" {
			return nil, invalidParam("uri", "is required")
		}
		if n := s.opts.maxURIBytes(); len(p.URI) > n {
			return nil, invalidParam("uri", fmt.Sprintf("is longer than %d bytes", n))
		}
		if sess == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "no session")
		}
		var err error
		if req.Method == "resources/subscribe" {
			err = sess.subscribe(ctx, p.URI)
		} else {
			err = sess.unsubscribe(ctx, p.URI)
		}
		return struct{}{}, err
	case "skills/list", "skills/get", "resources/directory/read":
		return s.skillsMethod(ctx, req)
	case "prompts/list":
		return s.listPrompts(ctx, req)
	case "prompts/get":
		return s.getPrompt(ctx, req)
	case "completion/complete":
		return s.complete(ctx, req)
	case "logging/setLevel":
		var p struct {
			Level LogLevel `json:"level"`
		}
		if err := decodeParams(req.Params, &p); err != nil {
			return nil, err
		}
		if !p.Level.Valid() {
			return nil, invalidParam("level", fmt.Sprintf("%q is not a log level", p.Level))
		}
		if sess == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "no session")
		}
		return struct{}{}, sess.setLogLevel(ctx, p.Level)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

// finish encodes a result, adding on 2026-07-28 resultType (unless the
// result has one, as input_required results do), where required the cache
// hints, and the server identity in _meta: next to the result's own _meta
// members when it has some.
func (s *Server) finish(req *Request, res any) (json.RawMessage, error) {
	if !req.modern {
		return json.Marshal(res)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var top struct {
		ResultType json.RawMessage `json:"resultType"`
		Meta       json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("mcp: result is not a JSON object: %w", err)
	}
	var extra []byte
	if top.ResultType == nil {
		extra = append(extra, `"resultType":"complete",`...)
		if cacheable[req.Method] {
			ttl := s.opts.ListTTL.Milliseconds()
			if req.retry {
				ttl = 0 // results of MRTR retries must not be cached
			}
			extra = append(extra, `"ttlMs":`...)
			extra = strconv.AppendInt(extra, ttl, 10)
			extra = append(extra, `,"cacheScope":"`+cacheScope(req)+`",`...)
		}
	}
	extra = append(extra, `"_meta":`...)
	if len(top.Meta) > 0 && top.Meta[0] == '{' {
		// The result's own _meta is re-encoded with serverInfo added.
		var members map[string]json.RawMessage
		if err := json.Unmarshal(b, &members); err != nil {
			return nil, err
		}
		meta := map[string]json.RawMessage{}
		if err := json.Unmarshal(top.Meta, &meta); err != nil {
			return nil, err
		}
		delete(members, "_meta")
		if b, err = json.Marshal(members); err != nil {
			return nil, err
		}
		if _, has := meta[MetaServerInfo]; !has {
			info, err := s.implJSON()
			if err != nil {
				return nil, err
			}
			meta[MetaServerInfo] = info
		}
		mb, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		extra = append(extra, mb...)
	} else {
		// _meta holds serverInfo alone: what encoding the one-member map
		// gives, written directly.
		info, err := s.implJSON()
		if err != nil {
			return nil, err
		}
		extra = append(extra, `{"`+MetaServerInfo+`":`...)
		extra = append(extra, info...)
		extra = append(extra, '}')
	}
	return spliceObject(b, extra), nil
}

// implJSON returns the server's identity encoded (it never changes, so it
// is encoded once).
func (s *Server) implJSON() (json.RawMessage, error) {
	s.implOnce.Do(func() { s.implEnc, s.implErr = json.Marshal(s.impl) })
	return s.implEnc, s.implErr
}

// cacheScope is private when results depend on who asks.
func cacheScope(req *Request) string {
	if req.principal != nil {
		return "private"
	}
	return "public"
}

// spliceObject inserts members (already encoded, without braces) into the
// JSON object b.
func spliceObject(b, members []byte) json.RawMessage {
	b = bytes.TrimRight(b, " \n")
	if len(b) < 2 || b[len(b)-1] != '}' {
		return b
	}
	out := make([]byte, 0, len(b)+len(members)+1)
	out = append(out, b[:len(b)-1]...)
	if len(bytes.TrimSpace(b[1:len(b)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, members...)
	return append(out, '}')
}

func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalidParam(te.Field, "must be "+te.Type.String())
		}
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid params: "+err.Error(), nil)
	}
	return nil
}

func invalidParam(field, problem string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("invalid params: %s %s", field, problem), map[string]any{"field": field})
}

// cursorStart returns the index in sorted keys where the page that
// cursor names starts: at the first key not before the one it names.
func cursorStart(keys []string, cursor string) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !bytes.HasPrefix(raw, []byte("k:")) {
		return 0, invalidParam("cursor", "is not a cursor this server issued")
	}
	after := string(raw[2:])
	for i, k := range keys {
		if k >= after {
			return i, nil
		}
	}
	return len(keys), nil
}

// encodeCursor returns the cursor of the page that starts at key.
func encodeCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("k:" + key))
}

type listParams struct {
	Cursor string `json:"cursor"`
}
