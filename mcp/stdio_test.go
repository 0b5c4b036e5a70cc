package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

const (
	stdioInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	stdioModernMeta  = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
)

// stdioLine is one decoded line the server wrote.
type stdioLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// stdioClient is the client end of a ServeStdio over pipes.
type stdioClient struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan stdioLine
	served chan error
}

func startStdio(t *testing.T, srv *mcp.Server, opts *mcp.StdioOptions) *stdioClient {
	t.Helper()
	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	c := &stdioClient{t: t, in: serverIn, lines: make(chan stdioLine, 64), served: make(chan error, 1)}
	go func() {
		err := srv.ServeStdio(context.Background(), clientOut, clientIn, opts)
		clientIn.Close()
		c.served <- err
	}()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(serverOut)
		for sc.Scan() {
			var l stdioLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("server wrote %q: %v", sc.Text(), err)
				continue
			}
			l.raw = sc.Text()
			c.lines <- l
		}
	}()
	t.Cleanup(func() { serverIn.Close(); serverOut.Close() })
	return c
}

// send writes the lines in one write, as a client piping them does.
func (c *stdioClient) send(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, strings.Join(lines, "\n")+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next returns the next line the server writes.
func (c *stdioClient) next(what string) stdioLine {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("waiting for %s: the server's output ended", what)
		}
		return l
	case <-time.After(5 * time.Second):
		c.t.Fatalf("waiting for %s: nothing in 5s", what)
	}
	return stdioLine{}
}

// end closes the input and waits for ServeStdio to return.
func (c *stdioClient) end(within time.Duration) error {
	c.t.Helper()
	c.in.Close()
	select {
	case err := <-c.served:
		return err
	case <-time.After(within):
		c.t.Fatalf("ServeStdio did not return within %v of the end of input", within)
	}
	return nil
}

// Piping initialize, notifications/initialized and tools/list back to
// back must answer tools/list, and the initialized notification must take
// effect (the session then hears list_changed), every time.
func TestStdioHandshakeBackToBackKeepsItsOrder(t *testing.T) {
	const runs = 300
	for i := range runs {
		srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
		mcp.AddTool(srv, mcp.Tool{Name: "a"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
		mcp.AddTool(srv, mcp.Tool{Name: "b"}, func(context.Context, *mcp.Request, struct{}) (string, error) { return "", nil })
		c := startStdio(t, srv, nil)
		c.send(stdioInit, stdioInitialized, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		for _, id := range []string{"1", "2"} {
			l := c.next("response " + id)
			if string(l.ID) != id || l.Error != nil {
				t.Fatalf("run %d: want the result of request %s, got %s", i, id, l.raw)
			}
		}
		srv.RemoveTools("b")
		if l := c.next("list_changed"); l.Method != "notifications/tools/list_changed" {
			t.Fatalf("run %d: want notifications/tools/list_changed, got %s", i, l.raw)
		}
		if err := c.end(5 * time.Second); err != nil {
			t.Fatalf("run %d: ServeStdio: %v", i, err)
		}
	}
}

// blockingServer serves a tool "block" that returns "released" once
// release is closed.
func blockingServer(release <-chan struct{}) *mcp.Server {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	return srv
}

// Ordering must not serialise requests: a long call does not hold up
// the requests read after it.
func TestStdioLongRequestDoesNotBlockLaterOnes(t *testing.T) {
	release := make(chan struct{})
	srv := blockingServer(release)
	c := startStdio(t, srv, nil)
	c.send(stdioInit, stdioInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	c.next("initialize result")
	got := map[string]bool{}
	for range 2 {
		got[string(c.next("tools/list and ping").ID)] = true
	}
	if !got["3"] || !got["4"] {
		t.Fatalf("tools/list and ping were not answered while tools/call ran: %v", got)
	}
	close(release)
	if l := c.next("tools/call result"); string(l.ID) != "2" || !strings.Contains(string(l.Result), "released") {
		t.Fatalf("want the tools/call result, got %s", l.raw)
	}
}

// `echo '{...}' | server --stdio`: the end of input must not cancel the
// request; its answer is written before ServeStdio returns.
func TestStdioEndOfInputLetsRequestsFinish(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		select {
		case <-time.After(200 * time.Millisecond):
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	for _, batchOfLines := range []bool{false, true} {
		in := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{},` + stdioModernMeta + `}}` + "\n"
		want := 1
		if batchOfLines {
			in = stdioInit + "\n" + `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow"}}` + "\n" + in
			want = 3
		}
		var out strings.Builder
		if err := srv.ServeStdio(context.Background(), strings.NewReader(in), &out, nil); err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != want || strings.Count(out.String(), `"done"`) != want-boolInt(batchOfLines) {
			t.Fatalf("want %d answers, the tool calls' with their result; got:\n%s", want, out.String())
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The wait at end of input is bounded by the drain timeout; a listen
// stream, a request that never ends by itself, and a server→client
// request (whose reply can no longer come) do not hold it up.
func TestStdioEndOfInputDrainIsBounded(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	cancelled := make(chan struct{})
	mcp.AddTool(srv, mcp.Tool{Name: "forever"}, func(ctx context.Context, _ *mcp.Request, _ struct{}) (string, error) {
		<-ctx.Done()
		close(cancelled)
		return "", ctx.Err()
	})
	mcp.AddTool(srv, mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
		_, err := req.Sample(ctx, &mcp.CreateMessageParams{MaxTokens: 1})
		return "", fmt.Errorf("sampling: %w", err)
	})

	// The sampling request fails at once at end of input, and its
	// answer is written.
	c := startStdio(t, srv, &mcp.StdioOptions{DrainTimeout: time.Minute})
	c.send(stdioInit, stdioInitialized, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample"}}`)
	c.next("initialize result")
	if l := c.next("sampling request"); l.Method != "sampling/createMessage" {
		t.Fatalf("want a sampling request, got %s", l.raw)
	}
	start := time.Now()
	c.in.Close()
	if l := c.next("tools/call answer"); string(l.ID) != "2" {
		t.Fatalf("want the answer to the call, got %s", l.raw)
	}
	if err := c.end(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a pending server→client request held the end of input for %v", d)
	}

	// A listen stream ends at end of input; a request that does not end
	// is cancelled after the drain timeout.
	c = startStdio(t, srv, &mcp.StdioOptions{DrainTimeout: 300 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+stdioModernMeta+`}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"forever","arguments":{},`+stdioModernMeta+`}}`)
	c.next("listen acknowledgement")
	start = time.Now()
	if err := c.end(5 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("ServeStdio returned %v after the end of input, want about the drain timeout (300ms)", d)
	}
	select {
	case <-cancelled:
	default:
		t.Error("the handler still running after the drain timeout was not cancelled")
	}
}

// Request.Logger is called from the goroutines of one handler at once.
func TestRequestLoggerConcurrentUse(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, mcp.Tool{Name: "fanout"}, func(_ context.Context, req *mcp.Request, _ struct{}) (string, error) {
		var wg sync.WaitGroup
		loggers := make([]*slog.Logger, 8)
		for i := range loggers {
			wg.Go(func() { loggers[i] = req.Logger() })
		}
		wg.Wait()
		for _, l := range loggers[1:] {
			if l != loggers[0] {
				return "", errors.New("Logger returned different loggers")
			}
		}
		return "ok", nil
	})
	var out strings.Builder
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fanout","arguments":{},` + stdioModernMeta + `}}` + "\n"
	if err := srv.ServeStdio(context.Background(), strings.NewReader(in), &out, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"text":"ok"`) {
		t.Fatalf("got %s", out.String())
	}
}
