// Package session holds the state of a handshake-era MCP session as a
// value: what initialize negotiated (the protocol version, the client's
// capabilities and identity), what later requests changed (the log
// level, the resource subscriptions), who owns it (the principal) and
// when it was made and last used. Any node can load it; nothing in it is
// live (open streams and waiters stay on their node and are reached
// through the bus).
//
// Both transports use the one value. On stdio the process holds its
// session and changes it in place; on Streamable HTTP a Store keeps it in
// the shared cluster.SessionStore under a versioned codec (Encode,
// Decode), with an optional node-local cache.
//
// The package does not know the protocol's types: capabilities and client
// info are kept as the JSON the client sent, and the mcp package decodes
// them.
package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Session is the state of one handshake-era session. A Session returned
// by a Store may be shared with its cache: treat it as read-only.
type Session struct {
	// ID is the session id (the Mcp-Session-Id header on HTTP, "" for
	// the process session of stdio). It names the stored record and is
	// not part of it.
	ID string
	// Version is the negotiated protocol version.
	Version string
	// Capabilities are the client's capabilities: a JSON object, as the
	// client sent it in initialize.
	Capabilities json.RawMessage
	// ClientInfo is the client's Implementation, a JSON object, or nil
	// when the client sent none.
	ClientInfo json.RawMessage
	// LogLevel is the level set by logging/setLevel, "" before any.
	LogLevel string
	// Subscriptions are the resource URIs subscribed to, on a session
	// held in process (stdio). A stored session's subscriptions live in
	// the store's own index (cluster.SessionStore.Subscribe), which
	// finds the subscribers of a URI across the cluster; they are not
	// read with the session, so that a load stays one round trip, and
	// Subscriptions is nil on a session loaded from a Store.
	Subscriptions map[string]struct{}
	// Principal is the authenticated owner of the session ("" without
	// authentication).
	Principal string
	// Created is when initialize made the session.
	Created time.Time
	// LastUsed is when a request last used the session as far as this
	// node knows: for a stored session, when the Store last read or
	// touched it, which slid its idle timeout (a cached copy keeps the
	// time it was read). It is not stored: keeping it would turn each
	// request's read into a write, and the store's sliding expiry
	// already carries it (expiry = last use + idle timeout).
	LastUsed time.Time
}

// Subscribe adds uri to a session held in process. A session with max
// subscriptions (max > 0) takes no new one: that error wraps
// cluster.ErrLimit, as a Store's does. Subscribing twice is no error.
func (s *Session) Subscribe(uri string, max int) error {
	if _, ok := s.Subscriptions[uri]; ok {
		return nil
	}
	if max > 0 && len(s.Subscriptions) >= max {
		return fmt.Errorf("session has %d subscriptions: %w", max, cluster.ErrLimit)
	}
	if s.Subscriptions == nil {
		s.Subscriptions = map[string]struct{}{}
	}
	s.Subscriptions[uri] = struct{}{}
	return nil
}

// Unsubscribe removes uri from a session held in process.
func (s *Session) Unsubscribe(uri string) { delete(s.Subscriptions, uri) }

// Subscribed reports whether a session held in process subscribed to uri.
func (s *Session) Subscribed(uri string) bool {
	_, ok := s.Subscriptions[uri]
	return ok
}
