package mcptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// CrossPrincipal is the cross-principal battery: an intruder tries to
// use, resume, end, answer for, cancel, reuse and listen in on what the
// owner holds, on every node. Each attempt is made twice by the
// intruder: once naming the owner's state and once naming state that
// does not exist; the answers must be equal (status, headers but Date
// and X-Request-Id, body byte for byte) and name nothing of the owner's.
// Afterwards the owner's state must be intact: its session lives, its
// GET stream and subscription still deliver, its pending server→client
// request still takes its own reply, its requestState and listen stream
// still work.
//
// The servers run the demo tool pack (sample, echo, bump_counter and the
// demo://counter resource) with a shared state key.
type CrossPrincipal struct {
	T testing.TB
	// URLs are the nodes: the owner works on the first, the intruder's
	// attempts go to each node in turn, so that with several nodes every
	// check runs away from where the state was made.
	URLs []string
	// Owner and Intruder are the headers that authenticate each (nil:
	// anonymous).
	Owner, Intruder http.Header
	// Attempts counts the intruder's attempts, Refusals those answered
	// exactly as for something that does not exist, with nothing of the
	// owner's in the answer and nothing of the owner's changed.
	Attempts, Refusals int

	next    int
	secrets []string // what must never appear in an answer to the intruder
}

// attemptTimeout bounds one attempt: a refusal is immediate, an accepted
// GET would stream until then.
const attemptTimeout = 3 * time.Second

func (b *CrossPrincipal) client(h http.Header, url string) *Client {
	c := New(b.T, url)
	c.Header = h.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	return c
}

// intruderURL is the node of the intruder's next attempt.
func (b *CrossPrincipal) intruderURL() string {
	b.next++
	return b.URLs[b.next%len(b.URLs)]
}

func (b *CrossPrincipal) keep(secrets ...string) {
	for _, s := range secrets {
		if s != "" {
			b.secrets = append(b.secrets, s)
		}
	}
}

// do sends one request and reads the whole answer (a stream until
// attemptTimeout).
func do(t testing.TB, c *Client, method, url string, body []byte, mod func(*http.Request)) *Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	resp, err := c.Raw(ctx, method, url, body, mod)
	if err != nil && resp == nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// comparable is what of an answer must not tell one case from the other.
func comparable(r *Response) string {
	h := r.Header.Clone()
	h.Del("Date")
	h.Del("X-Request-Id")
	var sb strings.Builder
	_ = h.Write(&sb)
	return sb.String() + "\n" + string(r.Body)
}

// Same records one attempt: got (naming the owner's state) must equal
// want (naming state that does not exist) and hold none of the owner's
// secrets but those the intruder sent itself (sent: its body and
// headers, which a refusal may echo, as it echoes the request's id).
func (b *CrossPrincipal) Same(what string, got, want *Response, sent ...string) {
	b.T.Helper()
	b.Attempts++
	ok := true
	if got.Status != want.Status || comparable(got) != comparable(want) {
		b.T.Errorf("%s: the intruder's answer differs from the one for nothing:\n got %d %s\nwant %d %s", what, got.Status, comparable(got), want.Status, comparable(want))
		ok = false
	}
	if leak := b.leak(got, strings.Join(sent, "\n")); leak != "" {
		b.T.Errorf("%s: the answer holds the owner's %q", what, leak)
		ok = false
	}
	if ok {
		b.Refusals++
	}
}

// Intact records that an attempt changed nothing of the owner's.
func (b *CrossPrincipal) Intact(what string, ok bool) {
	b.T.Helper()
	b.Attempts++
	if !ok {
		b.T.Errorf("%s: the owner's state changed", what)
		return
	}
	b.Refusals++
}

func (b *CrossPrincipal) leak(r *Response, sent string) string {
	all := comparable(r)
	for _, m := range r.Messages {
		enc, _ := jsonrpc.Encode(m)
		all += string(enc)
	}
	for _, s := range b.secrets {
		if strings.Contains(all, s) && !strings.Contains(sent, s) {
			return s
		}
	}
	return ""
}

