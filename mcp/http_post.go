package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

const (
	headerSession  = "Mcp-Session-Id"
	headerVersion  = "Mcp-Protocol-Version"
	headerMethod   = "Mcp-Method"
	headerName     = "Mcp-Name"
	headerLastID   = "Last-Event-Id"
	paramHeaderPfx = "Mcp-Param-"
)

// errNotAcceptable: a response needed SSE but the client's Accept
// excludes text/event-stream.
var errNotAcceptable = errors.New("mcp: client does not accept text/event-stream")

func (h *HTTPHandler) servePost(w http.ResponseWriter, r *http.Request) {
	if !isMediaType(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Content-Type must be application/json"))
		return
	}
	// Every answer may be JSON; an answer that needs a stream when the
	// client excludes text/event-stream gets 406 then (postOut.finish).
	if !acceptable(r, "application/json") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Accept must allow application/json and text/event-stream"))
		return
	}
	body, tk, ok := h.readBody(w, r)
	if !ok {
		return
	}
	defer tk.release()
	version := r.Header.Get(headerVersion)
	if jsonrpc.IsBatch(body) {
		if version != "" && !IsSupportedVersion(version) {
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, UnsupportedVersionError(version))
			return
		}
		h.postBatch(w, r, body, version, tk)
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		de, _ := jsonrpc.IsDecodeError(err)
		writeError(w, http.StatusBadRequest, de.ID, de.Err)
		return
	}
	noteMethod(r.Context(), msg.Method)
	// The header is judged once the body is read, so that its error
	// carries the request's id.
	pm := splitParams(msg.Params)
	if err := headerVersionError(version, pm); err != nil {
		writeError(w, http.StatusBadRequest, msg.ID, err)
		return
	}
	sid := r.Header.Get(headerSession)
	// A sessionless request with a 2026-07-28 _meta is modern whatever
	// its header says: checkHeaders then reports a mismatched header.
	modern := IsModernVersion(version) || (sid == "" && msg.Method != "initialize" && IsModernMessage(msg.Params))
	if modern {
		h.postModern(w, r, msg, pm, version, tk)
		return
	}
	if err := h.node.Refusal(); err != nil && !errors.Is(err, jsonrpc.ErrDraining) {
		// The bus is down: replies, cancellations and notifications
		// between nodes would be lost, so refuse until it is back
		// (usually within a second).
		writeError(w, http.StatusServiceUnavailable, msg.ID, err)
		return
	}
	if msg.Method == "initialize" {
		h.initialize(w, r, msg)
		return
	}
	if sid == "" {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "missing %s header: send initialize first", headerSession))
		return
	}
	sess, ok := h.loadSession(w, r, sid, msg.ID)
	if !ok {
		return
	}
	switch msg.Kind() {
	case jsonrpc.KindResponse:
		if status, err := h.resolveReply(r.Context(), sess, msg); err != nil {
			h.writeReplyError(w, status, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindNotification:
		h.legacyNotification(r.Context(), sess, msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		if h.Draining() {
			writeError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.ErrDraining)
			return
		}
		h.legacyRequest(w, r, sess, msg, tk)
	}
}

// headerVersionError judges a request's MCP-Protocol-Version header: a
// header that disagrees with the _meta protocol version is a mismatch
// (-32020), judged before whether either version is served; a header
// naming a revision this server does not serve is -32022. An absent
// header is left to the transport path (checkHeaders on 2026-07-28).
func headerVersionError(version string, pm *paramMembers) error {
	if version == "" {
		return nil
	}
	if mv, ok := metaVersion(pm); ok && mv != version {
		return headerMismatch(headerVersion, "header %s is %q but _meta says %q", headerVersion, version, mv)
	}
	if !IsSupportedVersion(version) {
		return UnsupportedVersionError(version)
	}
	return nil
}

// ownSession loads session sid for the caller of ctx: a session bound
// to another principal (an authenticated caller on an anonymous session
// and the reverse included) is errGone, exactly as a session
// that does not exist, so that no caller can learn of another's.
func (h *HTTPHandler) ownSession(ctx context.Context, sid string) (*session.Session, error) {
	sess, err := h.sessions.Load(ctx, sid)
	if err != nil {
		return nil, err
	}
	if sess.Principal != PrincipalFromContext(ctx).ID() {
		return nil, errGone
	}
	return sess, nil
}

// loadSession loads the session named by the request for its caller
// (ownSession) or writes the error (404 unknown, ended or another
// caller's, 503 store down).
func (h *HTTPHandler) loadSession(w http.ResponseWriter, r *http.Request, sid string, id jsonrpc.ID) (*session.Session, bool) {
	sess, err := h.ownSession(r.Context(), sid)
	if err != nil {
		if isGone(err) {
			writeError(w, http.StatusNotFound, id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "session not found: it expired or was ended; initialize a new one"))
			return nil, false
		}
		if isUnavailable(err) {
			h.metrics.BackendError()
		}
		if errors.Is(err, session.ErrCorrupt) || errors.Is(err, session.ErrFormat) {
			h.log.Warn().Err(err).Str("session", telemetry.SessionTag(sid)).Msg("session record unreadable")
		}
		writeError(w, statusOf(err, false), id, rpcError(err))
		return nil, false
	}
	h.callers.SawSession(callerKey(r, h.callers.trusted), sid)
	return sess, true
}

