package gosdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// exchange is one HTTP request the client sent and the status it got.
type exchange struct {
	Method      string // HTTP method
	SessionID   string // Mcp-Session-Id
	Version     string // Mcp-Protocol-Version
	LastEventID string // Last-Event-ID
	RPC         rpcSummary
	Status      int
	Err         error
	reply       *capture // the start of the response body
}

// rpcSummary describes the JSON-RPC message of a POST body.
type rpcSummary struct {
	Method   string          // "" for a response
	ID       json.RawMessage // absent for a notification
	Tool     string          // params.name of tools/call
	Response bool            // a result or error: the client answered a server→client request
	// InputResponses and RequestState are set on an MRTR retry.
	InputResponses bool
	RequestState   bool
	Body           []byte
}

func summarize(body []byte) rpcSummary {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Name           string          `json:"name"`
			InputResponses json.RawMessage `json:"inputResponses"`
			RequestState   string          `json:"requestState"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	return rpcSummary{
		Method: m.Method, ID: m.ID, Tool: m.Params.Name,
		Response:       m.Method == "" && (m.Result != nil || m.Error != nil),
		InputResponses: len(m.Params.InputResponses) > 0 && string(m.Params.InputResponses) != "null",
		RequestState:   m.Params.RequestState != "",
		Body:           body,
	}
}

func (e exchange) String() string {
	what := e.RPC.Method
	switch {
	case e.RPC.Response:
		what = "response " + string(e.RPC.ID)
	case e.RPC.Tool != "":
		what += " " + e.RPC.Tool
	}
	s := fmt.Sprintf("%s %s -> %d", e.Method, what, e.Status)
	if e.LastEventID != "" {
		s += " (Last-Event-ID " + e.LastEventID + ")"
	}
	if e.Err != nil {
		s += " error: " + e.Err.Error()
	}
	if r := e.reply.String(); r != "" {
		s += "\n       " + strings.ReplaceAll(strings.TrimSpace(r), "\n", "\n       ")
	}
	return s
}

// capture keeps the first maxCapture bytes read through it.
type capture struct {
	rc  io.ReadCloser
	mu  sync.Mutex
	buf []byte
}

const maxCapture = 600

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.mu.Lock()
	if room := maxCapture - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(n, room)]...)
	}
	c.mu.Unlock()
	return n, err
}

func (c *capture) Close() error { return c.rc.Close() }

func (c *capture) String() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// wire is an http.RoundTripper that records every exchange and, when
// armed, cuts the SSE response of one POST after a number of progress
// notifications, as a dropped connection would: the client has read whole
// events up to the cut and then gets a read error, and the underlying TCP
// connection is closed.
type wire struct {
	next http.RoundTripper

	mu       sync.Mutex
	log      []*exchange
	cutWhen  func(rpcSummary) bool
	cutAfter int
	cuts     []cutRecord
}

// cutRecord is a response the wire cut.
type cutRecord struct {
	LastEventID string // id of the last event delivered before the cut
	Progress    int    // progress notifications delivered before the cut
}

var errCut = errors.New("connection cut by the test")

func newWire() *wire { return &wire{next: http.DefaultTransport} }

// armCut makes the next POST whose JSON-RPC message matches when have
// its SSE response cut after n progress notifications.
func (w *wire) armCut(when func(rpcSummary) bool, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cutWhen, w.cutAfter = when, n
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchange{
		Method:      req.Method,
		SessionID:   req.Header.Get("Mcp-Session-Id"),
		Version:     req.Header.Get("Mcp-Protocol-Version"),
		LastEventID: req.Header.Get("Last-Event-ID"),
	}
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		ex.RPC = summarize(body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	// The exchange is logged before it is sent, so that it is in the log
	// by the time anything it caused (a result it unblocked) is seen.
	w.mu.Lock()
	w.log = append(w.log, &ex)
	w.mu.Unlock()
	resp, err := w.next.RoundTrip(req)
	w.mu.Lock()
	if resp != nil {
		ex.Status = resp.StatusCode
		ex.reply = &capture{rc: resp.Body}
		resp.Body = ex.reply
	}
	ex.Err = err
	cut := err == nil && req.Method == http.MethodPost && w.cutWhen != nil && w.cutWhen(ex.RPC) &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var n int
	if cut {
		n = w.cutAfter
		w.cutWhen = nil
	}
	w.mu.Unlock()
	if cut {
		resp.Body = &cutBody{rc: resp.Body, br: bufio.NewReader(resp.Body), after: n, w: w}
	}
	return resp, err
}

// exchanges returns a copy of the log, in the order the requests were
// sent. Status is 0 while a request waits for its response headers.
func (w *wire) exchanges() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]exchange, len(w.log))
	for i, ex := range w.log {
		out[i] = *ex
	}
	return out
}

// cutsMade returns the responses cut so far.
func (w *wire) cutsMade() []cutRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]cutRecord(nil), w.cuts...)
}

// cutBody passes a response through event by event and fails after the
// progress notification that reaches its quota.
type cutBody struct {
	rc      io.ReadCloser
	br      *bufio.Reader
	after   int
	w       *wire
	pending []byte
	seen    int
	lastID  string
	cut     bool
	err     error
}

func (b *cutBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.cut {
			return 0, errCut
		}
		if b.err != nil {
			return 0, b.err
		}
		var ev []byte
		for {
			line, err := b.br.ReadBytes('\n')
			ev = append(ev, line...)
			if err != nil {
				b.err = err
				break
			}
			l := bytes.TrimRight(line, "\r\n")
			if len(l) == 0 {
				break
			}
			if id, ok := bytes.CutPrefix(l, []byte("id:")); ok {
				b.lastID = strings.TrimSpace(string(id))
			}
		}
		b.pending = ev
		if bytes.Contains(ev, []byte(`"notifications/progress"`)) {
			b.seen++
			if b.seen >= b.after {
				b.cut = true
				_ = b.rc.Close()
				b.w.mu.Lock()
				b.w.cuts = append(b.w.cuts, cutRecord{LastEventID: b.lastID, Progress: b.seen})
				b.w.mu.Unlock()
			}
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *cutBody) Close() error { return b.rc.Close() }
