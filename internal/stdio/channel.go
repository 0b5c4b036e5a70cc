// Package stdio implements the full-duplex channel under MCP's stdio
// transport: one byte stream in each direction, each carrying
// newline-delimited JSON-RPC messages, with traffic flowing both ways at
// once. The server transport (our stdin/stdout) and the client transport
// (the stdin/stdout of an upstream server process) share it.
//
// A Channel has one read loop, Run, which demultiplexes inbound lines:
// responses complete the matching outbound Call, requests and
// notifications go to Options.OnInbound, batch arrays go to
// Options.OnBatch or are split, and lines that are not valid messages go
// to Options.OnInvalid. Outbound messages go through one serialized
// writer, so each message is one whole line on the wire.
//
// # Concurrency contract
//
//   - Run must be called at most once. It blocks its caller until the input
//     ends, reading fails, ctx is done or Close is called, and it calls the
//     Options callbacks from its own goroutine, one line at a time, in input
//     order.
//   - Send, SendRaw, Call, CallWithID, Deliver, Close, Done and Pending are
//     safe for concurrent use, by any number of goroutines, including from
//     within the callbacks. A callback must not wait for a Call on the same
//     channel to complete: the reply can only be read once the callback has
//     returned.
//   - Writes are serialized: concurrent Sends never interleave their bytes,
//     and w needs no locking of its own. A Send blocked in w.Write holds up
//     the other writers until it returns (or, once the channel is closed,
//     they fail at once).
//   - Close is idempotent. It fails every pending Call at once, makes every
//     later Send and Call fail fast, and makes Run return. It does not close
//     r or w: the owner of the streams closes them (for example the pipes of
//     a child process), and that is the only way to unblock a Read or Write
//     already in progress.
//   - Once Run has returned, the channel is closed; except at end of input
//     with Options.SendAfterEOF, where only the inbound side has ended: calls
//     fail, sends work until Close.
//
// Errors: a Call that cannot complete because the channel closed returns an
// error matching jsonrpc.ErrConnectionClosed under errors.Is (and
// jsonrpc.AsError turns it into that JSON-RPC error); a Call whose context
// deadline passed also matches jsonrpc.ErrRequestTimeout and
// context.DeadlineExceeded; an error reply from the peer is returned as the
// peer's *jsonrpc.Error itself.
package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/rs/zerolog"
)

// DefaultMaxLineBytes is the inbound line limit when Options.MaxLineBytes
// is zero.
const DefaultMaxLineBytes = 4 << 20

// Errors returned by the channel for mistakes of its caller.
var (
	// ErrDuplicateID: CallWithID was given an id that a pending call
	// already uses.
	ErrDuplicateID = errors.New("stdio: id already pending")
	// ErrInvalidLine: SendRaw was given an empty line or a line that
	// contains a newline, which would break the framing.
	ErrInvalidLine = errors.New("stdio: a line must be non-empty and contain no newline")
)

