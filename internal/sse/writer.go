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
// Batches: Queue encodes an event without writing it; the next write
// (Flush, or any other) sends the queued events ahead of its own in one
// Write and one flush, so events that are ready together cost one
// syscall, not one each. Queued events past maxQueued bytes are written
// and flushed by Queue itself, which bounds the buffer. Close and Detach
// drop queued events that were not flushed (Detach's retry hint sends
// them first).
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

	mu       sync.Mutex
	started  bool
	last     bool // the last event is queued: writes no longer flush (QueueLast)
	replaced bool // Replace gave the writer another response
	err      error
	buf      []byte      // the queued events, then the write in progress
	keep     *time.Timer // nil until Start, or without keep-alives

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
func (s *Writer) Start(header func(http.Header)) { s.start(header, true) }

// StartBuffered is Start but for the flush: the headers wait in the
// response's buffer for the first write (Flush, a keep-alive or any
// other), which sends them with its events in one write. It suits a
// stream whose first event is on its way.
func (s *Writer) StartBuffered(header func(http.Header)) { s.start(header, false) }

func (s *Writer) start(header func(http.Header), flush bool) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return
	}
	s.started = true
	if !flush {
		defer s.mu.Unlock()
		if s.err == nil {
			s.writeHeader(header)
		}
		return
	}
	s.mu.Unlock()
	_ = s.write(func(b []byte) []byte {
		s.writeHeader(header)
		return b
	})
}

// writeHeader writes the stream's headers (not flushed) and arms the
// keep-alives; s.mu is held.
func (s *Writer) writeHeader(header func(http.Header)) {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	if header != nil {
		header(h)
	}
	s.w.WriteHeader(http.StatusOK)
	if s.opts.KeepAlive > 0 {
		s.keep = time.AfterFunc(s.opts.KeepAlive, s.keepAlive)
	}
}

// keepAlive is the keep-alive timer's function. A failed keep-alive
// ends the writer like any failed write.
func (s *Writer) keepAlive() { _ = s.Comment(keepAliveText) }

// maxQueued bounds the bytes of the events Queue holds: past it, Queue
// writes and flushes them. A buffer grown past maxKept (by a batch or a
// large event) is dropped after its write, so an idle stream keeps a
// small one.
const (
	maxQueued = 32 << 10
	maxKept   = 4 << 10
)

// write appends to the queued events what fn appends (fn may be nil),
// writes the lot in one Write under the write deadline, and flushes.
// Once a write failed, every later one fails at once with the same
// error.
func (s *Writer) write(fn func([]byte) []byte) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	return s.writeLocked(fn)
}

// writeLocked is write with s.mu held (and s.err nil); it unlocks.
func (s *Writer) writeLocked(fn func([]byte) []byte) error {
	if fn != nil {
		s.buf = fn(s.buf)
	}
	if s.opts.WriteTimeout > 0 {
		// Not every ResponseWriter can: then writes are unbounded.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	}
	s.busy.Store(time.Now().UnixNano())
	var err error
	if len(s.buf) > 0 {
		_, err = s.w.Write(s.buf)
		if cap(s.buf) > maxKept {
			s.buf = nil
		} else {
			s.buf = s.buf[:0]
		}
	}
	if err == nil && (!s.last || s.replaced) {
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

// Event writes one event (after the queued ones) and flushes.
func (s *Writer) Event(ev Event) error {
	return s.write(func(b []byte) []byte { return AppendEvent(b, ev) })
}

// Queue encodes ev after the queued events, to be written by the next
// write (see the type's doc): Flush when nothing else follows. It fails
// as a write would once the writer ended.
func (s *Writer) Queue(ev Event) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.buf = AppendEvent(s.buf, ev)
	if len(s.buf) < maxQueued {
		s.mu.Unlock()
		return nil
	}
	return s.writeLocked(nil)
}

// QueueLast is Queue for the stream's last event: from then on writes
// (the Flush that sends it included) leave what they write in the
// response's buffer, for the response's end to send with the end of the
// body in one write rather than a flush of its own. The writer must be
// closed once the last event is written, and the handler return: until
// it does, the client does not have the event. A writer whose response
// was replaced (Replace), which net/http does not end, flushes as always.
func (s *Writer) QueueLast(ev Event) error {
	s.mu.Lock()
	if s.err == nil {
		s.last = true
	}
	s.mu.Unlock()
	return s.Queue(ev)
}

// Flush writes the queued events in one Write and flushes; it does
// nothing when none are queued.
func (s *Writer) Flush() error {
	s.mu.Lock()
	if s.err != nil || len(s.buf) == 0 {
		err := s.err
		s.mu.Unlock()
		return err
	}
	return s.writeLocked(nil)
}

// Comment writes a comment (ignored by clients) and flushes.
func (s *Writer) Comment(text string) error {
	return s.write(func(b []byte) []byte { return AppendComment(b, text) })
}

// Retry writes a retry hint: a block with only a retry field, so no
// event is dispatched, telling the client how long to wait before it
// reconnects.
func (s *Writer) Retry(d time.Duration) error {
	return s.write(func(b []byte) []byte {
		b = append(b, "retry: "...)
		b = strconv.AppendInt(b, d.Milliseconds(), 10)
		return append(b, "\n\n"...)
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
	s.w, s.rc, s.replaced = w, http.NewResponseController(w), true
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
		if s.last && !s.replaced && err == ErrClosed {
			// The response's end writes the last event (QueueLast): a
			// client that stops reading must not hold that write either.
			// net/http lifts the deadline once the response is finished,
			// before the connection serves another request.
			_ = s.rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		} else {
			_ = s.rc.SetWriteDeadline(time.Time{})
		}
	}
}
