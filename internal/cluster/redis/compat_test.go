package redis

// Compatibility with the previous release (v0.1.0, commit dac849f):
// during a rolling upgrade, or a downgrade, nodes of both releases share
// one Redis. testdata/v0.1.0/redis.json was captured once from that
// release: a sequence of calls of every seam (writeSequence is the same
// sequence in this release's API), the results it got, every key it left
// (the state) and every message it published. read_by_previous.json
// holds the state this release's sequence left, as it was restored into
// a Redis and read there by the previous release's code, and what that
// code read.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// previousRelease names the directory of testdata holding what was
// captured from the previous release.
const previousRelease = "v0.1.0"

// opResult is one call of writeSequence and what it returned.
type opResult struct {
	Op     string `json:"op"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// capture is testdata/<release>/redis.json.
type capture struct {
	Release   string      `json:"release"`
	Commit    string      `json:"commit"`
	Results   []opResult  `json:"results"`
	State     stateDump   `json:"state"`
	Published []published `json:"published"`
}

// previousReads is testdata/<release>/read_by_previous.json: State, as
// this release's writeSequence left it; Reads, what the previous
// release's code read of it (the calls of readSequence, by name); and
// ReadsOwn, what it read of its own state (redis.json's).
type previousReads struct {
	Release  string     `json:"release"`
	State    stateDump  `json:"state"`
	Reads    []opResult `json:"reads"`
	ReadsOwn []opResult `json:"reads_own"`
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", previousRelease, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// compatBackend opens a backend of this package on a fresh Redis with
// its call tokens named TOK-<n> (as the capture's were), without the
// janitor (it would prune between a write and the dump).
func compatBackend(t *testing.T) (*cluster.Backend, *goredis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	be, err := New(t.Context(), c, Options{JanitorInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	(*backend)(be.Sessions.(*sessions)).tokPrefix = "TOK-"
	return be, c
}

const compatTTL = 10 * time.Minute

var compatLimits = cluster.Limits{MaxEvents: 1000, MaxStreams: 100, TTL: compatTTL}

// recorder collects the results of a sequence of calls.
type recorder []opResult

func (r *recorder) add(op string, res any, err error) {
	o := opResult{Op: op, Result: res}
	if err != nil {
		o.Error = err.Error()
	}
	*r = append(*r, o)
}

// writeSequence makes the calls the capture made, in this release's API.
// The holders recorded by Load are the one difference in what it writes
// (cluster.Holders): node1's is cleared by Set, node2's stays.
func writeSequence(ctx context.Context, be *cluster.Backend) []opResult {
	var rec recorder
	lim := compatLimits
	rec.add("Members.Heartbeat node1.inc1", nil, be.Members.Heartbeat(ctx, "node1.inc1", 5*time.Second))
	rec.add("Members.Heartbeat node2.inc2", nil, be.Members.Heartbeat(ctx, "node2.inc2", 5*time.Second))
	m, err := be.Members.Members(ctx)
	slices.Sort(m)
	rec.add("Members.Members", m, err)

	lease := &cluster.SessionLease{Key: "sessions:1.2.3.4", TTL: compatTTL, Max: 1000}
	s1 := map[string]string{"f": "2", "v": "2025-11-25", "caps": `{"sampling":{}}`, "info": `{"name":"chaos","version":"1"}`, "p": "", "c": "2026-11-24T07:44:19.123456789Z"}
	rec.add("Sessions.Create S1", nil, be.Sessions.Create(ctx, "S1", s1, compatTTL, 1000, cluster.CreateOptions{Lease: lease}))
	f, err := be.Sessions.Load(ctx, "S1", compatTTL, "node1.inc1~2")
	rec.add("Sessions.Load S1", f, err)
	holders, err := be.Sessions.Set(ctx, "S1", map[string]string{"lvl": "debug"})
	rec.add("Sessions.Set S1 lvl", holderNames(holders), err)
	rec.add("Sessions.Subscribe S1", nil, be.Sessions.Subscribe(ctx, "S1", "demo://counter"))
	live, err := be.Sessions.TouchMany(ctx, []string{"S1", "gone"}, compatTTL)
	rec.add("Sessions.TouchMany", live, err)
	subs, err := be.Sessions.Subscribers(ctx, "demo://counter")
	rec.add("Sessions.Subscribers", subs, err)
	f, err = be.Sessions.Load(ctx, "S1", compatTTL, "node2.inc2~2")
	rec.add("Sessions.Load S1 again", f, err)

	seq, err := be.Events.AppendBatch(ctx, "S1", "x1", [][]byte{nil, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`), []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2}}`)}, false,
		cluster.Batch{Open: &cluster.StreamMeta{Session: "S1", Owner: "node1.inc1", Request: "i:1"}}, lim)
	rec.add("Events.AppendBatch S1/x1 open", seq, err)
	evs, info, err := be.Events.Read(ctx, "S1", "x1", 0)
	rec.add("Events.Read S1/x1", map[string]any{"events": evs, "info": info}, err)
	seq, err = be.Events.AppendBatch(ctx, "S1", "x1", [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":3}}`), []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}`)}, true, cluster.Batch{}, lim)
	rec.add("Events.AppendBatch S1/x1 final", seq, err)
	rec.add("Events.Open S1/g1", nil, be.Events.Open(ctx, "g1", cluster.StreamMeta{Session: "S1"}, lim))
	seq, err = be.Events.Append(ctx, "S1", "g1", []byte(`{"jsonrpc":"2.0","id":"c.node1.inc1.AAAA","method":"sampling/createMessage","params":{}}`), false, lim)
	rec.add("Events.Append S1/g1", seq, err)
	rec.add("Events.Open /broadcast/list-changed", nil, be.Events.Open(ctx, "list-changed", cluster.StreamMeta{Session: "/broadcast"}, lim))
	seq, err = be.Events.Append(ctx, "/broadcast", "list-changed", []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`), false, lim)
	rec.add("Events.Append /broadcast/list-changed", seq, err)
	rec.add("Events.SlideMany", nil, be.Events.SlideMany(ctx, []cluster.StreamRef{{Session: "S1", Stream: "x1"}, {Session: "S1", Stream: "g1"}}, compatTTL))

	prev, err := be.Claims.Claim(ctx, "session:S1:get", "conn1", 30*time.Second)
	rec.add("Claims.Claim session:S1:get", prev, err)
	prev, err = be.Claims.Claim(ctx, "follow:x1", "node1.inc1", 30*time.Second)
	rec.add("Claims.Claim follow:x1", prev, err)
	ok, err := be.Claims.Once(ctx, "mrtr:abc", time.Minute)
	rec.add("Claims.Once mrtr:abc", ok, err)

	was, err := be.Registry.Swap(ctx, "tool:extra", false, true)
	rec.add("Registry.Swap tool:extra off", was, err)
	on, err := be.Registry.Toggle(ctx, "tool:extra", false)
	rec.add("Registry.Toggle tool:extra", on, err)

	taken, err := be.Limiter.Take(ctx, []cluster.Debit{{Key: "rate:1.2.3.4", N: 5, Rate: 1, Burst: 10}})
	rec.add("Limiter.Take rate:1.2.3.4", waits(taken), err)
	ok, w, err := be.Limiter.Acquire(ctx, "streams:1.2.3.4", "conn1", 30*time.Second, 1000)
	rec.add("Limiter.Acquire streams:1.2.3.4", []any{ok, w}, err)

	created := time.Date(2026, 11, 24, 7, 44, 19, 0, time.UTC)
	task := cluster.Task{ID: "T1", OwnerKey: "1.2.3.4", Status: "working", Created: created, Updated: created, TTL: compatTTL, PollInterval: time.Second,
		Method: "tools/call", Params: []byte(`{"name":"echo_task","arguments":{"text":"hi"}}`), Meta: []byte(`{"v":"2026-07-28"}`), Runner: "node1.inc1", Attempt: 1, Idempotent: true}
	_, err = be.Tasks.Create(ctx, task, 100, nil)
	rec.add("Tasks.Create T1", nil, err)
	t2 := task
	t2.ID, t2.Idempotent = "T2", false
	_, err = be.Tasks.Create(ctx, t2, 100, nil)
	rec.add("Tasks.Create T2", nil, err)
	_, err = be.Tasks.Update(ctx, "T1", cluster.TaskUpdate{IfRunner: "node1.inc1", AddInputs: map[string][]byte{"k1": []byte(`{"method":"sampling/createMessage"}`)}})
	rec.add("Tasks.Update T1 AddInputs", nil, err)
	_, err = be.Tasks.Update(ctx, "T1", cluster.TaskUpdate{Respond: map[string][]byte{"k1": []byte(`{"role":"assistant"}`)}})
	rec.add("Tasks.Update T1 Respond", nil, err)
	_, err = be.Tasks.Update(ctx, "T1", cluster.TaskUpdate{IfRunner: "node1.inc1", Consume: []string{"k1"}})
	rec.add("Tasks.Update T1 Consume", nil, err)
	_, err = be.Tasks.Update(ctx, "T1", cluster.TaskUpdate{IfRunner: "node1.inc1", Status: "completed", Result: []byte(`{"content":[{"type":"text","text":"hi"}]}`)})
	rec.add("Tasks.Update T1 completed", nil, err)
	tk, err := be.Tasks.Get(ctx, "T1")
	tk.Created, tk.Updated = time.Time{}, time.Time{}
	rec.add("Tasks.Get T1", tk, err)
	runners, err := be.Tasks.Runners(ctx, 10)
	rec.add("Tasks.Runners", runners, err)
	ids, err := be.Tasks.RunnerTasks(ctx, "node1.inc1", 10)
	rec.add("Tasks.RunnerTasks node1.inc1", ids, err)

	n, err := be.Bus.Publish(ctx, "all", []byte(`{"t":"reg"}`))
	rec.add("Bus.Publish all", n, err)
	n, err = be.Bus.Publish(ctx, "reply:node1.inc1", []byte(`{"s":"S1","i":"s:c.node1.inc1.AAAA","r":{}}`))
	rec.add("Bus.Publish reply:node1.inc1", n, err)

	s2 := map[string]string{"f": "2", "v": "2025-11-25", "caps": "{}", "p": "", "c": "2026-11-24T07:44:19Z"}
	rec.add("Sessions.Create S2", nil, be.Sessions.Create(ctx, "S2", s2, compatTTL, 1000, cluster.CreateOptions{Lease: lease}))
	endLive, err := be.Sessions.End(ctx, "S2", cluster.EndOptions{Match: map[string]string{"p": ""}, Announce: &cluster.Notice{Topic: "all", Msg: []byte(`{"t":"end","s":"S2","a":"node1.inc1|1"}`)}, Lease: "sessions:1.2.3.4"})
	rec.add("Sessions.End S2", endLive, err)
	count, err := be.Sessions.Count(ctx)
	rec.add("Sessions.Count", count, err)
	return rec
}

