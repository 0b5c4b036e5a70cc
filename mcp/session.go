package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/session"
)

// Sessions: both transports keep a handshake-era session as a
// session.Session. stdio holds the process's session and changes it in
// place (stdio.go); HTTP keeps sessions in a session.Store over the
// cluster's session store (httpSession below, and HTTPHandler.sessions).

// newSession returns the state of a session initialize just negotiated:
// capabilities and client info are kept as the client sent them (null
// as absent).
func newSession(version string, caps, info json.RawMessage) *session.Session {
	now := time.Now()
	st := &session.Session{Version: version, Created: now, LastUsed: now}
	if len(caps) > 0 && string(caps) != "null" {
		st.Capabilities = caps
	}
	if len(info) > 0 && string(info) != "null" {
		st.ClientInfo = info
	}
	return st
}

// readSession fills in what a request knows of its session's client:
// capabilities, identity and log level. A session whose state does not
// decode is an error wrapping session.ErrCorrupt.
func (r *Request) readSession(st *session.Session) error {
	if len(st.Capabilities) > 0 {
		if err := json.Unmarshal(st.Capabilities, &r.caps); err != nil {
			return fmt.Errorf("session %q: client capabilities: %v: %w", st.ID, err, session.ErrCorrupt)
		}
	}
	if len(st.ClientInfo) > 0 {
		r.clientInfo = &Implementation{}
		if err := json.Unmarshal(st.ClientInfo, r.clientInfo); err != nil {
			return fmt.Errorf("session %q: client info: %v: %w", st.ID, err, session.ErrCorrupt)
		}
	}
	r.logLevel = LogLevel(st.LogLevel)
	switch {
	case r.logLevel == "":
		r.logLevel = LevelDebug // no setLevel yet: everything is sent
	case !r.logLevel.Valid():
		return fmt.Errorf("session %q: log level %q: %w", st.ID, st.LogLevel, session.ErrCorrupt)
	}
	return nil
}

// subscriptionError is the error of a subscription refused by a
// session's bound, on either transport.
func subscriptionError(err error) error {
	if isFull(err) {
		return invalidParam("uri", "cannot be subscribed: this session has reached its subscription limit")
	}
	return err
}

// httpSession is the sessionOps of an HTTP session: changes go to the
// store, and the other nodes drop their cached copies.
type httpSession struct {
	h  *HTTPHandler
	id string
}

// setLogLevel answers once the other nodes that may hold a copy of the
// session have dropped it (coordinator.Node.SetLogLevel), so that the
// client's next request finds the new level on any node.
func (s *httpSession) setLogLevel(ctx context.Context, l LogLevel) error {
	return rpcError(s.h.node.SetLogLevel(ctx, s.id, string(l)))
}

func (s *httpSession) subscribe(ctx context.Context, uri string) error {
	return rpcError(subscriptionError(s.h.sessions.Subscribe(ctx, s.id, uri)))
}

func (s *httpSession) unsubscribe(ctx context.Context, uri string) error {
	return rpcError(s.h.sessions.Unsubscribe(ctx, s.id, uri))
}
