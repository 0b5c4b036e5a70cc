package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// sessionHooks opens a legacy session per worker (round robin over the
// endpoints) and deletes it at the end; on 2026-07-28 there is nothing
// to open. With --sessions the workers share the runner's sessions
// instead (see sharedSession).
type sessionHooks struct{ noHooks }

func (sessionHooks) setup(ctx context.Context, w *worker) error {
	cl := w.r.cl
	if cl.modern {
		w.sess = &session{}
		return nil
	}
	if sh := w.r.sharedFor(w.n); sh != nil {
		sh.open.Do(func() { sh.sess, sh.err = cl.openSession(ctx, cl.urls[cl.pick()]) })
		if sh.err != nil {
			return sh.err
		}
		sh.users.Add(1)
		w.sess, w.shared = sh.sess, sh
		return nil
	}
	w.url = cl.pick()
	s, err := cl.openSession(ctx, cl.urls[w.url])
	if err != nil {
		return err
	}
	w.sess = s
	return nil
}

func (sessionHooks) teardown(ctx context.Context, w *worker) {
	cl := w.r.cl
	if w.shared != nil {
		w.releaseShared(ctx)
		return
	}
	if cl.modern || w.sess == nil || w.sess.id == "" {
		return
	}
	w.r.endSession(ctx, w.sess)
}

// endSession ends a legacy session at the end of the run (with
// --check-sessions, once it has checked that the server still knows
// it).
func (r *runner) endSession(ctx context.Context, s *session) {
	if r.cfg.checkSessions {
		r.checkSession(ctx, r.cl.urls[r.cl.pick()], s)
	}
	_ = r.cl.deleteSession(ctx, r.cl.urls[r.cl.pick()], s)
}

// echoScenario: tools/call echo, answered as JSON by servers that can.
type echoScenario struct {
	sessionHooks
	text string
}