func (h *HTTPHandler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	if msg.Kind() != jsonrpc.KindRequest {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must be a request"))
		return
	}
	if h.Draining() {
		writeError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.ErrDraining)
		return
	}
	res, st, err := h.srv.receiveInitialize(r.Context(), msg)
	if err != nil {
		writeError(w, http.StatusOK, msg.ID, err)
		return
	}
	sid := newSessionID()
	st.ID = sid
	st.Principal = PrincipalFromContext(r.Context()).ID()
	noteMethod(r.Context(), msg.Method)
	start := time.Now()
	lease := h.callers.SessionLease(callerKey(r, h.callers.trusted))
	if err := h.sessions.Create(r.Context(), st, lease); err != nil {
		if rf, ok := h.callers.RefusedSession(err); ok {
			h.metrics.Request("initialize", "refused", time.Since(start))
			h.writeRefusal(w, msg.ID, callerRefusal(rf))
			return
		}
		if isUnavailable(err) {
			h.metrics.BackendError()
		}
		h.metrics.Request("initialize", "error", time.Since(start))
		writeError(w, statusOf(err, false), msg.ID, rpcError(err))
		return
	}
	h.metrics.Session("created")
	h.metrics.Request("initialize", "ok", time.Since(start))
	b, _ := jsonrpc.Encode(&jsonrpc.Message{ID: msg.ID, Result: res})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(headerSession, sid)
	_, _ = w.Write(b)
}

// legacyNotification runs a notification that arrived on session sess
// through the receiving middleware and acts on it: notifications/cancelled
// cancels its request wherever it runs; the others need nothing here.
func (h *HTTPHandler) legacyNotification(ctx context.Context, sess *session.Session, msg *jsonrpc.Message) {
	h.srv.receiveMessage(ctx, msg, sess, "", func(ctx context.Context) {
		if msg.Method != "notifications/cancelled" {
			return
		}
		var p struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) != nil || !p.RequestID.IsValid() {
			return
		}
		h.node.CancelRequest(ctx, sess.ID, p.RequestID.Key())
	})
}

// legacyRequest runs a request on a session. The handler's context is
// not tied to the HTTP request (a disconnect is not a cancellation before
// 2026-07-28, and a stream detached by the server goes on in history
// while the client resumes elsewhere), but work is tied to its client:
// once the connection is gone and no stream can resume the request, it
// is cancelled (abandoned). It also ends on notifications/cancelled and
// on session end.
func (h *HTTPHandler) legacyRequest(w http.ResponseWriter, r *http.Request, sess *session.Session, msg *jsonrpc.Message, tk *ticket) {
	sid := sess.ID
	if err := tk.admit(sid, 1); err != nil {
		h.writeRefusal(w, msg.ID, err)
		return
	}
	req, err := h.srv.newLegacyRequest(msg, sess, PrincipalFromContext(r.Context()))
	if err != nil {
		writeError(w, statusOf(err, false), msg.ID, rpcError(err))
		return
	}
	ctx, cancelCause := context.WithCancelCause(context.WithoutCancel(r.Context()))
	cancel := func() { cancelCause(nil) }
	stopOnClose := context.AfterFunc(h.ctx, cancel)
	removeInflight := h.node.Local.AddInflight(sid, msg.ID.Key(), cancel)
	out := h.newPostOut(w, r, req, sid)
	req.out = out
	req.tasks, req.remote = h.tasks, r.RemoteAddr
	stopWatch := context.AfterFunc(r.Context(), func() { out.abandoned(ctx, cancelCause) })
	release := tk.handOver()
	done := make(chan struct{})
	h.wg.Add(1)
	h.work.run(func() {
		defer h.wg.Done()
		defer close(done)
		defer release()
		defer cancel()
		defer stopOnClose()
		defer removeInflight()
		defer stopWatch()
		res, err := h.srv.call(ctx, req, &httpSession{h: h, id: sid})
		out.finish(ctx, res, err)
	})
	select {
	case <-done:
	case <-out.detached:
	}
}

