package sse

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// WriteTimeout bounds each write (with its flush), through the
	// response's write deadline, so that a client that stops reading
	// cannot pin the writer. Zero leaves writes unbounded; so does a
	// ResponseWriter that cannot set deadlines.
	WriteTimeout time.Duration
	// KeepAlive, when positive, is how long the stream may stay quiet
	// after it started: once no write happened for KeepAlive, the
	// writer sends a comment keep-alive.
	KeepAlive time.Duration
	// OnFail, when set, is called once, without the writer's lock held,
	// when a write fails (a keep-alive included). Closing or detaching
	// the writer is not a failure.
	OnFail func()
}

// ErrClosed is the error of writes after Close.
var ErrClosed = errors.New("sse: writer closed")

// ErrDetached is the error of writes after Detach.
var ErrDetached = errors.New("sse: stream detached from its connection")

// keepAliveText is the comment a keep-alive sends.
const keepAliveText = "keep-alive"

// Writer writes an event stream to one HTTP response.
//
// Concurrency: every method is safe for concurrent use. Writes are
// serialized, so events, comments, retry hints and keep-alives never
// interleave, and each is flushed before the next starts.
//
// Write deadlines: each write may block for at most
// WriterOptions.WriteTimeout. The first write that fails (by the
// deadline or otherwise) ends the writer: OnFail runs once, and every
// later write returns the same error at once.
//
// Keep-alive: after Start, a comment is sent whenever the stream was
// quiet for WriterOptions.KeepAlive; the one timer behind it is re-armed
// by each write and stopped when the writer ends, so a busy stream sends
// no keep-alives and an ended one holds no goroutine or timer.
//
// Close is idempotent and may race with writes: once it returns, no
// write is in progress and none will start, as a ResponseWriter must not
// be used after its handler returned. It also lifts the write deadline,
// which would otherwise outlive the response on a kept-alive connection.
type Writer struct {
	opts WriterOptions
	w    http.ResponseWriter
	rc   *http.ResponseController

	mu      sync.Mutex
	started bool
	err     error
	buf     []byte
	keep    *time.Timer // nil until Start, or without keep-alives

	busy atomic.Int64 // start of the write in progress (unix ns), 0 when idle
}

// NewWriter returns a Writer on w. Nothing is sent before Start.
func NewWriter(w http.ResponseWriter, opts WriterOptions) *Writer {
	return &Writer{opts: opts, w: w, rc: http.NewResponseController(w)}
}

// Start sends the headers of an event stream (once; later calls do
// nothing) and starts the keep-alives. header, when set, may add
// headers. Start sends X-Accel-Buffering: no, so that proxies pass
// events on at once.
func (s *Writer) Start(header func(http.Header)) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.mu.Unlock()
	_ = s.write(func() error {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("X-Accel-Buffering", "no")
		h.Set("Connection", "keep-alive")
		if header != nil {
			header(h)
		}
		s.w.WriteHeader(http.StatusOK)
		if s.opts.KeepAlive > 0 && s.err == nil {
			s.keep = time.AfterFunc(s.opts.KeepAlive, s.keepAlive)
		}
		return nil
	})
}

// keepAlive is the keep-alive timer's function. A failed keep-alive
// ends the writer like any failed write.
func (s *Writer) keepAlive() { _ = s.Comment(keepAliveText) }

// write runs fn (which writes to s.w) under the write deadline and
// flushes. Once a write failed, every later one fails at once with the
// same error.
func (s *Writer) write(fn func() error) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.opts.WriteTimeout > 0 {
		// Not every ResponseWriter can: then writes are unbounded.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	}
	s.busy.Store(time.Now().UnixNano())
	err := fn()
	if err == nil {
		err = s.rc.Flush()
	}
	s.busy.Store(0)
	s.err = err
	if s.keep != nil {
		if err == nil {
			s.keep.Reset(s.opts.KeepAlive)
		} else {
			s.keep.Stop()
		}
	}
	s.mu.Unlock()
	if err != nil && s.opts.OnFail != nil {
		s.opts.OnFail()
	}
	return err
}

// BlockedFor reports how long the write in progress has been blocked
// (zero when no write is in progress).
func (s *Writer) BlockedFor() time.Duration {
	if t := s.busy.Load(); t != 0 {
		return time.Since(time.Unix(0, t))
	}
	return 0
}

// Event writes one event and flushes.
func (s *Writer) Event(ev Event) error {
	return s.write(func() error {
		s.buf = AppendEvent(s.buf[:0], ev)
		_, err := s.w.Write(s.buf)
		return err
	})
}

// Comment writes a comment (ignored by clients) and flushes.
func (s *Writer) Comment(text string) error {
	return s.write(func() error { return WriteComment(s.w, text) })
}

// Retry writes a retry hint: a block with only a retry field, so no
// event is dispatched, telling the client how long to wait before it
// reconnects.
func (s *Writer) Retry(d time.Duration) error {
	return s.write(func() error {
		s.buf = append(s.buf[:0], "retry: "...)
		s.buf = strconv.AppendInt(s.buf, d.Milliseconds(), 10)
		s.buf = append(s.buf, "\n\n"...)
		_, err := s.w.Write(s.buf)
		return err
	})
}

// Detach sends a retry hint and ends the writer with ErrDetached: the
// server closes the connection while the stream goes on elsewhere (in
// its history), and the client resumes with Last-Event-ID.
func (s *Writer) Detach(hint time.Duration) {
	_ = s.Retry(hint)
	s.end(ErrDetached)
}

// Replace hands the writer's response to fn, between writes, and goes
// on writing to the response fn returns: fn may take the connection
// over from net/http (see http.Hijacker) and return a writer of its own
// on it. When fn fails, the writer keeps its response. Replace fails at
// once, without calling fn, once the writer ended.
func (s *Writer) Replace(fn func(http.ResponseWriter) (http.ResponseWriter, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	w, err := fn(s.w)
	if err != nil {
		return err
	}
	s.w, s.rc = w, http.NewResponseController(w)
	return nil
}

// Close ends the writer with ErrClosed (see the type's doc).
func (s *Writer) Close() { s.end(ErrClosed) }

// end stops all further writes with err; the first to end a healthy
// writer stops the keep-alives and lifts the write deadline.
func (s *Writer) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	if s.keep != nil {
		s.keep.Stop()
	}
	if s.opts.WriteTimeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}
