package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// TopicAll is the bus topic every node subscribes to: the messages of
// this file travel on it. Routed replies travel on each process's own
// topic (see Topic).
const TopicAll = "all"

// The messages nodes send each other on TopicAll. Each kind is one Go
// type; Encode and Decode are the only code that knows the wire form.
//
// Wire form (compatible with every release since the bus was added, so
// nodes of mixed releases keep talking during a rolling upgrade): one
// JSON object {"t": kind, "s": session, "i": request id key, "c":
// connection id, "m": method, "u": uri, "a": acknowledgement token, "f":
// sending instance}, the fields a kind does not use left out. Fields a decoder does not know are ignored, so a newer
// release may add some; a kind it does not know is ErrUnknownKind, which
// a receiver counts and skips.
type Message interface {
	kind() string
}

// SessionEnded tells every node that a session was deleted: each ends
// what it holds of it (cached state, waiters, running requests, streams)
// and, when Ack is set, acknowledges it (Invalidated).
type SessionEnded struct{ Session, Ack string }

// CancelRequest cancels a request of a session wherever it runs.
type CancelRequest struct{ Session, ID string }

// InvalidateSession drops a session from every node's cache; when Ack is
// set, each node acknowledges it (Invalidated).
type InvalidateSession struct{ Session, Ack string }

// Invalidated acknowledges, to the node that sent it (the instance
// before the "|" of Ack), that instance From dropped its copy of a
// session (see Echo).
type Invalidated struct{ Session, Ack, From string }

// MemberJoined tells every node that an instance joined the cluster, so
// that it waits for its acknowledgements at once, before its view of the
// members is next refreshed.
type MemberJoined struct{ Instance string }

// GetDropped tells that a session's GET stream closed: requests sent on
// it fail.
type GetDropped struct{ Session string }

// GetTakeover tells that connection Conn took over a session's GET
// stream: other connections holding it end if they lost the claim.
type GetTakeover struct{ Session, Conn string }

// ListenNotify carries a notification (method, and uri for
// resources/updated) to every node's listen streams.
type ListenNotify struct{ Method, URI string }

// RegistryChanged tells every node to reload the enabled state of
// features.
type RegistryChanged struct{}

func (SessionEnded) kind() string      { return "end" }
func (CancelRequest) kind() string     { return "cancel" }
func (InvalidateSession) kind() string { return "inv" }
func (GetDropped) kind() string        { return "getdrop" }
func (GetTakeover) kind() string       { return "takeover" }
func (ListenNotify) kind() string      { return "ln" }
func (RegistryChanged) kind() string   { return "reg" }
func (Invalidated) kind() string       { return "invd" }
func (MemberJoined) kind() string      { return "join" }

// wire is the JSON form of every message.
type wire struct {
	T string `json:"t"`
	S string `json:"s,omitempty"`
	I string `json:"i,omitempty"`
	C string `json:"c,omitempty"`
	M string `json:"m,omitempty"`
	U string `json:"u,omitempty"`
	A string `json:"a,omitempty"`
	F string `json:"f,omitempty"`
}

// ErrUnknownKind is returned by Decode for a message of a kind this
// release does not know (sent by a newer one).
var ErrUnknownKind = errors.New("coordinator: unknown bus message kind")

// ErrMalformed is returned by Decode for a payload that is not a message.
var ErrMalformed = errors.New("coordinator: malformed bus message")

// Encode returns the wire form of m.
func Encode(m Message) ([]byte, error) {
	var w wire
	switch m := m.(type) {
	case SessionEnded:
		w = wire{S: m.Session, A: m.Ack}
	case CancelRequest:
		w = wire{S: m.Session, I: m.ID}
	case InvalidateSession:
		w = wire{S: m.Session, A: m.Ack}
	case Invalidated:
		w = wire{S: m.Session, A: m.Ack, F: m.From}
	case MemberJoined:
		w = wire{F: m.Instance}
	case GetDropped:
		w = wire{S: m.Session}
	case GetTakeover:
		w = wire{S: m.Session, C: m.Conn}
	case ListenNotify:
		w = wire{M: m.Method, U: m.URI}
	case RegistryChanged:
	case TaskChanged:
		w = wire{I: m.ID}
	default:
		return nil, fmt.Errorf("coordinator: cannot encode bus message %T", m)
	}
	w.T = m.kind()
	return json.Marshal(w)
}

// Decode returns the message of a wire form: ErrMalformed when b is not
// one (not a JSON object, or a field a kind needs is missing),
// ErrUnknownKind when its kind is not known here.
func Decode(b []byte) (Message, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	need := func(field, v string, m Message) (Message, error) {
		if v == "" {
			return nil, fmt.Errorf("%w: %q without %s", ErrMalformed, w.T, field)
		}
		return m, nil
	}
	switch w.T {
	case "end":
		return need("session", w.S, SessionEnded{Session: w.S, Ack: w.A})
	case "cancel":
		if w.I == "" {
			return nil, fmt.Errorf("%w: %q without request id", ErrMalformed, w.T)
		}
		return need("session", w.S, CancelRequest{Session: w.S, ID: w.I})
	case "inv":
		return need("session", w.S, InvalidateSession{Session: w.S, Ack: w.A})
	case "invd":
		if w.A == "" || w.F == "" {
			return nil, fmt.Errorf("%w: %q without token or sender", ErrMalformed, w.T)
		}
		return Invalidated{Session: w.S, Ack: w.A, From: w.F}, nil
	case "join":
		return need("instance", w.F, MemberJoined{Instance: w.F})
	case "getdrop":
		return need("session", w.S, GetDropped{Session: w.S})
	case "takeover":
		if w.C == "" {
			return nil, fmt.Errorf("%w: %q without connection", ErrMalformed, w.T)
		}
		return need("session", w.S, GetTakeover{Session: w.S, Conn: w.C})
	case "ln":
		return need("method", w.M, ListenNotify{Method: w.M, URI: w.U})
	case "reg":
		return RegistryChanged{}, nil
	case "task":
		if w.I == "" {
			return nil, fmt.Errorf("%w: %q without task id", ErrMalformed, w.T)
		}
		return TaskChanged{ID: w.I}, nil
	case "":
		return nil, fmt.Errorf("%w: no kind", ErrMalformed)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKind, w.T)
}

// Reply is a client's reply to a server→client request, routed from the
// node that received it to the process that waits for it, on that
// process's topic (see Topic). Wire form: {"s": session, "p": principal
// id, "i": id key, "r": result, "e": error, "t": trace context}; "p" is
// left out without authentication, which is the form of releases before
// it was added.
type Reply struct {
	Session string `json:"s"`
	// Principal is the id of the caller who posted the reply ("" without
	// authentication): the waiter takes it only from its session's
	// caller.
	Principal string          `json:"p,omitempty"`
	ID        string          `json:"i"`
	Result    json.RawMessage `json:"r,omitempty"`
	Error     *jsonrpc.Error  `json:"e,omitempty"`
	// Trace carries the W3C trace context of the node that received the
	// reply, so the routed reply stays in the same trace.
	Trace map[string]string `json:"t,omitempty"`
}

// EncodeReply returns the wire form of r.
func EncodeReply(r Reply) ([]byte, error) { return json.Marshal(r) }

// DecodeReply returns the reply of a wire form: ErrMalformed when b is
// not one (or names no request id).
func DecodeReply(b []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if r.ID == "" {
		return Reply{}, fmt.Errorf("%w: reply without request id", ErrMalformed)
	}
	return r, nil
}