func (s *echoScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl := w.r.cl
	id := w.sess.newID()
	body := cl.requestBody(id, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": s.text}}, nil)
	start := time.Now()
	ex, err := cl.call(ctx, cl.urls[cl.pick()], w.sess, id, body, "tools/call", "echo", nil)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if ex.sse {
		w.r.count("sse_responses", 1, false)
	} else {
		w.r.count("json_responses", 1, false)
	}
	return d, expectText(ex, s.text)
}

// progressScenario: tools/call progress with a progressToken; the
// answer streams cfg.steps progress notifications before the result.
type progressScenario struct {
	sessionHooks
}

func (s *progressScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl, cfg := w.r.cl, w.r.cfg
	id := w.sess.newID()
	token := "p" + strconv.Itoa(w.n) + "-" + strconv.FormatInt(id, 10)
	body := cl.requestBody(id, "tools/call", map[string]any{
		"name": "progress", "arguments": map[string]any{"steps": cfg.steps, "delayMs": cfg.delayMs},
	}, map[string]any{"progressToken": token})
	seen := 0
	start := time.Now()
	ex, err := w.callResuming(ctx, cl.urls[cl.pick()], id, body, "progress", func(in incoming) error {
		if in.msg.Method != "notifications/progress" {
			return nil
		}
		var p struct {
			Token json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(in.msg.Params, &p) == nil && string(p.Token) == strconv.Quote(token) {
			if seen == 0 {
				w.r.extra("first_progress", in.at.Sub(start))
			}
			seen++
		}
		return nil
	})
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if seen != cfg.steps {
		return d, bench.Errorf("missing_progress", "got %d progress notifications, want %d", seen, cfg.steps)
	}
	return d, expectText(ex, fmt.Sprintf("done after %d steps", cfg.steps))
}

// samplingScenario: tools/call sample, which asks the client for one
// sampling/createMessage. On handshake revisions each session also keeps
// its GET stream open, as real clients do, and the request may arrive on
// either stream (most servers send it on the call's stream, some on the
// GET stream); mcpbench answers with a POST to the next endpoint or the
// same one (--reply-to). On 2026-07-28 the call returns input_required
// and mcpbench retries it with the answer (MRTR).
type samplingScenario struct {
	sessionHooks
}

const sampleAnswer = "the answer is 42"

func sampleResult(text string) map[string]any {
	return map[string]any{
		"role": "assistant", "model": "mcpbench", "stopReason": "endTurn",
		"content": map[string]any{"type": "text", "text": text},
	}
}

// replyURL picks the endpoint of a reply to a call made on endpoint i.
func replyURL(cl *client, cfg *config, i int) string {
	if cfg.replyTo == "next" {
		return cl.urls[(i+1)%len(cl.urls)]
	}
	return cl.urls[i]
}

// replyTarget starts a sampling operation: it returns the endpoint of
// its reply to a call made on endpoint i, and whether that is i itself.
// With --reply-to alternate a worker's operations alternate between the
// two, half the workers starting with each.
func (w *worker) replyTarget(i int) (string, bool) {
	cl, cfg := w.r.cl, w.r.cfg
	w.ops++
	same := cfg.replyTo == "same" || cfg.replyTo == "alternate" && (w.ops+w.n)%2 == 0
	if same {
		return cl.urls[i], true
	}
	return cl.urls[(i+1)%len(cl.urls)], false
}

// replyTiming is one operation's reply→result.
type replyTiming struct {
	op   int
	d    time.Duration
	same bool
}

// recordReply records a sampling operation's reply→result. With
// --reply-to alternate it also records it by where the reply went, and
// pairs each two consecutive operations of the worker (one of each,
// nothing between them failed): their difference (cross-node minus
// same-node) is measured on one session, a few milliseconds apart, so
// the load the machine was under at the time falls out of it.
func (w *worker) recordReply(d time.Duration, same bool) {
	w.r.extra("reply_to_result", d)
	if w.r.cfg.replyTo != "alternate" {
		return
	}
	if same {
		w.r.extra("reply_to_result_same", d)
	} else {
		w.r.extra("reply_to_result_cross", d)
	}
	prev := w.lastReply
	w.lastReply = &replyTiming{op: w.ops, d: d, same: same}
	if prev == nil || prev.op != w.ops-1 || prev.same == same {
		return
	}
	cross, sameD := d, prev.d
	if same {
		cross, sameD = prev.d, d
	}
	w.r.pair("reply_cross_minus_same", cross-sameD)
	w.lastReply = nil
}

func (s *samplingScenario) setup(ctx context.Context, w *worker) error {
	if err := s.sessionHooks.setup(ctx, w); err != nil || w.r.cl.modern {
		return err
	}
	if sh := w.shared; sh != nil {
		// One GET stream per session, whose requests go to the
		// operations they belong to.
		sh.openGet.Do(func() {
			reqs := make(chan incoming, 16)
			sh.closeGet, sh.getErr = w.startGet(reqs)
			if sh.getErr == nil {
				go func() {
					for in := range reqs {
						sh.handOn(w.r, in)
					}
					sh.endGet()
				}()
			}
		})
		if sh.getErr != nil {
			w.releaseShared(ctx)
			return sh.getErr
		}
		return nil
	}
	w.getReqs = make(chan incoming, 16)
	closeGet, err := w.startGet(w.getReqs)
	if err != nil {
		// The worker will not run: end its session now.
		s.sessionHooks.teardown(ctx, w)
		return err
	}
	w.closeGet = closeGet
	return nil
}

// startGet opens the GET stream of the worker's session and delivers
// its server requests to out (closed when the stream ends, resumed with
// --resume-cut); the returned function closes it.
func (w *worker) startGet(out chan incoming) (func(), error) {
	cl := w.r.cl
	gctx, cancel := context.WithCancel(withSource(context.Background(), w.n))
	resp, err := cl.openGet(gctx, cl.urls[cl.pick()], w.sess, "")
	if err != nil {
		cancel()
		close(out)
		return nil, fmt.Errorf("GET stream: %w", err)
	}
	go func() {
		defer close(out)
		body, lastID := resp.Body, ""
		for body != nil {
			readGet(body, &lastID, out)
			body.Close()
			if !w.r.cfg.resumeCut || gctx.Err() != nil {
				return
			}
			body = w.reopenGet(gctx, lastID)
		}
	}()
	return cancel, nil
}

// readGet delivers the server requests of a GET stream to out until the
// stream ends, keeping its last event id.
func readGet(body io.Reader, lastID *string, out chan<- incoming) {
	rd := sse.NewReader(body, 16<<20)
	for {
		ev, err := rd.Next()
		if err != nil {
			return
		}
		if ev.ID != "" {
			*lastID = ev.ID
		}
		if len(ev.Data) == 0 {
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil || msg.Kind() != jsonrpc.KindRequest {
			continue
		}
		out <- incoming{msg: msg, eventID: ev.ID, at: time.Now()}
	}
}

func (s *samplingScenario) teardown(ctx context.Context, w *worker) {
	if w.closeGet != nil {
		w.closeGet()
	}
	s.sessionHooks.teardown(ctx, w)
}

func (s *samplingScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	if w.r.cl.modern {
		return s.mrtr(ctx, w)
	}
	cl := w.r.cl
	id := w.sess.newID()
	prompt, want, getReqs := "What is the answer?", sampleAnswer, w.getReqs
	// On a shared session the prompt and the answer carry a tag of the
	// operation (its request id): it routes requests arriving on the
	// session's GET stream, and the result shows that the server gave
	// each call its own reply.
	tag := ""
	if sh := w.shared; sh != nil {
		tag = strconv.FormatInt(id, 10)
		prompt += " " + tagPrefix + tag + "]"
		want += " " + tagPrefix + tag + "]"
		getReqs = sh.register(tag)
		defer sh.unregister(tag)
	}
	body := cl.requestBody(id, "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": prompt}}, nil)
	at := cl.pick()
	replyTo, same := w.replyTarget(at)
	var mu sync.Mutex
	var replied time.Time
	start := time.Now()
	answer := func(in incoming, where string) error {
		if in.msg.Method != "sampling/createMessage" {
			return bench.Errorf("protocol", "unexpected server request %s", in.msg.Method)
		}
		if tag != "" && opTag(in.msg.Params) != tag {
			// Another call's request, on this call's stream.
			w.shared.handOn(w.r, in)
			return nil
		}
		w.r.extra("request_to_sampling", in.at.Sub(start))
		w.r.count("sampling_on_"+where+"_stream", 1, false)
		reply, _ := jsonrpc.Response(in.msg.ID, sampleResult(want))
		rb, _ := jsonrpc.Encode(reply)
		mu.Lock()
		replied = time.Now()
		mu.Unlock()
		if err := cl.notify(ctx, replyTo, w.sess, rb, ""); err != nil {
			return &bench.ClassError{Class: "reply_not_delivered", Err: fmt.Errorf("posting the sampling reply: %w", err)}
		}
		return nil
	}
	// Requests on the GET stream are answered while the call's own
	// stream is read.
	stop := make(chan struct{})
	getErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				getErr <- nil
				return
			case in, ok := <-getReqs:
				if !ok {
					getErr <- nil
					return
				}
				if err := answer(in, "get"); err != nil {
					getErr <- err
					return
				}
			}
		}
	}()
	ex, err := w.callResuming(ctx, cl.urls[at], id, body, "sample", func(in incoming) error {
		if in.msg.Kind() != jsonrpc.KindRequest {
			return nil
		}
		return answer(in, "post")
	})
	close(stop)
	if gerr := <-getErr; err == nil && gerr != nil {
		err = gerr
	}
	d := time.Since(start)
	mu.Lock()
	r := replied
	mu.Unlock()
	if err != nil && !r.IsZero() && bench.Kind(err) == "timeout" {
		// The reply was accepted, and the call never heard of it.
		err = &bench.ClassError{Class: "reply_not_delivered", Err: err}
	}
	if err != nil {
		return d, err
	}
	if r.IsZero() {
		return d, bench.Errorf("no_sampling", "the call finished without asking for sampling")
	}
	w.recordReply(time.Since(r), same)
	return d, expectText(ex, want)
}

