package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

func TestInboundRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, p := newPair(t, rec.options())
		run := runChannel(t.Context(), c)

		p.send(`{"jsonrpc":"2.0","id":"r1","method":"tools/list","params":{}}`)
		p.send("")
		p.send("   \t\r")
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r")
		p.send(`  {"jsonrpc":"2.0","id":3,"method":"ping"}  `)
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatalf("Run: %v", err)
		}

		inbound, _, invalid := rec.snapshot()
		if len(invalid) != 0 {
			t.Fatalf("got invalid %v, want none: blank lines are skipped", invalid)
		}
		want := []struct {
			kind   jsonrpc.Kind
			method string
			id     jsonrpc.ID
		}{
			{jsonrpc.KindRequest, "tools/list", jsonrpc.StringID("r1")},
			{jsonrpc.KindNotification, "notifications/initialized", jsonrpc.ID{}},
			{jsonrpc.KindRequest, "ping", jsonrpc.IntID(3)},
		}
		if len(inbound) != len(want) {
			t.Fatalf("got %d inbound messages, want %d", len(inbound), len(want))
		}
		for i, w := range want {
			if m := inbound[i]; m.Kind() != w.kind || m.Method != w.method || m.ID != w.id {
				t.Errorf("inbound %d: got %v %q id %s, want %v %q id %s", i, m.Kind(), m.Method, m.ID, w.kind, w.method, w.id)
			}
		}
	})
}

func TestInvalidLines(t *testing.T) {
	next := `{"jsonrpc":"2.0","method":"after"}`
	for _, tc := range []struct {
		name  string
		line  string
		batch bool // with an OnBatch handler
		code  int64
		id    jsonrpc.ID
	}{
		{"malformed JSON", `{not json`, false, jsonrpc.CodeParseError, jsonrpc.ID{}},
		{"truncated object", `{"jsonrpc":"2.0","id":4,"method":"x"`, false, jsonrpc.CodeParseError, jsonrpc.ID{}},
		{"malformed batch", `[{"jsonrpc":"2.0"`, false, jsonrpc.CodeParseError, jsonrpc.ID{}},
		{"malformed batch, OnBatch set", `[{"jsonrpc":"2.0"`, true, jsonrpc.CodeParseError, jsonrpc.ID{}},
		{"not an object", `"hello"`, false, jsonrpc.CodeInvalidRequest, jsonrpc.ID{}},
		{"no method, result or error", `{"jsonrpc":"2.0","id":7}`, false, jsonrpc.CodeInvalidRequest, jsonrpc.IntID(7)},
		{"wrong version", `{"jsonrpc":"1.0","id":"a","method":"x"}`, false, jsonrpc.CodeInvalidRequest, jsonrpc.StringID("a")},
		{"empty batch, split", `[]`, false, jsonrpc.CodeInvalidRequest, jsonrpc.ID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				opts := rec.options()
				if tc.batch {
					opts.OnBatch = rec.onBatch
				}
				c, p := newPair(t, opts)
				run := runChannel(t.Context(), c)
				p.send(tc.line)
				p.send(next)
				p.closeInput()
				if err := <-run; err != nil {
					t.Fatalf("Run: %v", err)
				}
				inbound, batches, invalid := rec.snapshot()
				if len(invalid) != 1 {
					t.Fatalf("got %d OnInvalid calls, want 1", len(invalid))
				}
				if got := invalid[0]; got.Err.Code != tc.code || got.ID != tc.id {
					t.Fatalf("got code %d id %s, want code %d id %s (%v)", got.Err.Code, got.ID, tc.code, tc.id, got)
				}
				if len(batches) != 0 {
					t.Fatalf("OnBatch got %q, want nothing for an invalid line", batches)
				}
				if len(inbound) != 1 || inbound[0].Method != "after" {
					t.Fatalf("got inbound %v, want the next line still processed", inbound)
				}
			})
		})
	}
}