// Log writes the counts to the test log.
func (b *CrossPrincipal) Log(name string) {
	b.T.Helper()
	b.T.Logf("cross-principal battery %s: %d attempts, %d refused as for nothing, on %d node(s)", name, b.Attempts, b.Refusals, len(b.URLs))
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// enc encodes a message built by jsonrpc.Request or Notification.
func (b *CrossPrincipal) enc(msg *jsonrpc.Message, err error) []byte {
	b.T.Helper()
	if err != nil {
		b.T.Fatal(err)
	}
	out, _ := jsonrpc.Encode(msg)
	return out
}

// Legacy runs the battery on a 2025-11-25 session: every POST, GET and
// DELETE on the owner's session; resuming its POST and GET streams;
// replying to its pending server→client request and cancelling its
// request from the intruder's own session; and, when anonymous callers
// are served (anonymous), the same with an anonymous intruder on the
// owner's session and the intruder on an anonymous session.
func (b *CrossPrincipal) Legacy(anonymous bool) {
	t := b.T
	t.Helper()
	home := b.URLs[0]
	own := b.client(b.Owner, home)
	own.Initialize("2025-11-25", map[string]any{"sampling": map[string]any{}})
	withOwner := func(r *http.Request) {
		for k, v := range b.Owner {
			r.Header[k] = v
		}
	}
	get, err := own.GetWith(home, "", withOwner)
	if err != nil {
		t.Fatalf("owner's GET stream: %v", err)
	}
	t.Cleanup(get.Close)
	if !get.WaitUntil(attemptTimeout, func() bool { return len(get.Events()) > 0 }) {
		t.Fatal("owner's GET stream: no priming event")
	}
	getEvent := get.Events()[0].ID
	if r := own.Call("resources/subscribe", map[string]any{"uri": "demo://counter"}, nil); r.Final() == nil || r.Final().Error != nil {
		t.Fatalf("owner's subscription: %d %s", r.Status, r.Body)
	}
	prompt := "owner-secret-" + randomHex(6)
	callID, call := OpenCall(t, own, home, "tools/call", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": prompt}})
	if !call.WaitFor(attemptTimeout, Has("sampling/createMessage", 1)) {
		t.Fatal("owner's sample call: no sampling request")
	}
	var pending *jsonrpc.Message
	for _, m := range call.Messages() {
		if m.Method == "sampling/createMessage" {
			pending = m
		}
	}
	evs := call.Events()
	postEvent := evs[len(evs)-1].ID
	b.keep(own.Session, pending.ID.Str(), postEvent, getEvent, prompt)
	for _, vs := range b.Owner {
		for _, v := range vs {
			if len(v) >= 8 { // a bearer token: never echoed to anyone
				b.keep(v)
			}
		}
	}

	unknown := "unknown-" + randomHex(16)
	// onSession makes the intruder's attempt on the owner's session and
	// the same request on a session that does not exist.
	onSession := func(what, method string, body []byte, lastID string, intruder http.Header) {
		t.Helper()
		url := b.intruderURL()
		c := b.client(intruder, url)
		c.Version = own.Version
		mod := func(r *http.Request) {
			if lastID != "" {
				r.Header.Set("Last-Event-ID", lastID)
			}
		}
		c.Session = own.Session
		got := do(t, c, method, url, body, mod)
		c.Session = unknown
		want := do(t, c, method, url, body, mod)
		b.Same(what, got, want, string(body), lastID, own.Session)
	}
	id := jsonrpc.IntID(424242)
	forgedReply := b.enc(&jsonrpc.Message{ID: pending.ID, Result: json.RawMessage(`{"role":"assistant","model":"forged","content":{"type":"text","text":"forged"}}`)}, nil)
	posts := []struct {
		what string
		body []byte
	}{
		{"POST tools/call", b.enc(jsonrpc.Request(id, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}))},
		{"POST resources/unsubscribe", b.enc(jsonrpc.Request(id, "resources/unsubscribe", map[string]any{"uri": "demo://counter"}))},
		{"POST resources/subscribe", b.enc(jsonrpc.Request(id, "resources/subscribe", map[string]any{"uri": "demo://counter"}))},
		{"POST notifications/cancelled", b.enc(jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": callID}))},
		{"POST reply to the pending request", forgedReply},
	}
	intruders := []struct {
		name string
		h    http.Header
	}{{"intruder", b.Intruder}}
	if anonymous && b.Owner != nil {
		intruders = append(intruders, struct {
			name string
			h    http.Header
		}{"anonymous", nil})
	}
	for _, in := range intruders {
		for _, p := range posts {
			onSession(in.name+" "+p.what, http.MethodPost, p.body, "", in.h)
		}
		onSession(in.name+" GET stream", http.MethodGet, nil, "", in.h)
		onSession(in.name+" GET resume of the POST stream", http.MethodGet, nil, postEvent, in.h)
		onSession(in.name+" GET resume of the GET stream", http.MethodGet, nil, getEvent, in.h)
		onSession(in.name+" DELETE", http.MethodDelete, nil, "", in.h)
	}

	// From the intruder's own session: the owner's request id and stream
	// id against ones that do not exist.
	mine := b.client(b.Intruder, b.intruderURL())
	mine.Initialize("2025-11-25", map[string]any{"sampling": map[string]any{}})
	onOwn := func(what, method string, attempt, none []byte, lastAttempt, lastNone string) {
		t.Helper()
		url := b.intruderURL()
		mod := func(last string) func(*http.Request) {
			return func(r *http.Request) {
				if last != "" {
					r.Header.Set("Last-Event-ID", last)
				}
			}
		}
		got := do(t, mine, method, url, attempt, mod(lastAttempt))
		want := do(t, mine, method, url, none, mod(lastNone))
		b.Same(what, got, want, string(attempt), lastAttempt)
	}
	owner, rest, _ := strings.Cut(strings.TrimPrefix(pending.ID.Str(), "c."), ".")
	inc, _, _ := strings.Cut(rest, ".")
	noneID := jsonrpc.StringID("c." + owner + "." + inc + "." + randomHex(12))
	noneReply := b.enc(&jsonrpc.Message{ID: noneID, Result: json.RawMessage(`{"role":"assistant","model":"forged","content":{"type":"text","text":"forged"}}`)}, nil)
	onOwn("reply to the owner's request from the intruder's session", http.MethodPost, forgedReply, noneReply, "", "")
	onOwn("cancel the owner's request from the intruder's session", http.MethodPost,
		b.enc(jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": callID})),
		b.enc(jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": 99999})), "", "")
	seq := postEvent[strings.LastIndexByte(postEvent, '_')+1:]
	onOwn("resume the owner's POST stream from the intruder's session", http.MethodGet, nil, nil, postEvent, sse.NewStreamID()+"_"+seq)

	if anonymous && b.Intruder != nil {
		// The intruder, authenticated, on an anonymous session.
		anon := b.client(nil, home)
		anon.Initialize("2025-11-25", nil)
		b.keep(anon.Session)
		url := b.intruderURL()
		c := b.client(b.Intruder, url)
		c.Version = anon.Version
		body := b.enc(jsonrpc.Request(id, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}))
		c.Session = anon.Session
		got := do(t, c, http.MethodPost, url, body, nil)
		c.Session = unknown
		want := do(t, c, http.MethodPost, url, body, nil)
		b.Same("intruder on an anonymous session", got, want, anon.Session)
		if r := anon.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "still"}}, nil); r.Final() == nil || r.Final().Error != nil {
			b.T.Errorf("the anonymous session no longer works: %d %s", r.Status, r.Body)
		}
	}

	// Nothing of the owner's changed: its GET stream still holds and
	// delivers its subscription, its request still waits for its own
	// reply, and its session lives.
	b.Intact("the owner's GET stream is still open", func() bool {
		select {
		case <-get.Done():
			return false
		default:
			return true
		}
	}())
	if r := own.Call("tools/call", map[string]any{"name": "bump_counter", "arguments": map[string]any{}}, nil); r.Final() == nil || r.Final().Error != nil {
		t.Fatalf("owner's session no longer works: %d %s", r.Status, r.Body)
	}
	b.Intact("the owner's session and subscription", get.WaitFor(attemptTimeout, Has("notifications/resources/updated", 1)))
	real := &jsonrpc.Message{ID: pending.ID, Result: json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"owner's answer"}}`)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	own.Reply(ctx, real)
	if !call.WaitFor(10*time.Second, func(ms []*jsonrpc.Message) bool { return Final(ms) != nil }) {
		t.Fatal("owner's call did not end after its reply")
	}
	final := Final(call.Messages())
	b.Intact("the owner's request took only its own reply", final.Error == nil && bytes.Contains(final.Result, []byte("owner's answer")))
}

// Modern runs the battery on 2026-07-28: the owner's requestState reused
// by the intruder, and the owner's subscriptions/listen stream cancelled
// or shadowed by the intruder (same request id).
func (b *CrossPrincipal) Modern() {
	t := b.T
	t.Helper()
	home := b.URLs[0]
	own := b.client(b.Owner, home)
	post := func(c *Client, url string, id jsonrpc.ID, name string, params map[string]any) *Response {
		t.Helper()
		params["_meta"] = ModernMeta()
		return do(t, c, http.MethodPost, url, b.enc(jsonrpc.Request(id, "tools/call", params)), ModernHeaders("tools/call", name))
	}
	prompt := "owner-secret-" + randomHex(6)
	args := map[string]any{"prompt": prompt}
	var round1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	post(own, home, jsonrpc.IntID(1), "sample", map[string]any{"name": "sample", "arguments": args}).Result(t, &round1)
	if round1.ResultType != "input_required" || round1.RequestState == "" {
		t.Fatalf("owner's round 1: %+v", round1)
	}
	b.keep(round1.RequestState, prompt)
	answer := map[string]any{}
	for k := range round1.InputRequests {
		answer[k] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "intruder"}}
	}
	forged := []byte(round1.RequestState)
	forged[len(forged)-2] ^= 1
	for range len(b.URLs) {
		url := b.intruderURL()
		in := b.client(b.Intruder, url)
		got := post(in, url, jsonrpc.IntID(2), "sample", map[string]any{"name": "sample", "arguments": args, "inputResponses": answer, "requestState": round1.RequestState})
		want := post(in, url, jsonrpc.IntID(2), "sample", map[string]any{"name": "sample", "arguments": args, "inputResponses": answer, "requestState": string(forged)})
		b.Same("reuse the owner's requestState", got, want, round1.RequestState, prompt)
	}
	for k := range answer {
		answer[k] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "owner's answer"}}
	}
	r := post(own, b.intruderURL(), jsonrpc.IntID(3), "sample", map[string]any{"name": "sample", "arguments": args, "inputResponses": answer, "requestState": round1.RequestState})
	b.Intact("the owner's requestState still works", r.Final() != nil && r.Final().Error == nil && bytes.Contains(r.Final().Result, []byte("owner's answer")))

	// subscriptions/listen: the intruder cancels the owner's listen by
	// its id, and listens with the same id; the owner's goes on.
	listenID := jsonrpc.StringID("listen-" + randomHex(8))
	b.keep(listenID.Str())
	listen := func(c *Client, url string, id jsonrpc.ID) *Stream {
		t.Helper()
		params := map[string]any{"notifications": map[string]any{"resourceSubscriptions": []any{"demo://counter"}}, "_meta": ModernMeta()}
		st, err := c.OpenPost(url, b.enc(jsonrpc.Request(id, "subscriptions/listen", params)), ModernHeaders("subscriptions/listen", ""))
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		t.Cleanup(st.Close)
		if !st.WaitFor(attemptTimeout, func(ms []*jsonrpc.Message) bool { return len(ms) > 0 }) {
			t.Fatal("listen: no acknowledgement")
		}
		return st
	}
	mine := listen(own, home, listenID)
	for range len(b.URLs) {
		url := b.intruderURL()
		in := b.client(b.Intruder, url)
		cancelOf := func(id any) []byte {
			return b.enc(jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": id, "_meta": ModernMeta()}))
		}
		mod := ModernHeaders("notifications/cancelled", "")
		got := do(t, in, http.MethodPost, url, cancelOf(listenID), mod)
		want := do(t, in, http.MethodPost, url, cancelOf("listen-none"), mod)
		b.Same("cancel the owner's listen", got, want, listenID.Str())
		theirs := listen(in, url, listenID)
		theirs.Close()
	}
	bump := post(own, home, jsonrpc.IntID(4), "bump_counter", map[string]any{"name": "bump_counter", "arguments": map[string]any{}})
	if bump.Final() == nil || bump.Final().Error != nil {
		t.Fatalf("bump_counter: %d %s", bump.Status, bump.Body)
	}
	b.Intact("the owner's listen still delivers", mine.WaitFor(attemptTimeout, Has("notifications/resources/updated", 1)) &&
		!slices.ContainsFunc(mine.Messages(), func(m *jsonrpc.Message) bool { return m.Kind() == jsonrpc.KindResponse }))
}

// Tasks runs the battery on a task of the 2026-07-28 tasks extension:
// the owner starts tool (a task tool that runs until cancelled) on the
// first node; on every node the intruder gets, updates and cancels it by
// its id, each answered exactly as for an id that does not exist; the
// owner's task then still runs, and the owner cancels it.
func (b *CrossPrincipal) Tasks(tool string) {
	t := b.T
	t.Helper()
	meta := ModernMeta()
	meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{
		"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	send := func(c *Client, url, method, name string, params map[string]any) *Response {
		t.Helper()
		params["_meta"] = meta
		return do(t, c, http.MethodPost, url, b.enc(jsonrpc.Request(jsonrpc.IntID(1), method, params)), ModernHeaders(method, name))
	}
	home := b.URLs[0]
	own := b.client(b.Owner, home)
	var created struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	send(own, home, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{}}).Result(t, &created)
	if created.ResultType != "task" || created.TaskID == "" {
		t.Fatalf("owner's task: %+v", created)
	}
	id := created.TaskID
	b.keep(id)
	none := "task-" + randomHex(11)
	for range len(b.URLs) {
		url := b.intruderURL()
		in := b.client(b.Intruder, url)
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			params := func(id string) map[string]any {
				p := map[string]any{"taskId": id}
				if method == "tasks/update" {
					p["inputResponses"] = map[string]any{"k": map[string]any{"action": "decline"}}
				}
				return p
			}
			got := send(in, url, method, id, params(id))
			want := send(in, url, method, none, params(none))
			b.Same(method+" of the owner's task", got, want, id)
		}
	}
	var state struct {
		Status string `json:"status"`
	}
	send(own, b.intruderURL(), "tasks/get", id, map[string]any{"taskId": id}).Result(t, &state)
	b.Intact("the owner's task still runs", state.Status == "working")
	send(own, home, "tasks/cancel", id, map[string]any{"taskId": id})
}
