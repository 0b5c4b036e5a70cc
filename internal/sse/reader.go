package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// DefaultMaxEventBytes is the event size bound a Reader uses when
// NewReader is given a non-positive limit.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned by Reader.Next when an event (the bytes of
// all its lines, comments included) exceeds the Reader's bound.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// Reader parses a Server-Sent Events stream following the WHATWG
// EventSource processing model: lines end at "\n", "\r\n" or "\r"; a
// leading byte order mark is skipped; lines starting with ':' are
// comments; a field line is "name" or "name:value" with one optional
// space after the colon; "data" lines accumulate; "id" persists across
// events (and is ignored if it contains NUL); "retry" takes a decimal
// number of milliseconds; unknown fields are ignored; a blank line
// dispatches the event unless no data line was seen. An incomplete event
// at the end of the stream is discarded.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br       *bufio.Reader
	max      int
	size     int  // bytes of the event being assembled, terminators excluded
	skipLF   bool // the previous line ended in CR; a following LF belongs to it
	started  bool // the optional byte order mark has been handled
	err      error
	line     []byte
	data     []byte
	hasData  bool
	name     string
	lastID   string
	retry    time.Duration
	retrySet bool
	comments int
}

// NewReader returns a Reader that reads from r and fails with
// ErrEventTooLarge on any event larger than maxEventBytes
// (DefaultMaxEventBytes if maxEventBytes <= 0).
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{br: bufio.NewReader(r), max: maxEventBytes}
}

// Next returns the next dispatched event. Event.ID is the last event id
// in effect (ids persist until changed), Event.Name is the "event" field
// ("" if absent, which clients treat as "message"), and Event.Retry is the
// last valid "retry" value seen within this event's lines, or zero.
// Next returns io.EOF at the end of the stream; errors (including
// ErrEventTooLarge) are sticky.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			ev, ok := r.dispatch()
			if ok {
				return ev, nil
			}
			continue
		}
		r.field(line)
	}
}

// LastEventID returns the id that a reconnecting client would send as
// Last-Event-ID: the id in effect after the last complete event block.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the most recent valid "retry" value seen, or zero.
func (r *Reader) Retry() time.Duration { return r.retry }

// Comments returns the number of comment lines read so far, which lets
// tests observe keep-alives.
func (r *Reader) Comments() int { return r.comments }

func (r *Reader) dispatch() (Event, bool) {
	ev := Event{ID: r.lastID, Name: r.name}
	if r.retrySet {
		ev.Retry = r.retry
	}
	ok := r.hasData
	if ok {
		data := r.data
		if n := len(data); n > 0 && data[n-1] == '\n' {
			data = data[:n-1]
		}
		ev.Data = bytes.Clone(data)
		if ev.Data == nil {
			ev.Data = []byte{}
		}
	}
	r.data = r.data[:0]
	r.hasData = false
	r.name = ""
	r.retrySet = false
	r.size = 0
	return ev, ok
}

func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		r.comments++
		return
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "event":
		r.name = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			r.retry = time.Duration(ms) * time.Millisecond
			r.retrySet = true
		}
	}
}

// parseDigits parses a non-empty run of ASCII digits as milliseconds,
// saturating at the largest representable time.Duration.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	const limit = math.MaxInt64 / int64(time.Millisecond)
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= limit {
			n = n*10 + int64(c-'0')
		}
	}
	return min(n, limit), true
}

// readLine returns the next line without its terminator. The returned
// slice is valid until the next call. A partial line at end of input is
// discarded and io.EOF returned.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if _, err := r.br.Peek(1); err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("sse: read: %w", err)
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if !r.started {
			r.started = true
			if bytes.HasPrefix(buf, []byte("\xEF\xBB\xBF")) {
				r.br.Discard(3)
				continue
			}
			if len(buf) < 3 && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), buf) {
				// Possibly a split byte order mark: wait for more input.
				if full, err := r.br.Peek(3); err == nil && bytes.Equal(full, []byte("\xEF\xBB\xBF")) {
					r.br.Discard(3)
				}
				continue
			}
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if r.size+n > r.max {
			return nil, ErrEventTooLarge
		}
		r.size += n
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			r.br.Discard(n)
			continue
		}
		r.skipLF = buf[i] == '\r'
		r.br.Discard(i + 1)
		return r.line, nil
	}
}
