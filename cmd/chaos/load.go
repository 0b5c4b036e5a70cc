package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

const (
	legacyVersion = "2025-11-25"
	modernVersion = "2026-07-28"
	sampleAnswer  = "42"
)

// client speaks MCP to the balancer.
type client struct {
	url string
	hc  *http.Client
	st  *stats
	// bound is the longest a call may take before it counts as hung.
	bound time.Duration
	// rel, in the upgrade scenario, aims second legs at the other
	// release (upgrade.go).
	rel *releases
}

func newClient(url string, st *stats, bound time.Duration) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
	}
	return &client{url: url, hc: &http.Client{Transport: tr}, st: st, bound: bound}
}

// session is a legacy session (empty id: 2026-07-28, no session).
type session struct {
	id     string
	mu     sync.Mutex
	nextID int64
}

func (s *session) newID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return s.nextID
}

func modernMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": map[string]any{}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "chaos", "version": "1"},
	}
}

func encode(msg *jsonrpc.Message) []byte {
	b, err := jsonrpc.Encode(msg)
	if err != nil {
		panic(err)
	}
	return b
}

func (c *client) newRequest(ctx context.Context, method string, s *session, body []byte, mcpMethod, name string) *http.Request {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, c.url, r)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s == nil {
		req.Header.Set("Mcp-Protocol-Version", modernVersion)
		if mcpMethod != "" {
			req.Header.Set("Mcp-Method", mcpMethod)
		}
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		return req
	}
	req.Header.Set("Mcp-Protocol-Version", legacyVersion)
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	return req
}

// errorKey names how a non-2xx answer ended a request: its JSON-RPC
// error code when the body has one.
func errorKey(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if msg, err := jsonrpc.Decode(b); err == nil && msg.Error != nil {
		return fmt.Sprintf("%d %d", resp.StatusCode, msg.Error.Code)
	}
	return fmt.Sprintf("%d (no JSON-RPC body)", resp.StatusCode)
}

