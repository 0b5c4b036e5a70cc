package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// sseWriter writes SSE events to one HTTP response. It is safe for
// concurrent use: events, comments and keep-alives never interleave.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	err     error
	buf     []byte
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// start sends the headers of an event stream (once).
func (s *sseWriter) start(header func(http.Header)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	if header != nil {
		header(h)
	}
	s.w.WriteHeader(http.StatusOK)
	s.err = s.rc.Flush()
}

// event writes one event and flushes. Once a write failed, every later
// one fails at once with the same error.
func (s *sseWriter) event(ev sse.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.buf = sse.AppendEvent(s.buf[:0], ev)
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}

func (s *sseWriter) comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := sse.WriteComment(s.w, text); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
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
func (s *sseWriter) close() {
	s.mu.Lock()
	if s.err == nil {
		s.err = errWriterClosed
	}
	s.mu.Unlock()
}

// retry writes a retry hint block (no data, so no event is dispatched).
func (s *sseWriter) retry(d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := fmt.Fprintf(s.w, "retry: %d\n\n", d.Milliseconds()); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}

// detach sends a retry hint and stops all further writes: the server
// closes the connection and the client resumes with Last-Event-ID.
func (s *sseWriter) detach(hint time.Duration) {
	_ = s.retry(hint)
	s.mu.Lock()
	if s.err == nil {
		s.err = errDetached
	}
	s.mu.Unlock()
}