func (s *samplingScenario) mrtr(ctx context.Context, w *worker) (time.Duration, error) {
	cl := w.r.cl
	args := map[string]any{"prompt": "What is the answer?"}
	id := w.sess.newID()
	at := cl.pick()
	replyTo, same := w.replyTarget(at)
	start := time.Now()
	body := cl.requestBody(id, "tools/call", map[string]any{"name": "sample", "arguments": args}, nil)
	ex, err := cl.call(ctx, cl.urls[at], w.sess, id, body, "tools/call", "sample", nil)
	if err != nil {
		return time.Since(start), err
	}
	var round1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  *string                    `json:"requestState"`
	}
	if err := json.Unmarshal(ex.final.Result, &round1); err != nil || round1.ResultType != "input_required" || len(round1.InputRequests) == 0 {
		return time.Since(start), bench.Errorf("no_sampling", "round 1 is not input_required: %.200s", ex.final.Result)
	}
	w.r.extra("request_to_sampling", time.Since(start))
	answers := map[string]any{}
	for k := range round1.InputRequests {
		answers[k] = sampleResult(sampleAnswer)
	}
	params := map[string]any{"name": "sample", "arguments": args, "inputResponses": answers}
	if round1.RequestState != nil {
		params["requestState"] = *round1.RequestState
	}
	id = w.sess.newID()
	retried := time.Now()
	ex, err = cl.call(ctx, replyTo, w.sess, id, cl.requestBody(id, "tools/call", params, nil), "tools/call", "sample", nil)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	w.recordReply(time.Since(retried), same)
	return d, expectText(ex, sampleAnswer)
}

