package mcp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// MethodHandler handles one MCP message: on the receiving side an inbound
// request, on the sending side a message the server sends to the client.
// It returns the encoded result (nil for a notification). An error on the
// receiving side becomes the JSON-RPC error of the response (an *Error
// keeps its code and message; other errors are answered as internal
// errors); on the sending side it is returned to
// the code that sent the message, and the message is not sent.
type MethodHandler func(ctx context.Context, method string, req *Request) (json.RawMessage, error)

// Middleware wraps a MethodHandler, for cross-cutting concerns such as
// tracing, metrics, auditing and access control. It may refuse a message
// by returning an error without calling next.
type Middleware func(next MethodHandler) MethodHandler

// middlewares holds a server's receiving and sending chains.
type middlewares struct {
	mu        sync.RWMutex
	receiving []Middleware
	sending   []Middleware
}

// AddReceivingMiddleware wraps the handling of every inbound message, on
// every transport and revision, on the node that receives it:
//   - requests, batch members and initialize included, and
//     subscriptions/listen, whose next returns when its stream ends;
//   - notifications (notifications/initialized, notifications/cancelled,
//     notifications/roots/list_changed...), for which next acts on the
//     notification and returns a nil result;
//   - a client's replies to server→client requests, seen with the method
//     "" (a reply has none), the reply's id (RequestID) and the whole
//     reply message, result or error, as Params; next hands the reply
//     to the request waiting for it, on whichever node that runs.
//
// A middleware refuses a message by returning an error without calling
// next: a request is answered with it as its JSON-RPC error; a
// notification or a reply is dropped (the HTTP POST that carried it is
// still accepted). The first middleware of the first call is the
// outermost: it sees the message first and the result last.
func (s *Server) AddReceivingMiddleware(m ...Middleware) {
	s.mw.mu.Lock()
	defer s.mw.mu.Unlock()
	s.mw.receiving = append(s.mw.receiving, m...)
}

// AddSendingMiddleware wraps every message the server sends to the
// client: the notifications of a request (progress, log messages,
// elicitation complete), its server→client requests (sampling,
// elicitation, roots) on handshake-era revisions, the messages sent to a
// session through HTTPHandler.RequestOnSession, Ping and NotifySession,
// and the list_changed and resources/updated notifications, once per
// change on the node where it happens (not once per recipient). The Request it sees carries the message's method and
// params, and the session, revision, client and principal of the request
// that sends it (only the method and params for messages sent outside a
// request). Ordering is as for AddReceivingMiddleware.
func (s *Server) AddSendingMiddleware(m ...Middleware) {
	s.mw.mu.Lock()
	defer s.mw.mu.Unlock()
	s.mw.sending = append(s.mw.sending, m...)
}

// chain wraps h in ms, the first outermost.
func chain(ms []Middleware, h MethodHandler) MethodHandler {
	for i := len(ms) - 1; i >= 0; i-- {
		h = ms[i](h)
	}
	return h
}

// receiving returns the receiving middleware.
func (s *Server) receiving() []Middleware {
	s.mw.mu.RLock()
	defer s.mw.mu.RUnlock()
	return s.mw.receiving
}

// receive runs h through the receiving middleware.
func (s *Server) receive(ctx context.Context, req *Request, h MethodHandler) (json.RawMessage, error) {
	return chain(s.receiving(), h)(ctx, req.Method, req)
}

// receiveMessage runs an inbound notification or reply through the
// receiving middleware, and deliver acts on it unless a middleware
// refuses it (then it is dropped). st is the session it came on (nil:
// none); version is its revision when there is no session.
func (s *Server) receiveMessage(ctx context.Context, msg *jsonrpc.Message, st *session.Session, version string, deliver func(ctx context.Context)) {
	ms := s.receiving()
	if len(ms) == 0 {
		deliver(ctx)
		return
	}
	req := &Request{Method: msg.Method, Params: msg.Params, id: msg.ID, srv: s, version: version, modern: IsModernVersion(version), principal: PrincipalFromContext(ctx)}
	if msg.Kind() == jsonrpc.KindResponse {
		req.Method = ""
		raw, err := jsonrpc.Encode(msg)
		if err != nil {
			return
		}
		req.Params = raw
	}
	if st != nil {
		req.sessionID, req.version = st.ID, st.Version
		_ = req.readSession(st) // what it could read; the message is not refused for it
	}
	_, err := chain(ms, func(ctx context.Context, _ string, _ *Request) (json.RawMessage, error) {
		deliver(ctx)
		return nil, nil
	})(ctx, req.Method, req)
	if err != nil {
		s.log.Debug().Err(err).Str("method", msg.Method).Stringer("id", msg.ID).Msg("inbound message dropped by middleware")
	}
}

// send runs the sending of one message through the sending middleware.
// from is the request that sends it (nil outside a request).
func (s *Server) send(ctx context.Context, from *Request, method string, params any, h func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	s.mw.mu.RLock()
	ms := s.mw.sending
	s.mw.mu.RUnlock()
	if len(ms) == 0 {
		return h(ctx)
	}
	out := &Request{Method: method, srv: s}
	if raw, ok := params.(json.RawMessage); ok {
		out.Params = raw
	} else if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		out.Params = raw
	}
	if from != nil {
		out.id, out.sessionID, out.version, out.modern = from.id, from.sessionID, from.version, from.modern
		out.caps, out.clientInfo, out.principal = from.caps, from.clientInfo, from.principal
	}
	return chain(ms, func(ctx context.Context, _ string, _ *Request) (json.RawMessage, error) {
		return h(ctx)
	})(ctx, method, out)
}

// sendNotification sends msg, a notification of r, through the sending
// middleware.
func (r *Request) sendNotification(ctx context.Context, msg *jsonrpc.Message) error {
	_, err := r.srv.send(ctx, r, msg.Method, msg.Params, func(ctx context.Context) (json.RawMessage, error) {
		return nil, r.out.notify(ctx, msg)
	})
	return err
}

// sendRequest sends a server→client request of r through the sending
// middleware and waits for the reply.
func (r *Request) sendRequest(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return r.srv.send(ctx, r, method, params, func(ctx context.Context) (json.RawMessage, error) {
		return r.out.request(ctx, method, params)
	})
}

// receiveInitialize runs initialize through the receiving middleware and
// returns the result and the new session's value.
func (s *Server) receiveInitialize(ctx context.Context, msg *jsonrpc.Message) (json.RawMessage, *session.Session, error) {
	var st *session.Session
	req := &Request{Method: msg.Method, Params: msg.Params, id: msg.ID, srv: s, principal: PrincipalFromContext(ctx)}
	res, err := s.receive(ctx, req, func(ctx context.Context, _ string, req *Request) (json.RawMessage, error) {
		res, got, err := s.initialize(req.Params)
		st = got
		return res, err
	})
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "initialize was answered by a middleware without the server")
	}
	return res, st, nil
}

// sendChange runs a list_changed or resources/updated notification
// through the sending middleware; deliver sends it when none refuses.
func (s *Server) sendChange(ctx context.Context, method, uri string, deliver func()) {
	msg := plainNotification(method, uri)
	_, _ = s.send(ctx, nil, method, msg.Params, func(context.Context) (json.RawMessage, error) {
		deliver()
		return nil, nil
	})
}
