package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

func TestCallsAnsweredOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
	}{
		{"integer ids", ""},
		{"string ids", "srv-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, p := newPair(t, Options{IDPrefix: tc.prefix})
				run := runChannel(t.Context(), c)

				const n = 16
				results := make([]<-chan callResult, n)
				for i := range n {
					results[i] = goCall(t.Context(), c, "echo", map[string]int{"n": i})
				}
				reqs := make([]*jsonrpc.Message, n)
				seen := map[jsonrpc.ID]bool{}
				for i := range n {
					reqs[i] = p.recv()
					id := reqs[i].ID
					if reqs[i].Kind() != jsonrpc.KindRequest || reqs[i].Method != "echo" {
						t.Fatalf("got %v %q, want a request for echo", reqs[i].Kind(), reqs[i].Method)
					}
					if seen[id] {
						t.Fatalf("id %s used twice", id)
					}
					seen[id] = true
					if got, want := id.IsString(), tc.prefix != ""; got != want {
						t.Fatalf("id %s: got IsString %v, want %v", id, got, want)
					}
					if tc.prefix != "" && !strings.HasPrefix(id.Str(), tc.prefix) {
						t.Fatalf("id %s lacks prefix %q", id, tc.prefix)
					}
				}
				synctest.Wait()
				if got := c.Pending(); got != n {
					t.Fatalf("got %d pending, want %d", got, n)
				}

				// Answer newest first; each reply echoes its request's params.
				for i := n - 1; i >= 0; i-- {
					p.reply(reqs[i].ID, reqs[i].Params)
				}
				for i := range n {
					r := <-results[i]
					if r.err != nil {
						t.Fatalf("call %d: %v", i, r.err)
					}
					var got struct{ N int }
					if err := json.Unmarshal(r.result, &got); err != nil || got.N != i {
						t.Fatalf("call %d: got result %s, want n=%d", i, r.result, i)
					}
				}
				if got := c.Pending(); got != 0 {
					t.Fatalf("got %d pending after all replies, want 0", got)
				}
				p.closeInput()
				if err := <-run; err != nil {
					t.Fatalf("Run: got %v, want nil at EOF", err)
				}
			})
		})
	}
}

func TestRepliesMatchExactID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		strCall := make(chan callResult, 1)
		intCall := make(chan callResult, 1)
		go func() {
			r, err := c.CallWithID(t.Context(), jsonrpc.StringID("1"), "a", nil)
			strCall <- callResult{r, err}
		}()
		go func() {
			r, err := c.CallWithID(t.Context(), jsonrpc.IntID(1), "b", nil)
			intCall <- callResult{r, err}
		}()
		p.recv()
		p.recv()
		synctest.Wait()
		if got := c.Pending(); got != 2 {
			t.Fatalf("got %d pending, want 2: \"1\" and 1 are distinct ids", got)
		}

		p.reply(jsonrpc.IntID(1), "int")
		if r := <-intCall; r.err != nil || string(r.result) != `"int"` {
			t.Fatalf("integer id call: got (%s, %v), want (\"int\", nil)", r.result, r.err)
		}
		synctest.Wait()
		select {
		case r := <-strCall:
			t.Fatalf("string id call completed by the integer reply: %+v", r)
		default:
		}
		p.reply(jsonrpc.StringID("1"), "str")
		if r := <-strCall; r.err != nil || string(r.result) != `"str"` {
			t.Fatalf("string id call: got (%s, %v), want (\"str\", nil)", r.result, r.err)
		}
		p.closeInput()
		<-run
	})
}

func TestCallErrorReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		res := goCall(t.Context(), c, "nope", nil)
		req := p.recv()
		p.sendJSON(jsonrpc.ErrorResponse(req.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "no such method", map[string]string{"method": "nope"})))

		r := <-res
		if !errors.Is(r.err, jsonrpc.ErrMethodNotFound) {
			t.Fatalf("got %v, want the peer's method-not-found error", r.err)
		}
		var rpcErr *jsonrpc.Error
		if !errors.As(r.err, &rpcErr) || rpcErr.Message != "no such method" || string(rpcErr.Data) != `{"method":"nope"}` {
			t.Fatalf("got %#v, want the peer's error object as sent", r.err)
		}
		p.closeInput()
		<-run
	})
}

func TestCallContextCancelRemovesPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, p := newPair(t, rec.options())
		run := runChannel(t.Context(), c)

		ctx, cancel := context.WithCancel(t.Context())
		res := goCall(ctx, c, "slow", nil)
		req := p.recv()
		synctest.Wait()
		if got := c.Pending(); got != 1 {
			t.Fatalf("got %d pending, want 1", got)
		}
		cancel()
		r := <-res
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", r.err)
		}
		if errors.Is(r.err, jsonrpc.ErrRequestTimeout) {
			t.Fatalf("a cancelled call must not look like a timeout: %v", r.err)
		}
		if got := c.Pending(); got != 0 {
			t.Fatalf("got %d pending after cancel, want 0", got)
		}

		// The late reply is ignored and disturbs nothing.
		p.reply(req.ID, "late")
		res = goCall(t.Context(), c, "next", nil)
		req2 := p.recv()
		p.reply(req2.ID, "ok")
		if r := <-res; r.err != nil || string(r.result) != `"ok"` {
			t.Fatalf("call after a late reply: got (%s, %v), want (\"ok\", nil)", r.result, r.err)
		}
		if inbound, _, invalid := rec.snapshot(); len(inbound)+len(invalid) != 0 {
			t.Fatalf("late reply reached callbacks: inbound %v, invalid %v", inbound, invalid)
		}

		// A context that is already done sends nothing.
		if _, err := c.Call(ctx, "never", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("call with a cancelled context: got %v, want context.Canceled", err)
		}
		sent := goSend(c, mustNotification(t, "marker"))
		if got := p.recv(); got.Method != "marker" {
			t.Fatalf("got %q on the wire, want only the marker after a call with a dead context", got.Method)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		p.closeInput()
		<-run
	})
}

func TestCallDeadlineIsRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		res := goCall(ctx, c, "slow", nil)
		p.recv()
		r := <-res
		if !errors.Is(r.err, jsonrpc.ErrRequestTimeout) || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrRequestTimeout and DeadlineExceeded", r.err)
		}
		if got := jsonrpc.AsError(r.err).Code; got != jsonrpc.CodeRequestTimeout {
			t.Fatalf("AsError: got code %d, want %d", got, jsonrpc.CodeRequestTimeout)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Fatalf("call returned after %v, want 5s", got)
		}
		if got := c.Pending(); got != 0 {
			t.Fatalf("got %d pending, want 0", got)
		}
		p.closeInput()
		<-run
	})
}

func TestCallWithID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		if _, err := c.CallWithID(t.Context(), jsonrpc.ID{}, "m", nil); err == nil {
			t.Fatal("CallWithID with the zero id: got nil error")
		}
		first := make(chan callResult, 1)
		go func() {
			r, err := c.CallWithID(t.Context(), jsonrpc.StringID("client-7"), "m", nil)
			first <- callResult{r, err}
		}()
		if got := p.recv(); got.ID != jsonrpc.StringID("client-7") {
			t.Fatalf("got id %s on the wire, want \"client-7\"", got.ID)
		}
		synctest.Wait()
		_, err := c.CallWithID(t.Context(), jsonrpc.StringID("client-7"), "m", nil)
		if !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("duplicate pending id: got %v, want ErrDuplicateID", err)
		}
		p.reply(jsonrpc.StringID("client-7"), 42)
		if r := <-first; r.err != nil || string(r.result) != "42" {
			t.Fatalf("got (%s, %v), want (42, nil)", r.result, r.err)
		}
		// Once settled, the id may be used again.
		again := make(chan callResult, 1)
		go func() {
			r, err := c.CallWithID(t.Context(), jsonrpc.StringID("client-7"), "m", nil)
			again <- callResult{r, err}
		}()
		p.reply(p.recv().ID, 43)
		if r := <-again; r.err != nil || string(r.result) != "43" {
			t.Fatalf("reused id: got (%s, %v), want (43, nil)", r.result, r.err)
		}
		p.closeInput()
		<-run
	})
}

func TestEOFFailsPendingPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		const n = 5
		var results []<-chan callResult
		for range n {
			results = append(results, goCall(t.Context(), c, "m", nil))
		}
		for range n {
			p.recv()
		}
		synctest.Wait()
		start := time.Now()
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatalf("Run at EOF: got %v, want nil", err)
		}
		for i, res := range results {
			r := <-res
			if !errors.Is(r.err, jsonrpc.ErrConnectionClosed) {
				t.Fatalf("call %d: got %v, want ErrConnectionClosed", i, r.err)
			}
			if errors.Is(r.err, io.EOF) {
				t.Fatalf("call %d: a failed call must not look like io.EOF: %v", i, r.err)
			}
			if got := jsonrpc.AsError(r.err).Code; got != jsonrpc.CodeConnectionClosed {
				t.Fatalf("call %d: AsError code %d, want %d", i, got, jsonrpc.CodeConnectionClosed)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("pending calls failed after %v, want at once", d)
		}
		if got := c.Pending(); got != 0 {
			t.Fatalf("got %d pending, want 0", got)
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done not closed after Run returned")
		}
		if _, err := c.Call(t.Context(), "m", nil); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Call after EOF: got %v, want ErrConnectionClosed", err)
		}
		if err := c.Send(mustNotification(t, "x")); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Send after EOF: got %v, want ErrConnectionClosed", err)
		}
	})
}

