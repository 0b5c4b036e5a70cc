package stdio

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/rs/zerolog"
)

// peer is the far end of a Channel under test, connected by two in-memory
// pipes: it writes the channel's input and reads the channel's output line
// by line. Its methods must be called from the test goroutine.
type peer struct {
	t    testing.TB
	in   *io.PipeWriter // peer → channel
	outR *io.PipeReader // channel → peer
	out  *bufio.Reader
}

// newPair returns a channel wired to a peer; the channel logs to t.Log.
// The channel and the pipes are closed when the test ends.
func newPair(t testing.TB, opts Options) (*Channel, *peer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts.Logger = testLogger(t)
	c := New(inR, outW, opts)
	p := &peer{t: t, in: inW, outR: outR, out: bufio.NewReader(outR)}
	t.Cleanup(func() {
		c.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		inR.Close()
	})
	return c, p
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// send writes raw text to the channel as one line.
func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("peer write: %v", err)
	}
}

// sendJSON writes v, marshalled, as one line.
func (p *peer) sendJSON(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(string(b))
}

// reply answers the request req with result.
func (p *peer) reply(id jsonrpc.ID, result any) {
	p.t.Helper()
	msg, err := jsonrpc.Response(id, result)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendJSON(msg)
}

// recv reads one line written by the channel and decodes it.
func (p *peer) recv() *jsonrpc.Message {
	p.t.Helper()
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		p.t.Fatalf("peer read: %v", err)
	}
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		p.t.Fatalf("channel wrote an invalid line %q: %v", line, err)
	}
	return msg
}

// closeInput ends the channel's input (EOF).
func (p *peer) closeInput() { p.in.Close() }

// runChannel starts c.Run on its own goroutine; the returned channel
// yields Run's result.
func runChannel(ctx context.Context, c *Channel) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	return errc
}

// goSend starts c.Send on its own goroutine (a Send to a pipe blocks until
// the peer reads it).
func goSend(c *Channel, msg *jsonrpc.Message) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.Send(msg) }()
	return errc
}

type callResult struct {
	result json.RawMessage
	err    error
}

// goCall starts c.Call on its own goroutine.
func goCall(ctx context.Context, c *Channel, method string, params any) <-chan callResult {
	res := make(chan callResult, 1)
	go func() {
		r, err := c.Call(ctx, method, params)
		res <- callResult{r, err}
	}()
	return res
}

// recorder collects what the channel hands to its callbacks. Its hooks are
// safe for concurrent use.
type recorder struct {
	mu      sync.Mutex
	inbound []*jsonrpc.Message
	batches [][]byte
	invalid []*jsonrpc.DecodeError
}

func (r *recorder) options() Options {
	return Options{OnInbound: r.onInbound, OnInvalid: r.onInvalid}
}

func (r *recorder) onInbound(m *jsonrpc.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inbound = append(r.inbound, m)
}

func (r *recorder) onBatch(raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, raw)
}

func (r *recorder) onInvalid(e *jsonrpc.DecodeError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invalid = append(r.invalid, e)
}

func (r *recorder) snapshot() (inbound []*jsonrpc.Message, batches [][]byte, invalid []*jsonrpc.DecodeError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*jsonrpc.Message(nil), r.inbound...),
		append([][]byte(nil), r.batches...),
		append([]*jsonrpc.DecodeError(nil), r.invalid...)
}

// checkNoChannelGoroutines fails t at cleanup time if goroutines running
// this package's code are still alive; it gives them a few seconds to end,
// since ending a blocked Read races the test's last statement.
func checkNoChannelGoroutines(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := channelGoroutines()
			if leaked == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines left behind:\n%s", leaked)
				return
			}
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
	})
}

// channelGoroutines returns the stacks of goroutines that are inside a
// Channel method, other than the caller's.
func channelGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the calling goroutine
			continue
		}
		if strings.Contains(g, "internal/stdio.(*Channel)") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}
