package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// sseWriter writes SSE events to one HTTP response. It is safe for
// concurrent use: events, comments and keep-alives never interleave.
// Each write may block for at most timeout (a client that stops reading
// must not pin the writer); the first failed write calls onFail once.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	onFail  func() // set before the writer is shared; called without mu
	started bool
	err     error
	buf     []byte
	busy    atomic.Int64 // start of the write in progress (unix ns), 0 when idle
}

// blockedFor reports how long the write in progress has been blocked.
func (s *sseWriter) blockedFor() time.Duration {
	if t := s.busy.Load(); t != 0 {
		return time.Since(time.Unix(0, t))
	}
	return 0
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// write runs fn (which writes to s.w) under the write deadline and
// flushes. Once a write failed, every later one fails at once with the
// same error.
func (s *sseWriter) write(fn func() error) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.timeout > 0 {
		// Not every ResponseWriter can: then writes are unbounded.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	s.busy.Store(time.Now().UnixNano())
	err := fn()
	if err == nil {
		err = s.rc.Flush()
	}
	s.busy.Store(0)
	s.err = err
	s.mu.Unlock()
	if err != nil && s.onFail != nil {
		s.onFail()
	}
	return err
}

// start sends the headers of an event stream (once).
func (s *sseWriter) start(header func(http.Header)) {
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
		return nil
	})
}

// event writes one event and flushes.
func (s *sseWriter) event(ev sse.Event) error {
	return s.write(func() error {
		s.buf = sse.AppendEvent(s.buf[:0], ev)
		_, err := s.w.Write(s.buf)
		return err
	})
}

func (s *sseWriter) comment(text string) error {
	return s.write(func() error { return sse.WriteComment(s.w, text) })
}

// keepAlive writes comment keep-alives every d until ctx ends.
func (s *sseWriter) keepAlive(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.comment("keep-alive") != nil {
				return
			}
		}
	}
}

// errDetached marks a writer whose connection the server closed while
// the stream goes on in history.
var errDetached = errors.New("mcp: stream detached from its connection")

// errWriterClosed marks a writer whose HTTP response is over.
var errWriterClosed = errors.New("mcp: response finished")

// close ends the writer before its handler returns: once close returns,
// no write is in progress and every later one (a keep-alive, a late
// event) fails at once, as a ResponseWriter must not be used after
// ServeHTTP returned.
func (s *sseWriter) close() { s.end(errWriterClosed) }

// end stops all further writes with err; the first to end a healthy
// writer lifts the write deadline, which would otherwise outlive the
// response on a kept-alive connection.
func (s *sseWriter) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		if s.timeout > 0 {
			_ = s.rc.SetWriteDeadline(time.Time{})
		}
	}
}

// retry writes a retry hint block (no data, so no event is dispatched).
func (s *sseWriter) retry(d time.Duration) error {
	return s.write(func() error {
		_, err := fmt.Fprintf(s.w, "retry: %d\n\n", d.Milliseconds())
		return err
	})
}

// detach sends a retry hint and stops all further writes: the server
// closes the connection and the client resumes with Last-Event-ID.
func (s *sseWriter) detach(hint time.Duration) {
	_ = s.retry(hint)
	s.end(errDetached)
}
