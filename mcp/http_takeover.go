package mcp

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// An open SSE stream on HTTP/1.1 is taken over from net/http once its
// headers and first event are out: net/http then lets go of the
// connection's read and write buffers (8 KiB), the response's chunk
// buffer (2 KiB), the request and its serving goroutine, and the stream
// goes on, on goroutines of its own, writing the chunked framing itself
// (takenStream) and watching for the client's close with one blocking
// Read. An idle stream so keeps its own state, the follower's and the
// connection's only. HTTP/2 streams, and streams behind a ResponseWriter
// that cannot be hijacked, stay with net/http.

// takenStream is the ResponseWriter of an SSE stream whose connection
// was taken over: each Write is one chunk, buffered in a buffer borrowed
// only until the flush that the sse.Writer does after every write, so an
// idle stream holds no buffer.
type takenStream struct {
	conn net.Conn
	buf  *[]byte // the chunks not flushed yet, nil between writes
}

// chunkBufs holds the buffers takenStream borrows; a buffer larger than
// maxPooledChunk (a large event's) is left to the collector.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledChunk = 64 << 10

// takeOver takes the connection of the started stream sw, the response
// to r, over from net/http, and returns its new writer, or nil when it
// cannot: not HTTP/1.1, a request with a body not read to its end
// (bodyRead tells), or a ResponseWriter that cannot hijack (HTTP/2). The response must be chunked (an HTTP/1.1
// response without Content-Length, which an SSE stream is). Its caller
// must serve the stream on goroutines of its own (the handler's return
// ends the request's context) and end it with end.
func takeOver(sw *sse.Writer, r *http.Request, bodyRead bool) *takenStream {
	if !takeable(r, bodyRead) {
		return nil
	}
	var t *takenStream
	err := sw.Replace(func(w http.ResponseWriter) (http.ResponseWriter, error) {
		// Bytes the client sent after the request (nothing a client of
		// an endless response sends) are dropped with net/http's buffer.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return nil, err
		}
		t = &takenStream{conn: conn}
		return t, nil
	})
	if err != nil {
		return nil
	}
	return t
}

// takeable reports whether the stream answering r may be taken over
// (see takeOver).
func takeable(r *http.Request, bodyRead bool) bool {
	return r.ProtoMajor == 1 && r.ProtoMinor >= 1 && (bodyRead || (r.ContentLength == 0 && len(r.TransferEncoding) == 0))
}

// takeableHeader is the Start header hook of a stream answering r that
// may be taken over (bodyRead as for takeOver), nil for one that may
// not: it marks the response as its connection's last. A taken stream
// closes its connection when it ends, and a client that read the body
// to its end would otherwise put the connection back in its pool and
// send its next request on it, to get a reset (a POST is not retried).
func takeableHeader(r *http.Request, bodyRead bool) func(http.Header) {
	if !takeable(r, bodyRead) {
		return nil
	}
	return func(h http.Header) { h.Set("Connection", "close") }
}

// Header is for the http.ResponseWriter interface: the headers were sent.
func (t *takenStream) Header() http.Header { return http.Header{} }

// WriteHeader does nothing: the headers were sent.
func (t *takenStream) WriteHeader(int) {}

// Write buffers p as one chunk until FlushError.
func (t *takenStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // an empty chunk would end the body
	}
	if t.buf == nil {
		t.buf = chunkBufs.Get().(*[]byte)
	}
	b := strconv.AppendInt(*t.buf, int64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	*t.buf = append(b, "\r\n"...)
	return len(p), nil
}

// FlushError writes the buffered chunks and gives the buffer back (the
// method http.ResponseController's Flush calls).
func (t *takenStream) FlushError() error {
	if t.buf == nil {
		return nil
	}
	_, err := t.conn.Write(*t.buf)
	if cap(*t.buf) <= maxPooledChunk {
		*t.buf = (*t.buf)[:0]
		chunkBufs.Put(t.buf)
	}
	t.buf = nil
	return err
}

// SetWriteDeadline sets the connection's write deadline (the method
// http.ResponseController's SetWriteDeadline calls).
func (t *takenStream) SetWriteDeadline(d time.Time) error { return t.conn.SetWriteDeadline(d) }

// watch calls gone once the client closed the connection (or sent
// anything: no client writes on an endless response), or the connection
// was closed by end.
func (t *takenStream) watch(gone func()) {
	var b [1]byte
	_, _ = t.conn.Read(b[:])
	gone()
}

// end ends the stream's body, within timeout, and closes the connection;
// the stream's writer must be closed.
func (t *takenStream) end(timeout time.Duration) {
	_ = t.conn.SetWriteDeadline(time.Now().Add(timeout))
	_, _ = t.conn.Write([]byte("0\r\n\r\n"))
	_ = t.conn.Close()
}

// undoList is the clean-ups of a stream's set-up, in the order they were
// taken.
type undoList []func()

// run runs the clean-ups, the last taken first.
func (u undoList) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// streamCount counts the GET, resumed and listen streams, from before
// their first event to their end: http.Server's Shutdown does not wait
// for a stream whose connection was taken over; Drain and Close do.
type streamCount struct {
	mu     sync.Mutex
	n      int
	closed bool          // Close ran: no more streams are counted (nor taken over)
	idle   chan struct{} // closed once n is 0, when someone waits
}

// add counts a stream; false after Close.
func (s *streamCount) add() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.n++
	return true
}

// done counts a stream out.
func (s *streamCount) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n--; s.n == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// wait waits until no stream is left or ctx ends; with close, no stream
// is taken over from then on.
func (s *streamCount) wait(ctx context.Context, close bool) {
	s.mu.Lock()
	s.closed = s.closed || close
	if s.n == 0 {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
