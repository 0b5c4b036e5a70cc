package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// StatusError is an HTTP answer with an unexpected status code.
type StatusError struct {
	Code int
	Body string // the start of the body, for the example message
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return "HTTP " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body)
}

// RPCError is a JSON-RPC error response.
type RPCError struct {
	Code    int64
	Message string
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// KindError is a failure the caller has already classified, such as a
// result with the wrong content or a notification that never came.
type KindError struct {
	Kind string
	Err  error
}

func (e *KindError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *KindError) Unwrap() error { return e.Err }

// Errorf returns a KindError of kind with a formatted message.
func Errorf(kind, format string, args ...any) error {
	return &KindError{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Kind classifies an error for the report. The kinds are:
//
//	http_<code>      an unexpected HTTP status (StatusError)
//	rpc_<code>       a JSON-RPC error response (RPCError)
//	<kind>           a KindError's own kind (bad_result, missing_progress, ...)
//	timeout          a deadline passed (context or network)
//	canceled         the run was stopped mid-operation
//	conn_refused     nothing listens at the address
//	conn_reset       the peer reset the connection
//	broken_pipe      writing to a connection the peer closed
//	eof              the connection closed before the answer was complete
//	addr_not_avail   no free local port (connections are not being reused)
//	too_many_files   the process ran out of file descriptors
//	other            anything else
func Kind(err error) string {
	var se *StatusError
	var re *RPCError
	var ke *KindError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ke):
		return ke.Kind
	case errors.As(err, &se):
		return "http_" + strconv.Itoa(se.Code)
	case errors.As(err, &re):
		return "rpc_" + strconv.FormatInt(re.Code, 10)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "conn_refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "conn_reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken_pipe"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "addr_not_avail"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too_many_files"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// ClassError marks an error with the cause it is counted under (see
// Class) without changing its kind: the sampling scenario marks a reply
// the server did not take, or a call that timed out after its reply was
// accepted, as reply_not_delivered.
type ClassError struct {
	Class string
	Err   error
}

func (e *ClassError) Error() string { return e.Err.Error() }
func (e *ClassError) Unwrap() error { return e.Err }

// Class groups an error by its likely cause, coarser than Kind: what a
// reader of a run behind a load balancer wants to know. The classes are:
//
//	<class>              a ClassError's own class (reply_not_delivered,
//	                     stream_lost, ...)
//	session_not_found    HTTP 404: the session is unknown where the request
//	                     landed (another replica, or one that restarted)
//	bad_request          HTTP 400
//	node_lost            the node serving the request went away: HTTP 502
//	                     or 504 (a proxy without an answer), JSON-RPC
//	                     -31003, or the connection refused, reset or
//	                     closed before the answer
//	timeout              the operation's time limit passed (a hang)
//	http_error           any other HTTP status
//	rpc_error            any other JSON-RPC error
//	<kind>               anything else, by its Kind
func Class(err error) string {
	var ce *ClassError
	var se *StatusError
	var re *RPCError
	if err == nil {
		return ""
	}
	if errors.As(err, &ce) {
		return ce.Class
	}
	if errors.As(err, &se) {
		switch se.Code {
		case 404:
			return "session_not_found"
		case 400:
			return "bad_request"
		case 502, 504:
			return "node_lost"
		}
		return "http_error"
	}
	if errors.As(err, &re) {
		if re.Code == -31003 {
			return "node_lost"
		}
		return "rpc_error"
	}
	switch k := Kind(err); k {
	case "eof", "conn_reset", "conn_refused", "broken_pipe":
		return "node_lost"
	default:
		return k
	}
}

// ErrorCount is how often one kind of error happened, with the first
// message seen as an example.
type ErrorCount struct {
	Count   int64  `json:"count"`
	Example string `json:"example"`
}

// Errors counts errors by kind. It is safe for concurrent use; the zero
// value is ready to use.
type Errors struct {
	mu      sync.Mutex
	kinds   map[string]*ErrorCount
	classes map[string]int64
	total   int64
}

// maxExample bounds the example message kept per kind.
const maxExample = 300

// Add counts err (nil is ignored) and returns its kind.
func (e *Errors) Add(err error) string {
	if err == nil {
		return ""
	}
	k := Kind(err)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kinds == nil {
		e.kinds = map[string]*ErrorCount{}
	}
	c := e.kinds[k]
	if c == nil {
		msg := err.Error()
		if len(msg) > maxExample {
			msg = msg[:maxExample] + "…"
		}
		c = &ErrorCount{Example: msg}
		e.kinds[k] = c
	}
	c.Count++
	e.total++
	if e.classes == nil {
		e.classes = map[string]int64{}
	}
	e.classes[Class(err)]++
	return k
}

// Total returns the number of errors counted.
func (e *Errors) Total() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Snapshot returns a copy of the counts by kind.
func (e *Errors) Snapshot() map[string]ErrorCount {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]ErrorCount, len(e.kinds))
	for k, c := range e.kinds {
		out[k] = *c
	}
	return out
}

// Classes returns a copy of the counts by class (see Class).
func (e *Errors) Classes() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.classes)
}

// Reset forgets every count.
func (e *Errors) Reset() {
	e.mu.Lock()
	e.kinds, e.classes, e.total = nil, nil, 0
	e.mu.Unlock()
}

// SortedKinds returns the kinds of m, most frequent first (ties by name).
func SortedKinds(m map[string]ErrorCount) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]].Count != m[out[j]].Count {
			return m[out[i]].Count > m[out[j]].Count
		}
		return out[i] < out[j]
	})
	return out
}