// Options configures a Channel. The zero value is valid: 4 MiB lines, no
// logging, integer request ids, and inbound requests, notifications and
// invalid lines dropped (and logged).
type Options struct {
	// MaxLineBytes is the largest inbound line accepted, in bytes, not
	// counting the terminating newline. 0 means DefaultMaxLineBytes. A
	// longer line is discarded up to its newline without being buffered
	// whole, reported through OnInvalid as an invalid request (id unknown),
	// and reading goes on with the next line.
	MaxLineBytes int

	// Logger receives the channel's diagnostics (dropped lines, replies
	// that match no call). The zero value logs nothing, like zerolog.Nop().
	Logger zerolog.Logger

	// OnInbound handles an inbound request or notification; responses
	// never reach it. It is called from the read loop, so it must not
	// block for long: a server starts a goroutine per request. When nil,
	// inbound requests and notifications are dropped and logged, and the
	// peer gets no answer.
	OnInbound func(msg *jsonrpc.Message)

	// OnBatch, when set, receives every line that is a JSON array, whole
	// and undecoded: the line is valid JSON, but its members have not been
	// checked (the array may even be empty). The handler decodes and
	// answers it as a unit, and hands any response members to
	// Channel.Deliver. The line is the handler's to keep. When OnBatch is
	// nil, a batch is split and each member routed as if it had come on
	// its own line: responses to pending calls, requests and notifications
	// to OnInbound, invalid members to OnInvalid.
	OnBatch func(raw []byte)

	// OnResponse, when set, receives every response read (on a line of
	// its own, or a member of a batch when OnBatch is nil) instead of
	// Channel.Deliver, which it calls to hand the response to its call:
	// a server uses it to look at replies before they are delivered.
	OnResponse func(msg *jsonrpc.Message)

	// OnInvalid is told of every line that is not a valid message:
	// malformed JSON (code -32700), JSON that is not a JSON-RPC 2.0 message
	// (-32600, with err.ID set when the id could be read), and lines longer
	// than MaxLineBytes (-32600). A server answers with an error response
	// carrying err.ID (null when unknown); a client just logs. When nil,
	// invalid lines are logged and dropped.
	OnInvalid func(err *jsonrpc.DecodeError)

	// IDPrefix selects the ids of requests sent by Call: the strings
	// IDPrefix+"1", IDPrefix+"2", ... when IDPrefix is not empty, else the
	// integers 1, 2, .... Ids chosen through CallWithID share the pending
	// table with these: whichever call comes second while the first is
	// pending fails with ErrDuplicateID. A distinct prefix avoids that.
	IDPrefix string

	// SendAfterEOF keeps the outbound side open at end of input: every
	// pending Call fails at once and later ones fail fast, as no reply can
	// come any more, but Send and SendRaw keep working until Close, so that
	// a server can write the answers of requests still running. Run
	// returns nil at end of input either way; with SendAfterEOF its caller
	// calls Close once it is done writing. A read error, ctx or Close
	// close the channel as usual.
	SendAfterEOF bool
}

// Channel is a full-duplex JSON-RPC channel over a pair of byte streams.
// See the package documentation for its concurrency contract.
//
// The table of pending calls is not bounded by the channel: each entry
// belongs to a goroutine blocked in Call until the reply, its context or
// the channel's end, so its size is bounded by the callers. Callers bound
// their concurrency and give every Call a deadline.
type Channel struct {
	lr        *lineReader
	w         io.Writer
	opts      Options
	log       zerolog.Logger
	started   atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
	inputOnce sync.Once
	inputEnd  chan struct{} // closed when no reply can be read any more

	wmu  sync.Mutex // serializes writes to w; guards werr
	werr error      // sticky: after a failed write the framing on w is unknown

	mu       sync.Mutex // guards the fields below
	pending  map[jsonrpc.ID]chan *jsonrpc.Message
	nextID   uint64
	closeErr error // set once, before done is closed
	inputErr error // set once, before inputEnd is closed: the error of calls
}

// New returns a channel that reads messages from r and writes them to w.
// Nothing is read until Run is called; Send and Call may be used before.
func New(r io.Reader, w io.Writer, opts Options) *Channel {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	return &Channel{
		lr:       newLineReader(r, opts.MaxLineBytes),
		w:        w,
		opts:     opts,
		log:      opts.Logger.With().Str("component", "stdio").Logger(),
		done:     make(chan struct{}),
		inputEnd: make(chan struct{}),
		pending:  make(map[jsonrpc.ID]chan *jsonrpc.Message),
	}
}

// Done returns a channel that is closed when the Channel closes: Close was
// called or Run returned.
func (c *Channel) Done() <-chan struct{} { return c.done }

// Pending reports how many calls are waiting for their reply.
func (c *Channel) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close closes the channel: every pending Call fails at once with an error
// matching jsonrpc.ErrConnectionClosed, every later Send and Call fails
// fast, and Run returns nil. It is idempotent and always returns nil. It
// does not close the underlying streams.
func (c *Channel) Close() error {
	c.shutdown(nil)
	return nil
}

