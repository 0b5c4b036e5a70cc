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
// type, whose wireForm gives its fields on the wire, and one entry of
// busKinds, which reads it off the wire and handles it on a node:
// Encode, Decode and Node.onBus know no kind by name.
//
// Wire form (compatible with every release since the bus was added, so
// nodes of mixed releases keep talking during a rolling upgrade): one
// JSON object {"t": kind, "s": session, "i": request id key, "c":
// connection id, "m": method, "u": uri, "a": acknowledgement token, "f":
// sending instance}, the fields a kind does not use left out. Fields a
// decoder does not know are ignored, so a newer release may add some; a
// kind it does not know is ErrUnknownKind, which a receiver counts and
// skips (Node.skip).
type Message interface {
	// wireForm returns the message's wire form, its kind included.
	wireForm() wire
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

func (m SessionEnded) wireForm() wire      { return wire{T: "end", S: m.Session, A: m.Ack} }
func (m CancelRequest) wireForm() wire     { return wire{T: "cancel", S: m.Session, I: m.ID} }
func (m InvalidateSession) wireForm() wire { return wire{T: "inv", S: m.Session, A: m.Ack} }
func (m Invalidated) wireForm() wire       { return wire{T: "invd", S: m.Session, A: m.Ack, F: m.From} }
func (m MemberJoined) wireForm() wire      { return wire{T: "join", F: m.Instance} }
func (m GetDropped) wireForm() wire        { return wire{T: "getdrop", S: m.Session} }
func (m GetTakeover) wireForm() wire       { return wire{T: "takeover", S: m.Session, C: m.Conn} }
func (m ListenNotify) wireForm() wire      { return wire{T: "ln", M: m.Method, U: m.URI} }
func (RegistryChanged) wireForm() wire     { return wire{T: "reg"} }

// busKinds holds every kind of message a node handles: how it is read
// off the wire (the fields it cannot do without), what the node does
// with it, and (in the comment) what makes up for its loss, since the
// bus delivers only to nodes connected when a message is published (see
// resync.go). Encode refuses a kind that has no entry. It is filled by
// init: its handlers reach Encode, which reads it.
var busKinds map[string]busKind

func init() {
	busKinds = kindTable(
		// Lost: a node whose bus comes back checks every session it runs
		// requests or holds streams of (resync).
		kindOf(func(w wire) (SessionEnded, error) {
			return SessionEnded{Session: w.S, Ack: w.A}, w.need("session", w.S)
		}, func(n *Node, m SessionEnded) { n.acknowledge(m.Session, m.Ack, n.endLocal(m.Session)) }),
		// Lost: the cancellation is also recorded (for HistoryTTL), and a
		// node whose bus comes back checks its running requests (resync).
		kindOf(func(w wire) (CancelRequest, error) {
			return CancelRequest{Session: w.S, ID: w.I}, w.need("session", w.S, "request id", w.I)
		}, func(n *Node, m CancelRequest) { n.Local.cancel(m.Session, m.ID) }),
		// Lost: cached sessions are dropped when the bus comes back, and
		// the cache is bypassed while it is down.
		kindOf(func(w wire) (InvalidateSession, error) {
			return InvalidateSession{Session: w.S, Ack: w.A}, w.need("session", w.S)
		}, func(n *Node, m InvalidateSession) { n.acknowledge(m.Session, m.Ack, n.Sessions.Invalidate(m.Session)) }),
		// Lost: its sender answers its client anyway after EchoWait
		// (echo.go).
		kindOf(func(w wire) (Invalidated, error) {
			return Invalidated{Session: w.S, Ack: w.A, From: w.F}, w.need("token", w.A, "sender", w.F)
		}, func(n *Node, m Invalidated) { n.acknowledged(m.Ack, m.From) }),
		// Lost: the view of the members is reloaded every LeaseTTL/3.
		kindOf(func(w wire) (MemberJoined, error) {
			return MemberJoined{Instance: w.F}, w.need("instance", w.F)
		}, func(n *Node, m MemberJoined) { n.members.add(m.Instance) }),
		// Lost: the waiter of a request sent on the stream also watches
		// the stream's claim, which lives as long as the holder's
		// membership lease.
		kindOf(func(w wire) (GetDropped, error) {
			return GetDropped{Session: w.S}, w.need("session", w.S)
		}, func(n *Node, m GetDropped) { n.Waiters.FailTag(m.Session, "get", ErrGetDropped) }),
		// Lost: a node whose bus comes back renews every claim its
		// streams hold at once, which ends those another connection took
		// (and the node-wide renewal every ClaimTTL/4 would find them
		// too).
		kindOf(func(w wire) (GetTakeover, error) {
			return GetTakeover{Session: w.S, Conn: w.C}, w.need("session", w.S, "connection", w.C)
		}, (*Node).takeover),
		// Lost: nothing keeps it, so a node whose bus comes back ends its
		// listen streams without their result, which tells clients to
		// listen again (SPEC §7.3).
		kindOf(func(w wire) (ListenNotify, error) {
			return ListenNotify{Method: w.M, URI: w.U}, w.need("method", w.M)
		}, (*Node).notifyListeners),
		// Lost: Config.Refresh runs when the bus comes back and on every
		// heartbeat.
		kindOf(func(wire) (RegistryChanged, error) { return RegistryChanged{}, nil },
			func(n *Node, _ RegistryChanged) { n.refreshSoon() }),
		// Lost: task waiters poll the record every poll interval, and a
		// task's runner every LeaseTTL/3 (tasks.go).
		kindOf(func(w wire) (TaskChanged, error) {
			return TaskChanged{ID: w.I}, w.need("task id", w.I)
		}, func(n *Node, m TaskChanged) { n.onTaskChanged(m.ID) }),
	)
}

// busKind is one kind of message: decode reads it off the wire, handle
// runs it on a node.
type busKind struct {
	name   string
	decode func(wire) (Message, error)
	handle func(*Node, Message)
}

// kindOf returns the entry of message type M: its kind is the one M's
// wireForm writes, and handle takes an M, so an entry cannot decode one
// type and hand another to its handler.
func kindOf[M Message](decode func(wire) (M, error), handle func(*Node, M)) busKind {
	var zero M
	return busKind{
		name: zero.wireForm().T,
		decode: func(w wire) (Message, error) {
			m, err := decode(w)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		handle: func(n *Node, m Message) { handle(n, m.(M)) },
	}
}

// kindTable indexes entries by kind; two entries of one kind, or one
// without a kind or a handler, are a programming error.
func kindTable(entries ...busKind) map[string]busKind {
	t := make(map[string]busKind, len(entries))
	for _, k := range entries {
		if _, dup := t[k.name]; dup || k.name == "" || k.decode == nil || k.handle == nil {
			panic(fmt.Sprintf("coordinator: bus kind %q declared twice, or without a handler", k.name))
		}
		t[k.name] = k
	}
	return t
}

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

// need returns ErrMalformed naming the first field of fields, pairs of
// a field's name and its value, whose value is empty.
func (w wire) need(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return fmt.Errorf("%w: %q without %s", ErrMalformed, w.T, fields[i])
		}
	}
	return nil
}