// With SendAfterEOF the end of input fails calls as before but leaves
// sends working until Close: a server writes its last answers.
func TestSendAfterEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{SendAfterEOF: true})
		run := runChannel(t.Context(), c)
		res := goCall(t.Context(), c, "m", nil)
		p.recv()
		synctest.Wait()
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatalf("Run at EOF: got %v, want nil", err)
		}
		if r := <-res; !errors.Is(r.err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("pending call at EOF: got %v, want ErrConnectionClosed", r.err)
		}
		if _, err := c.Call(t.Context(), "m", nil); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Call after EOF: got %v, want ErrConnectionClosed", err)
		}
		select {
		case <-c.Done():
			t.Fatal("Done closed at EOF with SendAfterEOF")
		default:
		}
		sent := goSend(c, mustNotification(t, "last"))
		if got := p.recv(); got.Method != "last" {
			t.Fatalf("peer got %+v, want the notification sent after EOF", got)
		}
		if err := <-sent; err != nil {
			t.Fatalf("Send after EOF: %v", err)
		}
		c.Close()
		<-c.Done()
		if err := c.Send(mustNotification(t, "x")); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Send after Close: got %v, want ErrConnectionClosed", err)
		}
	})
}

func TestCloseIdempotentAndUnblocksCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)

		const n = 3
		var results []<-chan callResult
		for range n {
			results = append(results, goCall(t.Context(), c, "m", nil))
		}
		for range n {
			p.recv()
		}
		synctest.Wait()

		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		wg.Wait()
		for i, res := range results {
			if r := <-res; !errors.Is(r.err, jsonrpc.ErrConnectionClosed) {
				t.Fatalf("call %d: got %v, want ErrConnectionClosed", i, r.err)
			}
		}
		if err := <-run; err != nil {
			t.Fatalf("Run after Close: got %v, want nil", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := c.Call(t.Context(), "m", nil); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Call after Close: got %v, want ErrConnectionClosed", err)
		}
		if err := c.Send(mustNotification(t, "x")); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Send after Close: got %v, want ErrConnectionClosed", err)
		}
		if err := c.SendRaw([]byte(`{"jsonrpc":"2.0","method":"x"}`)); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("SendRaw after Close: got %v, want ErrConnectionClosed", err)
		}
		// Close left the input open and its Read blocked; closing the
		// input is the owner's job, and it ends the reader (synctest
		// fails the test if any goroutine is left).
		p.closeInput()
	})
}

func TestSendFailsFastAfterCloseDuringBlockedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		first := goSend(c, mustNotification(t, "stuck")) // nobody reads it
		synctest.Wait()
		c.Close()
		if err := c.Send(mustNotification(t, "x")); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("Send after Close: got %v, want ErrConnectionClosed at once", err)
		}
		// Close does not touch w; the owner closing it ends the blocked
		// Write.
		p.outR.Close()
		if err := <-first; !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("blocked Send: got %v, want io.ErrClosedPipe", err)
		}
	})
}

func TestCloseBeforeRun(t *testing.T) {
	c := New(strings.NewReader(`{"jsonrpc":"2.0","method":"x"}`+"\n"), io.Discard, Options{
		OnInbound: func(*jsonrpc.Message) { t.Error("closed channel dispatched a message") },
	})
	c.Close()
	if _, err := c.Call(t.Context(), "m", nil); !errors.Is(err, jsonrpc.ErrConnectionClosed) {
		t.Fatalf("Call: got %v, want ErrConnectionClosed", err)
	}
	if err := c.Run(t.Context()); err != nil {
		t.Fatalf("Run on a closed channel: got %v, want nil", err)
	}
}

func TestRunContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		ctx, cancel := context.WithCancel(t.Context())
		run := runChannel(ctx, c)

		res := goCall(t.Context(), c, "m", nil)
		p.recv()
		synctest.Wait()
		cancel()
		// Run returns although its Read is still blocked.
		if err := <-run; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: got %v, want context.Canceled", err)
		}
		r := <-res
		if !errors.Is(r.err, jsonrpc.ErrConnectionClosed) {
			t.Fatalf("pending call: got %v, want ErrConnectionClosed", r.err)
		}
		if errors.Is(r.err, context.Canceled) {
			t.Fatalf("the call's own context was not cancelled, yet got %v", r.err)
		}
		// A line read after the close is not dispatched.
		p.reply(jsonrpc.IntID(1), "late")
		p.closeInput()
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := newPair(t, Options{})
		run := runChannel(t.Context(), c)
		synctest.Wait()
		if err := c.Run(t.Context()); err == nil {
			t.Fatal("second Run: got nil error")
		}
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatalf("first Run: %v", err)
		}
	})
}