// shutdown closes the channel once; cause, when not nil, explains why (end
// of input, read error, context) and is kept in the error pending and later
// calls get.
func (c *Channel) shutdown(cause error) {
	c.endInput(cause)
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closeErr = &closedError{cause: cause}
		c.mu.Unlock()
		close(c.done)
		c.log.Debug().AnErr("cause", cause).Msg("channel closed")
	})
}

// endInput fails every pending call and every later one: no reply can be
// read any more. It runs once, at end of input or when the channel closes.
func (c *Channel) endInput(cause error) {
	c.inputOnce.Do(func() {
		c.mu.Lock()
		c.inputErr = &closedError{cause: cause}
		// The waiters select on inputEnd; dropping their entries is all
		// the failing there is to do.
		clear(c.pending)
		c.mu.Unlock()
		close(c.inputEnd)
	})
}

// closed returns the error for an operation on a closed channel, or nil
// while the channel is open.
func (c *Channel) closed() error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closeErr
	default:
		return nil
	}
}

// closedError is the error of calls and sends that fail because the channel
// closed. It matches jsonrpc.ErrConnectionClosed. The cause is only named in
// the text: a call that failed because the input ended or because Run's
// context was cancelled must not look like io.EOF or like a cancellation of
// the call's own context.
type closedError struct{ cause error }

func (e *closedError) Error() string {
	switch {
	case e.cause == nil:
		return "stdio: channel closed"
	case errors.Is(e.cause, io.EOF):
		return "stdio: channel closed: end of input"
	}
	return "stdio: channel closed: " + e.cause.Error()
}

func (e *closedError) Unwrap() error { return jsonrpc.ErrConnectionClosed }

// Send writes msg as one line. It is safe for concurrent use; lines of
// concurrent Sends never interleave. It fails after Close, after a previous
// write to w failed, or when msg cannot be encoded.
func (c *Channel) Send(msg *jsonrpc.Message) error {
	b, err := jsonrpc.Encode(msg)
	if err != nil {
		return fmt.Errorf("stdio: encode: %w", err)
	}
	// encoding/json never writes a raw newline (it compacts embedded raw
	// JSON and escapes control characters in strings), so b is one line.
	return c.write(append(b, '\n'))
}

// SendRaw writes line, which must be exactly one serialized JSON-RPC
// message, followed by a newline. The caller guarantees the message is
// valid; SendRaw only rejects an empty line or one containing '\n'
// (ErrInvalidLine), which would break the framing. It is otherwise like
// Send. line is not retained.
func (c *Channel) SendRaw(line []byte) error {
	if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
		return ErrInvalidLine
	}
	buf := make([]byte, len(line)+1)
	copy(buf, line)
	buf[len(line)] = '\n'
	return c.write(buf)
}

// write writes one newline-terminated line under the write lock.
func (c *Channel) write(buf []byte) error {
	// Fail fast after Close even while another Write is blocked holding
	// the lock.
	if err := c.closed(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.closed(); err != nil {
		return err
	}
	if c.werr != nil {
		return c.werr
	}
	if _, err := c.w.Write(buf); err != nil {
		// Part of the line may have been written; nothing written after
		// it could be framed correctly.
		c.werr = fmt.Errorf("stdio: write: %w", err)
		return c.werr
	}
	return nil
}

// Call sends a request for method with params (marshalled unless nil or
// already JSON) under a fresh id (see Options.IDPrefix) and waits for the
// reply. It returns the reply's result; or the peer's *jsonrpc.Error for an
// error reply; or, when ctx is done first, an error wrapping ctx.Err() (and
// jsonrpc.ErrRequestTimeout for a deadline), after which a late reply is
// ignored; or an error matching jsonrpc.ErrConnectionClosed when the
// channel closes first. Telling the peer about a cancelled call
// (notifications/cancelled) is up to the caller.
func (c *Channel) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	n := c.nextID
	c.mu.Unlock()
	id := jsonrpc.IntID(int64(n))
	if c.opts.IDPrefix != "" {
		id = jsonrpc.StringID(c.opts.IDPrefix + strconv.FormatUint(n, 10))
	}
	return c.call(ctx, id, method, params)
}