// ErrUnknownKind is returned by Decode for a message of a kind this
// release does not know (sent by a newer one).
var ErrUnknownKind = errors.New("coordinator: unknown bus message kind")

// ErrMalformed is returned by Decode for a payload that is not a message.
var ErrMalformed = errors.New("coordinator: malformed bus message")

// Encode returns the wire form of m: an error when m is nil or of a kind
// busKinds has no entry for (receivers would skip it).
func Encode(m Message) ([]byte, error) {
	if m == nil {
		return nil, errors.New("coordinator: cannot encode a nil bus message")
	}
	w := m.wireForm()
	if _, ok := busKinds[w.T]; !ok {
		return nil, fmt.Errorf("coordinator: bus message %T of kind %q has no entry in busKinds", m, w.T)
	}
	return json.Marshal(w)
}

// Decode returns the message of a wire form: ErrMalformed when b is not
// one (not a JSON object, or a field a kind needs is missing),
// ErrUnknownKind when its kind is not known here.
func Decode(b []byte) (Message, error) {
	_, m, err := decode(b)
	return m, err
}

// decode returns the message of a wire form and the entry of its kind.
func decode(b []byte) (busKind, Message, error) {
	var w wire
	if err := w.unmarshal(b); err != nil {
		return busKind{}, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if w.T == "" {
		return busKind{}, nil, fmt.Errorf("%w: no kind", ErrMalformed)
	}
	k, ok := busKinds[w.T]
	if !ok {
		return busKind{}, nil, fmt.Errorf("%w %q", ErrUnknownKind, w.T)
	}
	m, err := k.decode(w)
	return k, m, err
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
