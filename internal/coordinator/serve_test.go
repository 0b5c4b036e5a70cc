package coordinator_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// sinkEvent is an event a fakeSink wrote.
type sinkEvent struct {
	stream string
	seq    uint64
	data   string
}

// fakeSink records what the node writes to a stream; an event counts as
// written once flushed.
type fakeSink struct {
	mu      sync.Mutex
	kind    coordinator.StreamKind
	opened  int
	stop    func(error)
	queued  []sinkEvent
	written []sinkEvent
	retries []sinkEvent // the retry hints: with the priming event's id, or none
	ended   chan struct{}
}

func newSink() *fakeSink { return &fakeSink{ended: make(chan struct{})} }

func (s *fakeSink) Open(kind coordinator.StreamKind, stop func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kind, s.stop = kind, stop
	s.opened++
}

func (s *fakeSink) Queue(stream string, seq uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = append(s.queued, sinkEvent{stream, seq, string(data)})
	return nil
}

func (s *fakeSink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written = append(s.written, s.queued...)
	s.queued = nil
	return nil
}

func (s *fakeSink) Retry(stream string, seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries = append(s.retries, sinkEvent{stream: stream, seq: seq})
	return nil
}

func (s *fakeSink) End() { close(s.ended) } // a second End panics

func (s *fakeSink) events() []sinkEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written)
}

func (s *fakeSink) hints() []sinkEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.retries)
}

func (s *fakeSink) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// waitEvents waits until s wrote n events, and returns them.
func (s *fakeSink) waitEvents(t *testing.T, n int) []sinkEvent {
	t.Helper()
	waitFor(t, "the stream's events", func() bool { return len(s.events()) >= n })
	return s.events()
}

// detachingSink is a fakeSink that goes on after the call serving it
// returned (a coordinator.Detacher).
type detachingSink struct{ *fakeSink }

func (detachingSink) Detach() bool { return true }

// admission counts the places a stream took and gave back; err refuses
// them.
type admission struct {
	taken, released atomic.Int32
	err             error
}

func (a *admission) admit() (func(), error) {
	a.taken.Add(1)
	if a.err != nil {
		return nil, a.err
	}
	return func() { a.released.Add(1) }, nil
}

// balanced reports whether every place given was given back.
func (a *admission) balanced() bool {
	given := a.taken.Load()
	if a.err != nil {
		given = 0
	}
	return a.released.Load() == given
}

func holder(t *testing.T, be *cluster.Backend, key string) string {
	t.Helper()
	h, err := be.Claims.Holder(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// served fails the test unless the call that served a stream returned
// nil, within the time given.
func served(t *testing.T, done <-chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serving the stream: %v", err)
		}
	case <-time.After(within):
		t.Fatal(what)
	}
}

func wantEvents(t *testing.T, what string, got, want []sinkEvent) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}

// Flow 4: a POST stream produced on one node is resumed on another after
// Last-Event-ID: the events the client missed are replayed, the live
// ones follow until the final, a follower's claim keeps the producer
// going meanwhile, and a stream of another session (or a cursor past the
// stream's end) is refused without opening anything.
func TestServeResumesAPostStreamOnAnotherNode(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	sid := newSession(t, a.sessions)
	unhold, err := a.OpenStream(ctx, sid, "stream1", jsonrpc.StringID("r1").Key())
	if err != nil {
		t.Fatal(err)
	}
	defer unhold()
	record := func(data string, final bool) {
		t.Helper()
		if _, err := a.Record(ctx, sid, "stream1", []byte(data), final); err != nil {
			t.Fatal(err)
		}
	}
	record("e1", false)
	record("e2", false)

	sink := newSink()
	var adm admission
	done := make(chan error, 1)
	go func() {
		done <- b.Resume(ctx, coordinator.StreamOpen{Session: sid, Admit: adm.admit}, "stream1", 1, sink)
	}()
	sink.waitEvents(t, 1)
	follow := coordinator.FollowKey(sid, "stream1")
	waitFor(t, "the follower's claim", func() bool { return holder(t, be, follow) != "" })
	record("e3", false)
	record("final", true)
	served(t, done, 5*time.Second, "the resumed stream did not end at its final event")
	wantEvents(t, "the resumed stream", sink.events(), []sinkEvent{
		{"stream1", 2, "e2"}, {"stream1", 3, "e3"}, {"stream1", 4, "final"},
	})
	if sink.kind != coordinator.KindResumed || sink.opened != 1 || !sink.isEnded() || len(sink.hints()) != 0 {
		t.Fatalf("sink: kind %q, opened %d, ended %v, retry hints %v", sink.kind, sink.opened, sink.isEnded(), sink.hints())
	}
	if !adm.balanced() || adm.taken.Load() != 1 {
		t.Fatalf("admission: %d taken, %d given back", adm.taken.Load(), adm.released.Load())
	}
	if h := holder(t, be, follow); h != "" {
		t.Fatalf("the follower's claim is still held by %q", h)
	}

	other := newSession(t, b.sessions)
	for _, c := range []struct {
		session string
		seq     uint64
	}{{other, 0}, {sid, 9}} {
		refused := newSink()
		var adm admission
		err := b.Resume(ctx, coordinator.StreamOpen{Session: c.session, Admit: adm.admit}, "stream1", c.seq, refused)
		if !errors.Is(err, coordinator.ErrNoStream) {
			t.Fatalf("resume of stream1 by %s after %d: %v, want ErrNoStream", c.session, c.seq, err)
		}
		if refused.opened != 0 || !adm.balanced() {
			t.Fatalf("a refused resume opened its sink (%d) or kept its place (%d taken, %d given back)", refused.opened, adm.taken.Load(), adm.released.Load())
		}
	}
}