func TestOversizeLine(t *testing.T) {
	// request returns a request line of exactly n bytes.
	request := func(t *testing.T, n int) string {
		t.Helper()
		const frame = `{"jsonrpc":"2.0","method":"fits","params":{"p":""}}`
		if n < len(frame) {
			t.Fatalf("cannot build a %d-byte request", n)
		}
		return strings.Replace(frame, `""`, `"`+strings.Repeat("a", n-len(frame))+`"`, 1)
	}
	for _, tc := range []struct {
		name    string
		max     int // Options.MaxLineBytes
		long    int // length of the oversize line
		limit   int // the limit the error names
		trailer bool
	}{
		{"just over", 64, 65, 64, true},
		{"longer than the read buffer", 1 << 10, 300 << 10, 1 << 10, true},
		{"last line without newline", 64, 1000, 64, false},
		{"default limit", 0, DefaultMaxLineBytes + 1, DefaultMaxLineBytes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				opts := rec.options()
				opts.MaxLineBytes = tc.max
				c, p := newPair(t, opts)
				run := runChannel(t.Context(), c)

				p.send(request(t, tc.limit)) // exactly at the limit: accepted
				// The oversize line is garbage: it must not even be parsed.
				long := strings.Repeat("{", tc.long)
				if tc.trailer {
					p.send(long)
					p.send(`{"jsonrpc":"2.0","method":"after"}`)
				} else if _, err := io.WriteString(p.in, long); err != nil {
					t.Fatal(err)
				}
				p.closeInput()
				if err := <-run; err != nil {
					t.Fatalf("Run: %v", err)
				}

				inbound, _, invalid := rec.snapshot()
				if len(invalid) != 1 {
					t.Fatalf("got %d OnInvalid calls, want 1", len(invalid))
				}
				e := invalid[0]
				if e.Err.Code != jsonrpc.CodeInvalidRequest || e.ID.IsValid() {
					t.Fatalf("got code %d id %s, want %d and no id", e.Err.Code, e.ID, jsonrpc.CodeInvalidRequest)
				}
				wantMsg := fmt.Sprintf("line of %d bytes exceeds the limit of %d bytes", tc.long, tc.limit)
				if !strings.Contains(e.Error(), wantMsg) {
					t.Fatalf("got %q, want it to say %q", e.Error(), wantMsg)
				}
				wantInbound := []string{"fits"}
				if tc.trailer {
					wantInbound = append(wantInbound, "after")
				}
				var got []string
				for _, m := range inbound {
					got = append(got, m.Method)
				}
				if fmt.Sprint(got) != fmt.Sprint(wantInbound) {
					t.Fatalf("got inbound %v, want %v", got, wantInbound)
				}
			})
		})
	}
}

func TestLineReaderBounded(t *testing.T) {
	// An oversize line is skipped without buffering it: the reader's
	// memory stays at its buffer however long the line is.
	const max = 100
	long := bytes.Repeat([]byte("x"), 10<<20)
	input := append(append(long, '\n'), "ok\n"...)
	lr := newLineReader(bytes.NewReader(input), max)
	allocs := testing.AllocsPerRun(1, func() {
		lr = newLineReader(bytes.NewReader(input), max)
		if _, n, err := lr.next(); n != int64(len(long)) || err != nil {
			t.Fatalf("got (%d, %v), want (%d, nil)", n, err, len(long))
		}
	})
	if allocs > 10 {
		t.Fatalf("skipping a 10 MiB line took %v allocations, want a handful", allocs)
	}
	line, n, err := lr.next()
	if string(line) != "ok" || n != 0 || err != nil {
		t.Fatalf("got (%q, %d, %v), want (\"ok\", 0, nil)", line, n, err)
	}
	if _, _, err := lr.next(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestBatchSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, p := newPair(t, rec.options())
		run := runChannel(t.Context(), c)

		res := goCall(t.Context(), c, "sampling/createMessage", nil)
		req := p.recv()
		if req.ID != jsonrpc.IntID(1) {
			t.Fatalf("got id %s, want 1", req.ID)
		}
		p.send(`[{"jsonrpc":"2.0","id":"r1","method":"a"},` +
			`{"jsonrpc":"2.0","method":"b"},` +
			`{"jsonrpc":"2.0","id":1,"result":{"ok":true}},` +
			`{"jsonrpc":"2.0","id":"bad"},` +
			`{"jsonrpc":"2.0","id":99,"result":{}}]`)
		if r := <-res; r.err != nil || string(r.result) != `{"ok":true}` {
			t.Fatalf("call answered inside a batch: got (%s, %v)", r.result, r.err)
		}
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatal(err)
		}
		inbound, batches, invalid := rec.snapshot()
		if len(batches) != 0 {
			t.Fatalf("OnBatch is nil, yet got batches %q", batches)
		}
		if len(inbound) != 2 || inbound[0].Method != "a" || inbound[1].Method != "b" {
			t.Fatalf("got inbound %v, want a then b", inbound)
		}
		if len(invalid) != 1 || invalid[0].ID != jsonrpc.StringID("bad") || invalid[0].Err.Code != jsonrpc.CodeInvalidRequest {
			t.Fatalf("got invalid %v, want one -32600 for id \"bad\"", invalid)
		}
	})
}

func TestBatchWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		opts := rec.options()
		opts.OnBatch = rec.onBatch
		c, p := newPair(t, opts)
		run := runChannel(t.Context(), c)

		res := goCall(t.Context(), c, "roots/list", nil)
		p.recv()
		batch := `[{"jsonrpc":"2.0","id":"r1","method":"a"},{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}]`
		p.send(" " + batch)
		p.send(`[]`)
		synctest.Wait()

		inbound, batches, invalid := rec.snapshot()
		if len(inbound) != 0 || len(invalid) != 0 {
			t.Fatalf("got inbound %v invalid %v, want the batch passed whole", inbound, invalid)
		}
		if len(batches) != 2 || string(batches[0]) != " "+batch || string(batches[1]) != "[]" {
			t.Fatalf("got batches %q, want the two lines as read", batches)
		}
		if got := c.Pending(); got != 1 {
			t.Fatalf("got %d pending, want 1: the handler owns the batch's responses", got)
		}

		// The handler hands the response members to Deliver.
		msgs, errs, _, err := jsonrpc.DecodeBatch(batches[0])
		if err != nil || errs[0] != nil || errs[1] != nil {
			t.Fatalf("DecodeBatch: %v %v", err, errs)
		}
		if c.Deliver(msgs[0]) {
			t.Fatal("Deliver accepted a request")
		}
		if !c.Deliver(msgs[1]) {
			t.Fatal("Deliver: the response matched no call")
		}
		if r := <-res; r.err != nil || string(r.result) != `{"roots":[]}` {
			t.Fatalf("got (%s, %v)", r.result, r.err)
		}
		if c.Deliver(msgs[1]) {
			t.Fatal("Deliver: a response was accepted twice")
		}
		p.closeInput()
		<-run
	})
}

func TestUnmatchedRepliesIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, p := newPair(t, rec.options())
		run := runChannel(t.Context(), c)

		res := goCall(t.Context(), c, "m", nil)
		req := p.recv()
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":99,"result":{}}`,
			`{"jsonrpc":"2.0","id":"1","result":"wrong type of id"}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
			`{"jsonrpc":"2.0","id":98,"error":{"code":-32601,"message":"nope"}}`,
		} {
			p.send(line)
		}
		synctest.Wait()
		if got := c.Pending(); got != 1 {
			t.Fatalf("got %d pending, want the call still waiting", got)
		}
		p.reply(req.ID, "right")
		if r := <-res; r.err != nil || string(r.result) != `"right"` {
			t.Fatalf("got (%s, %v), want (\"right\", nil)", r.result, r.err)
		}
		p.reply(req.ID, "again") // already settled
		p.send(`{"jsonrpc":"2.0","method":"still-reading"}`)
		p.closeInput()
		if err := <-run; err != nil {
			t.Fatal(err)
		}
		inbound, _, invalid := rec.snapshot()
		if len(invalid) != 0 {
			t.Fatalf("got invalid %v, want none", invalid)
		}
		if len(inbound) != 1 || inbound[0].Method != "still-reading" {
			t.Fatalf("got inbound %v, want only still-reading", inbound)
		}
	})
}

func TestNilCallbacks(t *testing.T) {
	// The zero Options drop and log everything inbound; the zero Logger
	// logs nothing.
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"a"}`,
		`{"jsonrpc":"2.0","method":"b"}`,
		`{oops`,
		`[{"jsonrpc":"2.0","method":"c"},{"jsonrpc":"2.0"}]`,
		strings.Repeat("x", DefaultMaxLineBytes+1),
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
	}, "\n")
	var out bytes.Buffer
	c := New(strings.NewReader(input), &out, Options{})
	if err := c.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("the channel answered on its own: %q", out.String())
	}
}

func TestCallbacksMayUseChannel(t *testing.T) {
	// A server answers from its inbound handler; the answer goes out while
	// the read loop goes on.
	synctest.Test(t, func(t *testing.T) {
		var c *Channel
		c, p := newPair(t, Options{OnInbound: func(m *jsonrpc.Message) {
			go func() {
				resp, _ := jsonrpc.Response(m.ID, map[string]string{"pong": m.Method})
				if err := c.Send(resp); err != nil {
					t.Errorf("Send: %v", err)
				}
			}()
		}})
		run := runChannel(t.Context(), c)
		p.send(`{"jsonrpc":"2.0","id":"a","method":"ping"}`)
		if got := p.recv(); got.ID != jsonrpc.StringID("a") || string(got.Result) != `{"pong":"ping"}` {
			t.Fatalf("got %+v", got)
		}
		p.closeInput()
		<-run
	})
}

// TestOSPipes runs a channel over real pipes, as the stdio client does
// with a child process, and checks that no goroutine outlives it once the
// owner closes its end.
func TestOSPipes(t *testing.T) {
	checkNoChannelGoroutines(t)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	defer outR.Close()
	c := New(inR, outW, Options{Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(t.Context())
	run := runChannel(ctx, c)

	// The peer answers every request with its method name.
	peerDone := make(chan struct{})
	go func() {
		defer close(peerDone)
		buf := make([]byte, 0, 4096)
		tmp := make([]byte, 4096)
		for {
			n, err := outR.Read(tmp)
			if err != nil {
				return
			}
			buf = append(buf, tmp[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				msg, err := jsonrpc.Decode(buf[:i])
				buf = buf[i+1:]
				if err != nil {
					t.Errorf("peer: %v", err)
					return
				}
				resp, _ := jsonrpc.Response(msg.ID, msg.Method)
				b, _ := jsonrpc.Encode(resp)
				if _, err := inW.Write(append(b, '\n')); err != nil {
					return
				}
			}
		}
	}()

	for i := range 10 {
		method := fmt.Sprint("m", i)
		got, err := c.Call(t.Context(), method, nil)
		if err != nil || string(got) != `"`+method+`"` {
			t.Fatalf("call %d: got (%s, %v)", i, got, err)
		}
	}
	cancel()
	if err := <-run; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: got %v, want context.Canceled", err)
	}
	// The owner closes the streams: that ends the blocked Read.
	inR.Close()
	outW.Close()
	<-peerDone
}