// CallWithID is Call with an id chosen by the caller, for clients that
// allocate ids themselves. It fails with ErrDuplicateID when a pending call
// already uses id. Replies are matched by exact id: the string "1" and the
// integer 1 are different ids.
func (c *Channel) CallWithID(ctx context.Context, id jsonrpc.ID, method string, params any) (json.RawMessage, error) {
	if !id.IsValid() {
		return nil, errors.New("stdio: CallWithID needs a valid id")
	}
	return c.call(ctx, id, method, params)
}

func (c *Channel) call(ctx context.Context, id jsonrpc.ID, method string, params any) (json.RawMessage, error) {
	if method == "" {
		return nil, errors.New("stdio: call needs a method")
	}
	req, err := jsonrpc.Request(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("stdio: call %s: %w", method, err)
	}
	line, err := jsonrpc.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("stdio: call %s: encode: %w", method, err)
	}
	if ctx.Err() != nil {
		return nil, c.ctxError(method, id, ctx)
	}

	reply := make(chan *jsonrpc.Message, 1) // Deliver never blocks
	c.mu.Lock()
	if c.inputErr != nil {
		err := c.inputErr
		c.mu.Unlock()
		return nil, err
	}
	if _, dup := c.pending[id]; dup {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateID, id)
	}
	c.pending[id] = reply
	c.mu.Unlock()

	if err := c.write(append(line, '\n')); err != nil {
		c.forget(id, reply)
		return nil, err
	}

	select {
	case msg := <-reply:
		return replyResult(msg)
	case <-ctx.Done():
		c.forget(id, reply)
		return nil, c.ctxError(method, id, ctx)
	case <-c.inputEnd:
		// A reply delivered just before the end still counts.
		select {
		case msg := <-reply:
			return replyResult(msg)
		default:
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, c.inputErr
	}
}

// forget removes the pending entry for id if it is still reply's.
func (c *Channel) forget(id jsonrpc.ID, reply chan *jsonrpc.Message) {
	c.mu.Lock()
	if c.pending[id] == reply {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *Channel) ctxError(method string, id jsonrpc.ID, ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stdio: call %s (id %s): %w: %w", method, id, jsonrpc.ErrRequestTimeout, err)
	}
	return fmt.Errorf("stdio: call %s (id %s): %w", method, id, err)
}

func replyResult(msg *jsonrpc.Message) (json.RawMessage, error) {
	if msg.Error != nil {
		return nil, msg.Error
	}
	return msg.Result, nil
}

// Deliver hands a response to the call waiting for its id and reports
// whether one was. The read loop uses it for every response it reads; an
// OnBatch handler uses it for the response members of a batch. A response
// that matches no pending call (unknown, already answered, or abandoned by
// its caller) is dropped and logged at debug level; so is a message that is
// not a response.
func (c *Channel) Deliver(msg *jsonrpc.Message) bool {
	if msg == nil || msg.Kind() != jsonrpc.KindResponse {
		return false
	}
	if !msg.ID.IsValid() {
		// The peer could not read the id of something we sent.
		c.log.Warn().Err(msg.Error).Msg("error response without id")
		return false
	}
	c.mu.Lock()
	reply, ok := c.pending[msg.ID]
	delete(c.pending, msg.ID)
	c.mu.Unlock()
	if !ok {
		c.log.Debug().Stringer("id", msg.ID).Msg("response matches no pending call; ignored")
		return false
	}
	reply <- msg
	return true
}