// Flow 5: a resumed POST stream whose producing process holds no
// membership lease is ended by the resuming node with a node-lost error
// for the request.
func TestServeResumeEndsWhenTheProducerIsLost(t *testing.T) {
	be, nodes := startNodes(t, 1)
	n, ctx, id := nodes[0], context.Background(), jsonrpc.StringID("r1")
	sid := newSession(t, n.sessions)
	meta := cluster.StreamMeta{Session: sid, Owner: "z.gone", Request: id.Key()}
	if err := be.Events.Open(ctx, "stream1", meta, cluster.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Events.Append(ctx, sid, "stream1", []byte("e1"), false, cluster.Limits{}); err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	done := make(chan error, 1)
	go func() { done <- n.Resume(ctx, coordinator.StreamOpen{Session: sid}, "stream1", 0, sink) }()
	served(t, done, 10*time.Second, "the stream of a lost producer did not end")
	got := sink.events()
	if len(got) != 2 || got[0] != (sinkEvent{"stream1", 1, "e1"}) {
		t.Fatalf("events: %+v", got)
	}
	msg, err := jsonrpc.Decode([]byte(got[1].data))
	if err != nil || msg.Error == nil || msg.Error.Code != jsonrpc.CodeNodeLost || msg.ID.Key() != id.Key() {
		t.Fatalf("final event %s (%v), want a node-lost error for the request", got[1].data, err)
	}
}

// Flow 7's GET stream: served on one node with no goroutine of its own
// (its sink detaches), it is taken over by a connection that resumes it
// on another node after the last event the client got: the first stream
// ends, the second replays what the client missed and follows the new
// events, and each gives its claim and place back as it ends.
func TestServeGetTakenOverAndResumedOnAnotherNode(t *testing.T) {
	be, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	sid := newSession(t, a.sessions)
	stream := coordinator.GetEventStream(sid, 0) // the broadcast log is empty
	appendGet := func(data string) {
		t.Helper()
		if err := b.AppendGet(ctx, sid, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}

	first := newSink()
	var admA admission
	if err := a.ServeGet(ctx, coordinator.StreamOpen{Session: sid, Prime: true, Admit: admA.admit}, detachingSink{first}); err != nil {
		t.Fatalf("ServeGet: %v", err)
	}
	if first.kind != coordinator.KindGet || !slices.Equal(first.hints(), []sinkEvent{{stream: stream}}) {
		t.Fatalf("the stream opened as %q with retry hints %+v, want a priming event at its start", first.kind, first.hints())
	}
	appendGet("n1")
	appendGet("n2")
	wantEvents(t, "the first stream", first.waitEvents(t, 2), []sinkEvent{{stream, 1, "n1"}, {stream, 2, "n2"}})

	// The client got n1 only, and resumes on b.
	second := newSink()
	var admB admission
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- b.Resume(rctx, coordinator.StreamOpen{Session: sid, Prime: true, Admit: admB.admit}, stream, 1, second)
	}()
	waitFor(t, "the first stream to be taken over", first.isEnded)
	waitFor(t, "the first stream's place to be given back", admA.balanced)
	second.waitEvents(t, 1)
	appendGet("n3")
	wantEvents(t, "the resumed stream", second.waitEvents(t, 2), []sinkEvent{{stream, 2, "n2"}, {stream, 3, "n3"}})
	if !slices.Equal(second.hints(), []sinkEvent{{stream: stream, seq: 1}}) {
		t.Fatalf("the resumed stream's retry hints: %+v, want a priming event at its cursor", second.hints())
	}
	if len(first.events()) != 2 || len(first.hints()) != 1 {
		t.Fatalf("the stream taken over wrote on: %+v, retry hints %+v", first.events(), first.hints())
	}

	cancel()
	served(t, done, 5*time.Second, "the resumed stream did not end with its caller")
	if !second.isEnded() || !admB.balanced() {
		t.Fatalf("ended %v; admission: %d taken, %d given back", second.isEnded(), admB.taken.Load(), admB.released.Load())
	}
	if h := holder(t, be, coordinator.GetKey(sid)); h != "" {
		t.Fatalf("the GET stream's claim is still held by %q", h)
	}
}

// Detached GET streams hold no goroutine while idle, and a drain ends
// each with the retry hint.
func TestServeGetDetachedIdleAndDrained(t *testing.T) {
	_, nodes := startNodes(t, 1)
	n := nodes[0]
	ctx := context.Background()
	const streams = 50
	sids := make([]string, streams)
	for i := range sids {
		sids[i] = newSession(t, n.sessions)
	}
	before := runtime.NumGoroutine()
	sinks := make([]*fakeSink, streams)
	for i, sid := range sids {
		sinks[i] = newSink()
		if err := n.ServeGet(ctx, coordinator.StreamOpen{Session: sid}, detachingSink{sinks[i]}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the set-ups' goroutines to end", func() bool { return runtime.NumGoroutine()-before < streams/10 })
	n.Drain(ctx)
	for i, s := range sinks {
		select {
		case <-s.ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("stream %d did not end on drain", i)
		}
		if want := []sinkEvent{{}, {}}; !slices.Equal(s.hints(), want) {
			t.Fatalf("stream %d: retry hints %+v, want one at the start and one at the end", i, s.hints())
		}
	}
	if err := n.ServeGet(ctx, coordinator.StreamOpen{Session: sids[0]}, newSink()); !errors.Is(err, jsonrpc.ErrDraining) {
		t.Fatalf("ServeGet on a draining node: %v", err)
	}
}

// A GET stream ends at its lifetime with the retry hint; a stream the
// caller cannot admit, resumed past the stream's end, or whose history
// after the cursor is gone, is refused before anything is taken.
func TestServeGetLifetimeAndRefusals(t *testing.T) {
	be, nodes := startNodes(t, 1)
	n := nodes[0]
	ctx := context.Background()
	sid := newSession(t, n.sessions)
	sink := newSink()
	start := time.Now()
	if err := n.ServeGet(ctx, coordinator.StreamOpen{Session: sid, Lifetime: 50 * time.Millisecond}, sink); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || !sink.isEnded() {
		t.Fatalf("the stream ended after %v (ended %v), want its lifetime", d, sink.isEnded())
	}
	if !slices.Equal(sink.hints(), []sinkEvent{{}, {}}) {
		t.Fatalf("retry hints %+v, want one at the start and one at the end", sink.hints())
	}

	full := errors.New("no place left")
	refused := newSink()
	adm := &admission{err: full}
	if err := n.ServeGet(ctx, coordinator.StreamOpen{Session: sid, Admit: adm.admit}, refused); !errors.Is(err, full) {
		t.Fatalf("ServeGet refused by the caller's admission: %v", err)
	}
	if err := n.Resume(ctx, coordinator.StreamOpen{Session: sid}, coordinator.GetEventStream(sid, 0), 7, refused); !errors.Is(err, coordinator.ErrNoStream) {
		t.Fatalf("Resume past the stream's end: %v", err)
	}
	lim := cluster.Limits{MaxEvents: 2}
	if err := be.Events.Open(ctx, "trimmed", cluster.StreamMeta{Session: sid}, lim); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := be.Events.Append(ctx, sid, "trimmed", []byte("e"), false, lim); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Resume(ctx, coordinator.StreamOpen{Session: sid}, "trimmed", 0, refused); !errors.Is(err, coordinator.ErrHistoryGone) {
		t.Fatalf("Resume of a trimmed history: %v", err)
	}
	if refused.opened != 0 {
		t.Fatal("a refused stream opened its sink")
	}
	if h := holder(t, be, coordinator.GetKey(sid)); h != "" {
		t.Fatalf("a refused stream holds the claim: %q", h)
	}
}

// Flow 8 over the node's streams: a session ended on one node ends the
// GET stream another node serves onto a Sink, and closes the client's
// connection of a POST stream that node produces (OpenPost's detach),
// whose production goes on until it is closed.
func TestEndSessionEndsStreamsServedElsewhere(t *testing.T) {
	_, nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	sid := newSession(t, b.sessions)

	get := newSink()
	var adm admission
	if err := b.ServeGet(ctx, coordinator.StreamOpen{Session: sid, Admit: adm.admit}, detachingSink{get}); err != nil {
		t.Fatalf("ServeGet: %v", err)
	}
	detached := make(chan struct{})
	post := b.OpenPost(sid, "s1", jsonrpc.IntID(7).Key(), nil, func() { close(detached) })
	if _, err := a.EndSession(ctx, sid, "", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the GET stream to end", get.isEnded)
	waitFor(t, "the GET stream's place to be given back", adm.balanced)
	select {
	case <-detached:
	case <-time.After(5 * time.Second):
		t.Fatal("the POST stream's connection was not closed")
	}
	post.Close(nil, nil) // a second close of the connection would panic
}
