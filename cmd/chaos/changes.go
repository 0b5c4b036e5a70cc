package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// changeWorker is the upgrade scenario's check of session changes
// across releases: a legacy session is opened and read on node B (which
// keeps a copy of it: --session-cache-ttl), changed on node A of the
// other release (logging/setLevel, then DELETE), and used on B right
// after A answered, where the change must already hold: the level
// decides whether B sends the progress tool's log message, and a deleted
// session is 404. A node answering from a copy the change did not reach
// is counted as not answered.
func (c *client) changeWorker(ctx context.Context) {
	for ctx.Err() == nil {
		a, relA, _ := c.rel.pick("")
		b, relB, other := c.rel.pick(relA)
		if a == "" || b == "" || !other {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		k := crossKey(relA, relB)
		s, err := c.at(a).initialize(ctx)
		if err != nil {
			return
		}
		onB, onA := c.at(b), c.at(a)
		if _, ok := onB.logged(ctx, s); !ok { // B reads it, and keeps a copy
			continue
		}
		for _, level := range []string{"error", "info"} {
			if !onA.setLevel(ctx, s, level) {
				break
			}
			n, ok := onB.logged(ctx, s)
			if !ok {
				break
			}
			fresh := (n > 0) == (level == "info")
			c.countChange(k, fresh, "logging/setLevel "+level+" on "+a+", then a call on "+b+" that sent "+plural(n, "log message"))
		}
		if code := onA.deleteSession(ctx, s); code == http.StatusNoContent {
			code := onB.echoStatus(ctx, s)
			if code != 0 && code < 500 {
				c.countChange(k, code == http.StatusNotFound, "DELETE on "+a+", then a call on "+b+" answered "+http.StatusText(code))
			}
		}
		sleep(ctx, time.Duration(200+rand.IntN(300))*time.Millisecond)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func (c *client) countChange(k string, fresh bool, what string) {
	c.st.add(func(s *stats) {
		s.cross.changes[k]++
		if fresh {
			s.cross.changesOK[k]++
		}
	})
	if !fresh {
		c.st.note("session change %s not seen: %s", k, what)
	}
}

// post sends one request of session s, bounded by 10 s: it returns the
// answer's body, open, when it is a 200, and the status (0 when no
// answer came).
func (c *client) post(ctx context.Context, s *session, method string, params any) (io.ReadCloser, string, int) {
	msg, _ := jsonrpc.Request(jsonrpc.IntID(s.newID()), method, params)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := c.hc.Do(c.newRequest(rctx, http.MethodPost, s, encode(msg), method, ""))
	if err != nil {
		cancel()
		return nil, "", 0
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, "", resp.StatusCode
	}
	return bodyCloser{resp.Body, cancel}, resp.Header.Get("Content-Type"), resp.StatusCode
}

// bodyCloser ends a request's context as its body is closed.
type bodyCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b bodyCloser) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// logged runs the progress tool (one step) and counts the log messages
// its answer carried; ok is false without a result.
func (c *client) logged(ctx context.Context, s *session) (n int, ok bool) {
	body, ctype, _ := c.post(ctx, s, "tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 1}})
	if body == nil {
		return 0, false
	}
	defer body.Close()
	count := func(data []byte) {
		m, err := jsonrpc.Decode(data)
		switch {
		case err != nil:
		case m.Method == "notifications/message":
			n++
		case m.Kind() == jsonrpc.KindResponse:
			ok = m.Error == nil
		}
	}
	if !strings.HasPrefix(ctype, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
		count(b)
		return n, ok
	}
	r := sse.NewReader(body, 1<<20)
	for !ok {
		ev, err := r.Next()
		if err != nil {
			break
		}
		count(ev.Data)
	}
	return n, ok
}

// setLevel sends logging/setLevel; it reports whether it succeeded.
func (c *client) setLevel(ctx context.Context, s *session, level string) bool {
	body, _, _ := c.post(ctx, s, "logging/setLevel", map[string]any{"level": level})
	if body == nil {
		return false
	}
	defer body.Close()
	b, _ := io.ReadAll(io.LimitReader(body, 1<<16))
	return bytes.Contains(b, []byte(`"result"`))
}

// deleteSession ends s; it returns the status (0 when none came).
func (c *client) deleteSession(ctx context.Context, s *session) int {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.hc.Do(c.newRequest(rctx, http.MethodDelete, s, nil, "", ""))
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// echoStatus calls echo on s and returns the status (0 when none came).
func (c *client) echoStatus(ctx context.Context, s *session) int {
	body, _, code := c.post(ctx, s, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "after"}})
	if body != nil {
		_, _ = io.Copy(io.Discard, body)
		body.Close()
	}
	return code
}