// postModern serves a 2026-07-28 request: headers checked against the
// body, no session, and a disconnect cancels the handler.
func (h *HTTPHandler) postModern(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, pm *paramMembers, version string, tk *ticket) {
	switch msg.Kind() {
	case jsonrpc.KindResponse:
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "clients do not send responses in protocol version %s", Version20260728))
		return
	case jsonrpc.KindNotification:
		// Nothing acts on a notification without a session, but the
		// receiving middleware sees it.
		if version == "" {
			version, _ = metaVersion(pm)
		}
		h.srv.receiveMessage(r.Context(), msg, nil, version, func(context.Context) {})
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !modernMethods[msg.Method] {
		writeError(w, http.StatusNotFound, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", msg.Method))
		return
	}
	req, err := h.srv.newModernRequest(msg, pm, PrincipalFromContext(r.Context()))
	if err != nil {
		writeError(w, http.StatusBadRequest, msg.ID, err)
		return
	}
	req.once = h.opts.Backend.once
	if err := h.srv.checkHeaders(r.Header, req, version); err != nil {
		writeError(w, http.StatusBadRequest, msg.ID, err)
		return
	}
	if h.Draining() {
		writeError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.ErrDraining)
		return
	}
	if msg.Method == "subscriptions/listen" {
		if err := h.node.Refusal(); err != nil {
			writeError(w, http.StatusServiceUnavailable, msg.ID, err)
			return
		}
		tk.release() // a stream holds a stream slot, not its body
		h.listen(w, r, req)
		return
	}
	// Modern requests have no session: they share the node's slots.
	if err := tk.admit("", 1); err != nil {
		h.writeRefusal(w, msg.ID, err)
		return
	}
	ctx := r.Context()
	// Tracked so that a drain waits for it; nothing can cancel it by id.
	defer h.node.Local.AddInflight("", randomTokenAfter("modern:", 9), func() {})()
	out := h.newPostOut(w, r, req, "")
	req.out = out
	req.tasks, req.remote = h.tasks, r.RemoteAddr
	res, err := h.srv.call(ctx, req, nil)
	out.finish(ctx, res, err)
}

// modernMethods are the methods a 2026-07-28 request may name.
var modernMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true,
	"skills/list": true, "skills/get": true, "resources/directory/read": true,
}

// postBatch serves a JSON-RPC batch: only on 2025-03-26 sessions.
func (h *HTTPHandler) postBatch(w http.ResponseWriter, r *http.Request, body []byte, version string, tk *ticket) {
	msgs, errs, _, err := jsonrpc.DecodeBatchMax(body, h.opts.MaxBatch)
	var big *jsonrpc.BatchTooLargeError
	if errors.As(err, &big) {
		writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, big.RPC())
		return
	}
	if err != nil {
		de, _ := jsonrpc.IsDecodeError(err)
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, de.Err)
		return
	}
	methods := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m != nil { // an invalid member
			methods = append(methods, m.Method)
		}
	}
	noteMethod(r.Context(), strings.Join(methods, ","))
	sid := r.Header.Get(headerSession)
	if sid == "" {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "batches need a session: initialize must not be part of a batch"))
		return
	}
	sess, ok := h.loadSession(w, r, sid, jsonrpc.ID{})
	if !ok {
		return
	}
	if sess.Version != Version20250326 || (version != "" && version != Version20250326) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "batches are only accepted on protocol version 2025-03-26"))
		return
	}
	requests := 0
	var replyMu sync.Mutex
	var replyStatus int // the first undelivered reply's answer
	var replyErr error
	for i, m := range msgs {
		if errs[i] == nil && m.Kind() == jsonrpc.KindRequest {
			requests++
		}
	}
	hasRequest := requests > 0
	// Each member runs a handler; the batch answers as one JSON array on
	// its connection, so nothing can resume it: it is cancelled with it.
	if err := tk.admit(sid, requests); err != nil {
		h.writeRefusal(w, jsonrpc.ID{}, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := serveBatch(ctx, msgs, errs, func(ctx context.Context, m *jsonrpc.Message) *jsonrpc.Message {
		switch m.Kind() {
		case jsonrpc.KindResponse:
			if status, err := h.resolveReply(ctx, sess, m); err != nil {
				replyMu.Lock()
				if replyErr == nil {
					replyStatus, replyErr = status, err
				}
				replyMu.Unlock()
			}
			return nil
		case jsonrpc.KindNotification:
			h.legacyNotification(ctx, sess, m)
			return nil
		}
		if m.Method == "initialize" {
			return jsonrpc.ErrorResponse(m.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must not be part of a batch"))
		}
		req, err := h.srv.newLegacyRequest(m, sess, PrincipalFromContext(r.Context()))
		if err != nil {
			return jsonrpc.ErrorResponse(m.ID, rpcError(err))
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer h.node.Local.AddInflight(sid, m.ID.Key(), cancel)()
		// Members of a batch answer as one JSON array: their
		// notifications have no stream to go on.
		req.out = nil
		res, err := h.srv.call(ctx, req, &httpSession{h: h, id: sid})
		if err != nil {
			return jsonrpc.ErrorResponse(m.ID, err)
		}
		return &jsonrpc.Message{ID: m.ID, Result: res}
	})
	if !hasRequest && len(out) == 0 {
		if replyErr != nil {
			// Sending the batch again is safe: a reply delivered twice
			// finds no waiter the second time.
			h.writeReplyError(w, replyStatus, replyErr)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if replyErr != nil {
		h.log.Warn().Err(replyErr).Msg("a reply in a batch with requests was not delivered")
	}
	b, _ := jsonrpc.EncodeBatch(out)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
