package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Run is the read loop. It blocks until the input ends (it returns nil),
// reading fails (it returns the error), ctx is done (it returns ctx.Err())
// or Close is called (it returns nil); in every case pending calls fail at
// once when Run returns, and the channel is closed, unless the input ended
// and Options.SendAfterEOF keeps sends open until Close. Run must be called at
// most once; a second call returns an error.
//
// Lines are handled in input order, on the caller's goroutine: blank lines
// are skipped; responses complete their Call; requests and notifications go
// to Options.OnInbound; batches to Options.OnBatch or, split, member by
// member; anything else to Options.OnInvalid. The Read calls themselves run
// on a helper goroutine, so that Run can return on ctx or Close while a
// Read is blocked. That goroutine ends when its Read returns, and it never
// hands anything on after the channel closed; the owner of r ends a blocked
// Read by closing r.
func (c *Channel) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("stdio: Run called more than once")
	}
	lines := make(chan readResult)
	go c.readLines(lines)
	err, cause := c.loop(ctx, lines)
	if c.opts.SendAfterEOF && errors.Is(cause, io.EOF) {
		c.endInput(cause)
		return err
	}
	c.shutdown(cause)
	return err
}

// loop returns Run's error and the cause recorded in the closed channel.
func (c *Channel) loop(ctx context.Context, lines <-chan readResult) (err, cause error) {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err(), ctx.Err()
		case <-c.done:
			return nil, nil
		case r := <-lines:
			// Nothing is handled once the channel is closing, even when
			// the line raced the close.
			select {
			case <-ctx.Done():
				return ctx.Err(), ctx.Err()
			case <-c.done:
				return nil, nil
			default:
			}
			switch {
			case errors.Is(r.err, io.EOF):
				return nil, io.EOF
			case r.err != nil:
				err := fmt.Errorf("stdio: read: %w", r.err)
				return err, err
			case r.tooLong > 0:
				c.invalid(&jsonrpc.DecodeError{Err: jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
					"invalid request: line of %d bytes exceeds the limit of %d bytes", r.tooLong, c.opts.MaxLineBytes)})
			default:
				c.handleLine(r.line)
			}
		}
	}
}

// jsonSpace is the white space JSON allows around a value; a line of
// nothing else is blank.
const jsonSpace = " \t\r\n"

// readResult is one step of the reader: a line, an oversize line's length,
// or the error that ended the input.
type readResult struct {
	line    []byte
	tooLong int64
	err     error
}

// readLines reads lines and hands them to the read loop until the input
// ends or the channel closes.
func (c *Channel) readLines(out chan<- readResult) {
	for {
		line, tooLong, err := c.lr.next()
		if err == nil && tooLong == 0 && len(bytes.Trim(line, jsonSpace)) == 0 {
			continue
		}
		select {
		case out <- readResult{line: line, tooLong: tooLong, err: err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// handleLine routes one non-blank line.
func (c *Channel) handleLine(line []byte) {
	if !jsonrpc.IsBatch(line) {
		msg, err := jsonrpc.Decode(line)
		if err != nil {
			c.invalid(err)
			return
		}
		c.route(msg)
		return
	}
	if c.opts.OnBatch != nil {
		if !json.Valid(line) {
			c.invalid(&jsonrpc.DecodeError{Err: jsonrpc.Errorf(jsonrpc.CodeParseError, "parse error: malformed JSON")})
			return
		}
		c.opts.OnBatch(line)
		return
	}
	msgs, errs, _, err := jsonrpc.DecodeBatch(line)
	if err != nil {
		c.invalid(err)
		return
	}
	for i, msg := range msgs {
		if errs[i] != nil {
			c.invalid(errs[i])
			continue
		}
		c.route(msg)
	}
}

// route hands a decoded message to its consumer.
func (c *Channel) route(msg *jsonrpc.Message) {
	switch msg.Kind() {
	case jsonrpc.KindResponse:
		if c.opts.OnResponse != nil {
			c.opts.OnResponse(msg)
			return
		}
		c.Deliver(msg)
	case jsonrpc.KindRequest, jsonrpc.KindNotification:
		if c.opts.OnInbound == nil {
			c.log.Warn().Str("method", msg.Method).Stringer("id", msg.ID).Msg("no inbound handler; message dropped")
			return
		}
		c.opts.OnInbound(msg)
	default:
		c.invalid(&jsonrpc.DecodeError{ID: msg.ID, Err: jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC message")})
	}
}

// invalid reports a line (or batch member) that is not a valid message.
func (c *Channel) invalid(err error) {
	de, ok := jsonrpc.IsDecodeError(err)
	if !ok {
		de = &jsonrpc.DecodeError{Err: jsonrpc.Errorf(jsonrpc.CodeParseError, "parse error: %v", err)}
	}
	if c.opts.OnInvalid == nil {
		c.log.Warn().Err(de).Stringer("id", de.ID).Msg("invalid message dropped")
		return
	}
	c.opts.OnInvalid(de)
}

// lineReader splits a stream into newline-terminated lines of bounded
// length without ever buffering more than the bound.
type lineReader struct {
	br  *bufio.Reader
	max int64
}

// readBufferSize is the bufio buffer size; smaller limits use a smaller
// buffer.
const readBufferSize = 64 << 10

func newLineReader(r io.Reader, maxLine int) *lineReader {
	size := readBufferSize
	if maxLine < size {
		size = maxLine + 1
	}
	return &lineReader{br: bufio.NewReaderSize(r, size), max: int64(maxLine)}
}

// next returns the next line without its newline, in a slice the caller
// owns. A line longer than the limit is consumed through its newline and
// returned as tooLong, its length in bytes, with a nil line. A last line
// without a newline is still returned; after it, next returns io.EOF. A
// read error other than io.EOF drops the partial line and is returned.
func (lr *lineReader) next() (line []byte, tooLong int64, err error) {
	var n int64 // length of the line so far
	for {
		frag, err := lr.br.ReadSlice('\n')
		complete := err == nil // frag ends with the newline
		if complete {
			frag = frag[:len(frag)-1]
		}
		n += int64(len(frag))
		if n <= lr.max {
			line = append(line, frag...)
		} else {
			line = nil // past the limit: drop what was kept and count the rest
		}
		switch {
		case complete:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if n == 0 {
				return nil, 0, io.EOF
			}
		default:
			return nil, 0, err
		}
		if n > lr.max {
			return nil, n, nil
		}
		if line == nil {
			line = []byte{}
		}
		return line, 0, nil
	}
}