// churnScenario: a whole session per operation — initialize (with
// notifications/initialized), one tools/call echo, DELETE — each
// request on the next endpoint.
type churnScenario struct {
	noHooks
}

func (churnScenario) setup(_ context.Context, w *worker) error {
	if w.r.cl.modern {
		return fmt.Errorf("churn needs sessions: use a handshake revision (%s, %s or %s)", rev20250326, rev20250618, rev20251125)
	}
	return nil
}

func (churnScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl := w.r.cl
	start := time.Now()
	s, err := cl.initialize(ctx, cl.urls[cl.pick()])
	if err != nil {
		if s != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = cl.deleteSession(dctx, cl.urls[cl.pick()], s)
		}
		return time.Since(start), err
	}
	w.r.extra("initialize", time.Since(start))
	if s.id == "" {
		return time.Since(start), bench.Errorf("protocol", "initialize returned no Mcp-Session-Id")
	}
	deleted := false
	defer func() {
		// A session left behind by a failed or interrupted operation
		// would burden the server (and the next runs) until it expires.
		if !deleted {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = cl.deleteSession(dctx, cl.urls[cl.pick()], s)
		}
	}()
	t := time.Now()
	id := s.newID()
	body := cl.requestBody(id, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "churn"}}, nil)
	ex, err := cl.call(ctx, cl.urls[cl.pick()], s, id, body, "tools/call", "echo", nil)
	if err == nil {
		err = expectText(ex, "churn")
	}
	if err != nil {
		return time.Since(start), err
	}
	w.r.extra("call", time.Since(t))
	t = time.Now()
	if err := cl.deleteSession(ctx, cl.urls[cl.pick()], s); err != nil {
		return time.Since(start), fmt.Errorf("DELETE: %w", err)
	}
	deleted = true
	w.r.extra("delete", time.Since(t))
	return time.Since(start), nil
}