func TestReadErrorEndsRun(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","method":"a"}`+"\n"+`{"partial`), errReader{boom})
	var got []string
	c := New(r, io.Discard, Options{OnInbound: func(m *jsonrpc.Message) { got = append(got, m.Method) }})
	err := c.Run(t.Context())
	if !errors.Is(err, boom) {
		t.Fatalf("Run: got %v, want the read error", err)
	}
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("got inbound %v, want [a] (the partial line dropped)", got)
	}
	if _, err := c.Call(t.Context(), "m", nil); !errors.Is(err, jsonrpc.ErrConnectionClosed) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Call after read error: got %v, want ErrConnectionClosed naming the cause", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// chunkWriter writes each Write in small pieces, yielding between them, to
// an unsynchronized buffer: interleaved writers would mix pieces, and
// concurrent Writes are data races.
type chunkWriter struct{ buf bytes.Buffer }

func (w *chunkWriter) Write(p []byte) (int, error) {
	for len(p) > 0 {
		k := min(len(p), 7)
		w.buf.Write(p[:k])
		p = p[k:]
		runtime.Gosched()
	}
	return len(p), nil
}

func TestConcurrentSendsNeverInterleave(t *testing.T) {
	w := &chunkWriter{}
	c := New(strings.NewReader(""), w, Options{})
	const writers, each = 16, 40
	pad := strings.Repeat("x", 300)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				params := map[string]any{"g": g, "i": i, "pad": pad}
				var err error
				if i%2 == 0 {
					var msg *jsonrpc.Message
					msg, err = jsonrpc.Notification("note", params)
					if err == nil {
						err = c.Send(msg)
					}
				} else {
					b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "raw", "params": params})
					err = c.SendRaw(b)
				}
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()

	out := w.buf.String()
	if !strings.HasSuffix(out, "\n") {
		t.Fatal("output does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got, want := len(lines), writers*each; got != want {
		t.Fatalf("got %d lines, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, line := range lines {
		msg, err := jsonrpc.Decode([]byte(line))
		if err != nil {
			t.Fatalf("line %q does not decode: %v", line, err)
		}
		var p struct {
			G, I int
			Pad  string
		}
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Pad != pad {
			t.Fatalf("line %q: params mangled", line)
		}
		key := fmt.Sprint(p.G, "/", p.I)
		if seen[key] {
			t.Fatalf("message %s written twice", key)
		}
		seen[key] = true
	}
}

func TestSendRawRejectsBadLines(t *testing.T) {
	var out bytes.Buffer
	c := New(strings.NewReader(""), &out, Options{})
	for _, line := range []string{"", `{"jsonrpc":"2.0",` + "\n" + `"method":"x"}`, "{}\n"} {
		if err := c.SendRaw([]byte(line)); !errors.Is(err, ErrInvalidLine) {
			t.Errorf("SendRaw(%q): got %v, want ErrInvalidLine", line, err)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("rejected lines were written: %q", out.String())
	}
	if err := c.SendRaw([]byte(`{"jsonrpc":"2.0","method":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), `{"jsonrpc":"2.0","method":"x"}`+"\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSendRejectsUnencodableMessage(t *testing.T) {
	var out bytes.Buffer
	c := New(strings.NewReader(""), &out, Options{})
	err := c.Send(&jsonrpc.Message{Method: "x", Params: json.RawMessage(`{broken`)})
	if err == nil || out.Len() != 0 {
		t.Fatalf("got (%v, %q), want an error and nothing written", err, out.String())
	}
}

// failingWriter writes half of its first Write and fails; later Writes
// are counted.
type failingWriter struct{ calls int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	return len(p) / 2, errors.New("broken pipe")
}

func TestWriteErrorIsSticky(t *testing.T) {
	w := &failingWriter{}
	c := New(strings.NewReader(""), w, Options{})
	first := c.Send(mustNotification(t, "a"))
	if first == nil {
		t.Fatal("Send to a failing writer: got nil error")
	}
	second := c.Send(mustNotification(t, "b"))
	if second == nil || second.Error() != first.Error() {
		t.Fatalf("second Send: got %v, want the first error %v", second, first)
	}
	if w.calls != 1 {
		t.Fatalf("writer called %d times, want 1: nothing may follow a torn line", w.calls)
	}
	_, err := c.Call(t.Context(), "m", nil)
	if err == nil || c.Pending() != 0 {
		t.Fatalf("Call on a broken writer: got (%v, %d pending), want an error and 0 pending", err, c.Pending())
	}
}

func mustNotification(t testing.TB, method string) *jsonrpc.Message {
	t.Helper()
	msg, err := jsonrpc.Notification(method, nil)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}