func holderNames(hs []cluster.Holder) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return out
}

func waits(ts []cluster.Taken) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Wait)
	}
	return out
}

// changedResults are the calls whose result this release reports
// differently, by design: Set returns the holders it cleared.
var changedResults = map[string]bool{"Sessions.Set S1 lvl": true}

// watchPubSub records every message published on channels matching
// pattern, until the returned function is called.
func watchPubSub(ctx context.Context, t testing.TB, c *goredis.Client, pattern string) func() []published {
	t.Helper()
	ps := c.PSubscribe(ctx, pattern)
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []published
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			mu.Lock()
			got = append(got, published{m.Channel, m.Payload})
			mu.Unlock()
		}
	}()
	return func() []published {
		time.Sleep(200 * time.Millisecond) // the last messages arrive
		ps.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// asJSON returns v as the generic value its JSON decodes to, so that
// results of both releases compare as they were captured.
func asJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestThisReleaseWritesThePreviousLayout: the calls of the capture, made
// by this release, leave the keys the previous release left, with the
// same types, fields, values (times and tokens aside) and TTLs, publish
// the same messages, and answer the same, except where this release adds
// to the form in a way the previous release ignores: the holders of a
// session (fields "\x01<instance>" of its hash, which the previous
// release's Load returns as fields and its session codec ignores:
// internal/session's compatibility test) and the holders Set returns.
func TestThisReleaseWritesThePreviousLayout(t *testing.T) {
	var want capture
	readJSON(t, "redis.json", &want)
	be, c := compatBackend(t)
	ctx := t.Context()
	watch := goredis.NewClient(&goredis.Options{Addr: c.Options().Addr})
	t.Cleanup(func() { watch.Close() })
	stop := watchPubSub(ctx, t, watch, "mcp:*")
	results := writeSequence(ctx, be)
	got := dumpState(ctx, t, c)
	pub := stop()

	if len(results) != len(want.Results) {
		t.Fatalf("%d calls, the capture has %d", len(results), len(want.Results))
	}
	for i, r := range results {
		w := want.Results[i]
		if r.Op != w.Op {
			t.Fatalf("call %d is %s, the capture's is %s", i, r.Op, w.Op)
		}
		if changedResults[r.Op] {
			continue
		}
		if g := asJSON(t, r); !reflect.DeepEqual(g, asJSON(t, w)) {
			t.Errorf("%s: got %v, the previous release got %v", r.Op, g, asJSON(t, w))
		}
	}

	wantKeys, gotKeys := normalized(want.State), normalized(got)
	for key, w := range wantKeys {
		g, ok := gotKeys[key]
		if !ok {
			t.Errorf("key %s (%s) is not written", key, w.Type)
			continue
		}
		if strings.HasSuffix(key, ":s") && g.Hash != nil {
			for f := range g.Hash {
				if strings.HasPrefix(f, holderField) {
					if _, old := w.Hash[f]; !old {
						delete(g.Hash, f)
					}
				}
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("key %s:\n got  %+v\n want %+v", key, describe(g), describe(w))
		}
	}
	for key := range gotKeys {
		if _, ok := wantKeys[key]; !ok {
			t.Errorf("key %s is new: the previous release does not know it", key)
		}
	}
	if h := got.hashOf("mcp:{S1}:s"); h[holderField+"node2.inc2~2"] == "" {
		t.Errorf("session S1 records no holder: %q", h)
	}
	if !reflect.DeepEqual(normPublished(pub, got.NowMS), normPublished(want.Published, want.State.NowMS)) {
		t.Errorf("published:\n got  %q\n want %q", pub, want.Published)
	}
}

func (d stateDump) hashOf(key string) map[string]string {
	for _, k := range d.Keys {
		if k.Key == key {
			return k.Hash
		}
	}
	return nil
}

func normPublished(ps []published, nowMS int64) []published {
	out := make([]published, len(ps))
	for i, p := range ps {
		out[i] = published{p.Channel, norm(p.Payload, nowMS)}
	}
	return out
}

func describe(k keyDump) string {
	b, _ := json.Marshal(k)
	return string(b)
}

// readSequence reads back everything writeSequence wrote, as a node
// would: the calls both releases have, by name.
func readSequence(ctx context.Context, be *cluster.Backend) []opResult {
	var rec recorder
	m, err := be.Members.Members(ctx)
	slices.Sort(m)
	rec.add("Members.Members", m, err)
	f, err := be.Sessions.Load(ctx, "S1", compatTTL, "")
	rec.add("Sessions.Load S1", f, err)
	_, err = be.Sessions.Load(ctx, "S2", compatTTL, "")
	rec.add("Sessions.Load S2", nil, err)
	subs, err := be.Sessions.Subscribers(ctx, "demo://counter")
	rec.add("Sessions.Subscribers", subs, err)
	count, err := be.Sessions.Count(ctx)
	rec.add("Sessions.Count", count, err)
	for _, s := range []cluster.StreamRef{{Session: "S1", Stream: "x1"}, {Session: "S1", Stream: "g1"}, {Session: "/broadcast", Stream: "list-changed"}} {
		evs, info, err := be.Events.Read(ctx, s.Session, s.Stream, 0)
		rec.add("Events.Read "+s.Session+"/"+s.Stream, map[string]any{"events": evs, "info": info}, err)
	}
	_, err = be.Events.Append(ctx, "S1", "x1", []byte(`{}`), false, compatLimits)
	rec.add("Events.Append S1/x1 after its final", nil, err)
	seq, err := be.Events.Append(ctx, "S1", "g1", []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`), false, compatLimits)
	rec.add("Events.Append S1/g1", seq, err)
	for _, k := range []string{"session:S1:get", "follow:x1"} {
		h, err := be.Claims.Holder(ctx, k)
		rec.add("Claims.Holder "+k, h, err)
	}
	ok, err := be.Claims.Once(ctx, "mrtr:abc", time.Minute)
	rec.add("Claims.Once mrtr:abc", ok, err)
	all, err := be.Registry.All(ctx)
	rec.add("Registry.All", all, err)
	ok, _, err = be.Limiter.Acquire(ctx, "streams:1.2.3.4", "conn1", 30*time.Second, 1)
	rec.add("Limiter.Acquire streams:1.2.3.4 again", ok, err)
	for _, id := range []string{"T1", "T2"} {
		tk, err := be.Tasks.Get(ctx, id)
		tk.Created, tk.Updated = time.Time{}, time.Time{}
		rec.add("Tasks.Get "+id, tk, err)
	}
	runners, err := be.Tasks.Runners(ctx, 10)
	rec.add("Tasks.Runners", runners, err)
	ids, err := be.Tasks.RunnerTasks(ctx, "node1.inc1", 10)
	rec.add("Tasks.RunnerTasks node1.inc1", ids, err)
	return rec
}

// TestPreviousReleaseStateReads: the keys the previous release left,
// restored into a Redis (times moved to its clock), read by this
// release: every session, stream, claim, registry entry, lease and task
// as the previous release itself read them (read_by_previous.json's
// ReadsOwn), and the calls that go on from them work.
func TestPreviousReleaseStateReads(t *testing.T) {
	var prev capture
	readJSON(t, "redis.json", &prev)
	var shown previousReads
	readJSON(t, "read_by_previous.json", &shown)
	be, c := compatBackend(t)
	ctx := t.Context()
	restoreState(ctx, t, c, prev.State)
	checkReads(t, readSequence(ctx, be), shown.ReadsOwn)

	// Calls that go on from the previous release's state.
	if _, err := be.Events.AppendBatch(ctx, "S1", "g1", [][]byte{[]byte(`{}`)}, false, cluster.Batch{Next: 3, Token: "node1.inc1~2#1"}, compatLimits); err != nil {
		t.Errorf("AppendBatch with Next on a stream of the previous release: %v", err)
	}
	taken, err := be.Limiter.Take(ctx, []cluster.Debit{{Key: "rate:1.2.3.4", N: 1, Rate: 1, Burst: 10}})
	if err != nil || len(taken) != 1 || taken[0].Balance > 5 {
		t.Errorf("Take on the previous release's bucket (balance 5): %+v, %v", taken, err)
	}
	holders, err := be.Sessions.Set(ctx, "S1", map[string]string{"lvl": "info"})
	if err != nil || len(holders) != 0 {
		t.Errorf("Set of a session of the previous release: holders %v, %v", holders, err)
	}
	var ended []cluster.Holder
	if live, err := be.Sessions.End(ctx, "S1", cluster.EndOptions{Match: map[string]string{"p": ""}, Holders: &ended}); !live || err != nil {
		t.Errorf("End of a session of the previous release: live %v, %v", live, err)
	}
}

// TestPreviousReleaseReadsThisRelease: what this release writes is
// still what the previous release was shown to read
// (read_by_previous.json: the state of writeSequence, then restored and
// read by that release's code), and this release reads the same of it.
func TestPreviousReleaseReadsThisRelease(t *testing.T) {
	var shown previousReads
	readJSON(t, "read_by_previous.json", &shown)
	be, c := compatBackend(t)
	ctx := t.Context()
	writeSequence(ctx, be)
	now := dumpState(ctx, t, c)
	want, got := normalized(shown.State), normalized(now)
	if !reflect.DeepEqual(got, want) {
		for k, g := range got {
			if w := want[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("key %s:\n this release writes %s\n the previous release read %s", k, describe(g), describe(w))
			}
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Errorf("key %s is no longer written", k)
			}
		}
	}

	be2, c2 := compatBackend(t)
	restoreState(ctx, t, c2, shown.State)
	checkReads(t, readSequence(ctx, be2), shown.Reads)
}

// checkReads compares this release's reads with the previous release's
// of the same state. The previous release's Load returns the holders'
// fields ("\x01<instance>") with the session's: its session codec
// ignores them. Errors compare by their presence.
func checkReads(t *testing.T, got, prev []opResult) {
	t.Helper()
	if len(got) != len(prev) {
		t.Fatalf("%d reads, the previous release made %d", len(got), len(prev))
	}
	for i, g := range got {
		w := prev[i]
		if g.Op != w.Op {
			t.Fatalf("read %d is %s, the previous release's is %s", i, g.Op, w.Op)
		}
		wj := asJSON(t, w)
		if m, ok := wj.(map[string]any)["result"].(map[string]any); ok && g.Op == "Sessions.Load S1" {
			for f := range m {
				if strings.HasPrefix(f, holderField) {
					delete(m, f)
				}
			}
		}
		gj := asJSON(t, g)
		if g.Error != "" && w.Error != "" { // both refused: the words may differ
			gj.(map[string]any)["error"], wj.(map[string]any)["error"] = "refused", "refused"
		}
		if !reflect.DeepEqual(gj, wj) {
			t.Errorf("%s: this release read %v, the previous release %v", g.Op, gj, wj)
		}
	}
}