// initialize opens a legacy session, retrying while the cluster refuses,
// until ctx ends.
func (c *client) initialize(ctx context.Context) (*session, error) {
	s := &session{}
	for {
		msg, _ := jsonrpc.Request(jsonrpc.IntID(s.newID()), "initialize", map[string]any{
			"protocolVersion": legacyVersion,
			"capabilities":    map[string]any{"sampling": map[string]any{}},
			"clientInfo":      map[string]any{"name": "chaos", "version": "1"},
		})
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.hc.Do(c.newRequest(rctx, http.MethodPost, &session{}, encode(msg), "", ""))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.Header.Get("Mcp-Session-Id") != "" {
				s.id = resp.Header.Get("Mcp-Session-Id")
				cancel()
				c.notifyInitialized(ctx, s)
				return s, nil
			}
		}
		cancel()
		if !sleep(ctx, 300*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

func (c *client) notifyInitialized(ctx context.Context, s *session) {
	msg, _ := jsonrpc.Notification("notifications/initialized", nil)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if resp, err := c.hc.Do(c.newRequest(rctx, http.MethodPost, s, encode(msg), "", "")); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// call is one tools/call, legacy (s set) or 2026-07-28 (s nil), followed
// to its end: through SSE, resuming a cut stream with Last-Event-ID
// through the balancer, answering sampling requests on the way. It
// returns the final response, or nil and how the call ended otherwise;
// the outcome is counted.
func (c *client) call(s *session, name string, args map[string]any, steps int) (*jsonrpc.Message, string) {
	final, how, _ := c.track(s, name, args, steps)
	return final, how
}

// track is call, returning also the call's tracker (when it was cut and
// resumed).
func (c *client) track(s *session, name string, args map[string]any, steps int) (*jsonrpc.Message, string, *tracker) {
	c.st.add(func(s *stats) { s.started++ })
	ctx, cancel := context.WithTimeout(context.Background(), c.bound)
	defer cancel()
	var id int64
	if s != nil {
		id = s.newID()
	} else {
		id = rand.Int64N(1 << 40)
	}
	params := map[string]any{"name": name, "arguments": args}
	meta := map[string]any{"progressToken": id}
	if s == nil {
		for k, v := range modernMeta() {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	for k, v := range args {
		if k == "inputResponses" || k == "requestState" {
			params[k] = v
			delete(args, k)
		}
	}
	msg, _ := jsonrpc.Request(jsonrpc.IntID(id), "tools/call", params)
	tr := newTracker()
	final, how := c.follow(ctx, s, id, encode(msg), name, tr)
	if what := unclear(final); what != "" {
		c.st.add(func(s *stats) { s.unclear++ })
		c.st.note("unclear: %s id %d (session %.8s): %.200s", name, id, sessionID(s), what)
	}
	switch {
	case final != nil && final.Error != nil:
		key := fmt.Sprintf("200 %d", final.Error.Code)
		c.st.add(func(s *stats) { s.errs[key]++ })
	case final != nil:
		c.st.add(func(s *stats) { s.completed++ })
	case how == "hung":
		c.st.add(func(s *stats) { s.hung++ })
		c.st.note("hung: %s id %d (session %.8s) last event %q", name, id, sessionID(s), tr.last)
	default:
		c.st.add(func(s *stats) { s.errs[how]++ })
	}
	lost, dup := tr.result(steps, final != nil && final.Error == nil)
	if lost > 0 || dup > 0 {
		c.st.countLost(lost, dup, final != nil && final.Error != nil || final == nil && how != "hung")
		c.st.note("%s id %d (session %.8s): %d lost, %d duplicated; seqs %v progress %v", name, id, sessionID(s), lost, dup, describeSeqs(tr), describeProgress(tr))
	}
	return final, how, tr
}

// internals are words a message for a user must not carry: package and
// error-variable names, store commands, stream ids in quotes.
var internals = []string{"cluster:", "redis", "stream \"", "coordinator", "goroutine", "panic"}

// unclear returns what is wrong with a final response under a fault: an
// internal error (-32603), or an error message or tool error text that
// names internals; "" when it is clear.
func unclear(final *jsonrpc.Message) string {
	if final == nil {
		return ""
	}
	text := string(final.Result)
	if final.Error != nil {
		if final.Error.Code == jsonrpc.CodeInternalError {
			return fmt.Sprintf("error %d %q", final.Error.Code, final.Error.Message)
		}
		text = final.Error.Message
	} else if !bytes.Contains(final.Result, []byte(`"isError":true`)) {
		return ""
	}
	for _, w := range internals {
		if strings.Contains(strings.ToLower(text), w) {
			return text
		}
	}
	return ""
}

func sessionID(s *session) string {
	if s == nil {
		return "none"
	}
	return s.id
}

// before the response it resumes it with GET + Last-Event-ID. how says
// why it returned without a response: "hung", or an error key.
func (c *client) follow(ctx context.Context, s *session, id int64, body []byte, name string, tr *tracker) (*jsonrpc.Message, string) {
	resp, err := c.hc.Do(c.newRequest(ctx, http.MethodPost, s, body, "tools/call", name))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "hung"
		}
		return nil, "transport error"
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, errorKey(resp)
	}
	final := c.read(ctx, s, id, resp, tr)
	if final != nil {
		return final, ""
	}
	if ctx.Err() != nil {
		return nil, "hung"
	}
	tr.cut = time.Now()
	if tr.last == "" {
		// Cut before any event id: nothing to resume from.
		return nil, "cut before the first event"
	}
	c.st.add(func(s *stats) { s.resumes++ })
	for ctx.Err() == nil {
		c.st.add(func(s *stats) { s.resumeGets++ })
		req := c.newRequest(ctx, http.MethodGet, s, nil, "", "")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", tr.last)
		resp, err := c.hc.Do(req)
		if err != nil {
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			if tr.resumed.IsZero() {
				tr.resumed = time.Now()
			}
			if final := c.read(ctx, s, id, resp, tr); final != nil {
				c.st.add(func(s *stats) { s.resumed++ })
				return final, ""
			}
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		default:
			// The stream or session is gone (Redis lost its data): a
			// clear end, not a hang.
			defer resp.Body.Close()
			return nil, "resume " + errorKey(resp)
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return nil, "hung"
}

// read consumes an answer (JSON or SSE) until the response to id.
func (c *client) read(ctx context.Context, s *session, id int64, resp *http.Response, tr *tracker) *jsonrpc.Message {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		msg, err := jsonrpc.Decode(b)
		if err != nil {
			return nil
		}
		return msg
	}
	r := sse.NewReader(resp.Body, 1<<20)
	prev := ""
	for {
		ev, err := r.Next()
		if err != nil {
			return nil
		}
		tr.retry = ev.Retry
		// An event without an id field keeps the last id (SSE): it has no
		// position in history (a final response the node could not
		// record is written so) and is not counted.
		if ev.ID != prev {
			tr.event(ev.ID, len(ev.Data) == 0)
		}
		prev = ev.ID
		if len(ev.Data) == 0 {
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			continue
		}
		switch msg.Kind() {
		case jsonrpc.KindResponse:
			if msg.ID.Int() == id {
				return msg
			}
		case jsonrpc.KindNotification:
			if msg.Method == "notifications/progress" {
				var p struct {
					Progress float64 `json:"progress"`
				}
				_ = json.Unmarshal(msg.Params, &p)
				tr.progress[p.Progress]++
			}
		case jsonrpc.KindRequest:
			if msg.Method == "sampling/createMessage" {
				c.reply(ctx, s, msg.ID)
			}
		}
	}
}

// reply answers a sampling request through the balancer, retrying while
// the cluster says 503 (the reply did not reach its waiter). In the
// upgrade scenario it goes to a node of the other release than the one
// waiting for it (named by the request id) when one is ready, and is
// counted by direction.
func (c *client) reply(ctx context.Context, s *session, id jsonrpc.ID) {
	res, _ := jsonrpc.Response(id, sampleResult())
	body := encode(res)
	from, cross := "", ""
	if c.rel != nil {
		from = c.rel.release(ownerNode(id))
	}
	answered := false
	defer func() {
		if cross != "" {
			c.st.add(func(s *stats) {
				s.cross.replies[cross]++
				if answered {
					s.cross.repliesOK[cross]++
				}
			})
		}
	}()
	for try := 0; ctx.Err() == nil; try++ {
		to, cross0 := c, ""
		if from != "" {
			if node, rel, other := c.rel.pick(from); other {
				to, cross0 = c.at(node), crossKey(from, rel)
			}
		}
		cross = cross0
		resp, err := to.hc.Do(to.newRequest(ctx, http.MethodPost, s, body, "", ""))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				answered = true
				return
			}
			if resp.StatusCode < 500 {
				c.st.note("sampling reply answered %d", resp.StatusCode)
				return
			}
		}
		c.st.add(func(s *stats) { s.repliesRetried++ })
		sleep(ctx, 250*time.Millisecond)
	}
}

func sampleResult() map[string]any {
	return map[string]any{"role": "assistant", "model": "chaos", "content": map[string]any{"type": "text", "text": sampleAnswer}}
}

// getStream holds a legacy session's standalone GET stream open for as
// long as ctx lives, resuming it with Last-Event-ID whenever it is cut,
// and counts its lost and duplicated events at the end.
func (c *client) getStream(ctx context.Context, s *session) {
	tr := newTracker()
	c.st.add(func(s *stats) { s.getStreams++ })
	first, refused := true, false // refused: the node answered a resume with an error
	for ctx.Err() == nil {
		req := c.newRequest(ctx, http.MethodGet, s, nil, "", "")
		req.Header.Set("Accept", "text/event-stream")
		if tr.last != "" {
			req.Header.Set("Last-Event-ID", tr.last)
		}
		if !first {
			c.st.add(func(s *stats) { s.getReconnects++ })
		}
		first = false
		resp, err := c.hc.Do(req)
		if err != nil {
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		refused = refused || resp.StatusCode >= 400 && resp.StatusCode < 500
		if resp.StatusCode == http.StatusNotFound {
			// Session or stream gone (Redis without persistence
			// restarted): nothing left to resume.
			resp.Body.Close()
			break
		}
		if resp.StatusCode == http.StatusOK {
			c.read(ctx, s, -1, resp, tr)
		} else {
			resp.Body.Close()
		}
		sleep(ctx, 250*time.Millisecond)
	}
	lost, dup := tr.result(0, false)
	if lost > 0 || dup > 0 {
		c.st.countLost(lost, dup, refused)
		c.st.note("GET stream (session %.8s): %d lost, %d duplicated; seqs %v", s.id, lost, dup, describeSeqs(tr))
	}
}

// mrtr is a 2026-07-28 multi-round-trip call: sample answers
// input_required, and the client retries with its input responses and
// the sealed requestState, through the balancer (any node).
func (c *client) mrtr() {
	args := map[string]any{"prompt": "What is the answer?"}
	one, two, rel1, rel2 := c, c, "", ""
	if c.rel != nil { // the upgrade scenario: the rounds on two releases
		var node string
		node, rel1, _ = c.rel.pick("")
		one = c.at(node)
	}
	first, _ := one.call(nil, "sample", args, 0)
	if first == nil || first.Error != nil {
		return
	}
	var round1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  *string                    `json:"requestState"`
	}
	if json.Unmarshal(first.Result, &round1) != nil || round1.ResultType != "input_required" {
		c.st.note("MRTR round 1 is not input_required: %.200s", first.Result)
		return
	}
	answers := map[string]any{}
	for k := range round1.InputRequests {
		answers[k] = sampleResult()
	}
	args2 := map[string]any{"prompt": "What is the answer?", "inputResponses": answers}
	if round1.RequestState != nil {
		args2["requestState"] = *round1.RequestState
	}
	if rel1 != "" {
		var node string
		node, rel2, _ = c.rel.pick(rel1)
		two = c.at(node)
	}
	final, _ := two.call(nil, "sample", args2, 0)
	ok := final != nil && final.Error == nil && bytes.Contains(final.Result, []byte(sampleAnswer))
	if final != nil && final.Error == nil && !ok {
		c.st.note("MRTR round 2 answered %.200s", final.Result)
	}
	if rel1 != "" && rel2 != "" && rel1 != rel2 {
		k := crossKey(rel1, rel2)
		c.st.add(func(s *stats) {
			s.cross.mrtr[k]++
			if ok {
				s.cross.mrtrOK[k]++
			}
		})
	}
}

// listen holds a 2026-07-28 subscriptions/listen stream for
// tools/list_changed, reopening it through the balancer when it ends.
func (c *client) listen(ctx context.Context) {
	for ctx.Err() == nil {
		msg, _ := jsonrpc.Request(jsonrpc.IntID(rand.Int64N(1<<40)), "subscriptions/listen", map[string]any{
			"notifications": map[string]any{"toolsListChanged": true},
			"_meta":         modernMeta(),
		})
		resp, err := c.hc.Do(c.newRequest(ctx, http.MethodPost, nil, encode(msg), "subscriptions/listen", ""))
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				r := sse.NewReader(resp.Body, 1<<20)
				for {
					ev, err := r.Next()
					if err != nil {
						break
					}
					if bytes.Contains(ev.Data, []byte("notifications/tools/list_changed")) {
						c.st.add(func(s *stats) { s.listenUpdates++ })
					}
				}
			}
			resp.Body.Close()
		}
		if ctx.Err() == nil {
			c.st.add(func(s *stats) { s.listenReopens++ })
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// probe runs a legacy echo every interval on a session of its own (a
// session load and a stream append: Redis must answer), opening a new
// session when the old one is gone, and records the failures.
func (c *client) probe(ctx context.Context, every time.Duration) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: c.hc.Transport}
	var s *session
	for ctx.Err() == nil {
		at := time.Now()
		ok := false
		if s == nil {
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			s, _ = c.initialize(ictx)
			cancel()
			ok = s != nil
		} else {
			msg, _ := jsonrpc.Request(jsonrpc.IntID(s.newID()), "tools/call", map[string]any{
				"name": "echo", "arguments": map[string]any{"text": "probe"},
			})
			resp, err := hc.Do(c.newRequest(context.Background(), http.MethodPost, s, encode(msg), "", ""))
			why := fmt.Sprint(err)
			if err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"probe"`))
				if resp.StatusCode == http.StatusNotFound {
					s = nil
				}
				why = fmt.Sprintf("%d %.100s", resp.StatusCode, b)
			}
			if !ok && c.rel != nil { // the upgrade scenario: say why
				c.st.note("probe at %s failed: %s", at.Format("15:04:05.000"), why)
			}
		}
		c.st.add(func(s *stats) {
			s.probes++
			if !ok {
				s.probeFail++
				s.probeFails = append(s.probeFails, at)
			}
		})
		sleep(ctx, every)
	}
}
