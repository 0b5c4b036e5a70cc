package sse_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// recorder is a ResponseWriter that records what it is given, can fail
// its writes, and records the write deadlines it is set.
type recorder struct {
	mu        sync.Mutex
	header    http.Header
	status    int
	body      bytes.Buffer
	writes    int
	flushes   int
	fail      error
	deadlines []time.Time
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes++
	return r.body.Write(p)
}

func (r *recorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
}

func (r *recorder) SetWriteDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, t)
	return nil
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}

// counts returns the writes and flushes so far.
func (r *recorder) counts() (writes, flushes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.flushes
}

func (r *recorder) keepAlives() int { return strings.Count(r.String(), ": keep-alive\n") }

func TestWriterStartSendsStreamHeadersOnce(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{})
	starts := 0
	w.Start(func(h http.Header) { starts++; h.Set("X-Extra", "1") })
	w.Start(func(h http.Header) { starts++ })
	want := map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache, no-transform",
		"X-Accel-Buffering": "no",
		"X-Extra":           "1",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if rec.status != http.StatusOK || starts != 1 || rec.flushes != 1 {
		t.Fatalf("status %d, header callback ran %d times, %d flushes", rec.status, starts, rec.flushes)
	}
}

func TestWriterEventRetryAndDetach(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{OnFail: func() { t.Error("OnFail ran on a healthy writer") }})
	w.Start(nil)
	id := sse.EventID{Stream: "s1", Seq: 0}.String()
	if err := w.Event(sse.Event{ID: id, Retry: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := w.Event(sse.Event{Data: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	w.Detach(2 * time.Second)
	if err := w.Event(sse.Event{Data: []byte("late")}); !errors.Is(err, sse.ErrDetached) {
		t.Fatalf("write after Detach: %v", err)
	}
	w.Close() // after Detach: nothing changes
	want := "id: " + id + "\nretry: 1500\ndata: \n\n" + "data: {\"a\":1}\n\n" + "retry: 2000\n\n"
	if got := rec.String(); got != want {
		t.Fatalf("stream\n%q\nwant\n%q", got, want)
	}
	r := sse.NewReader(strings.NewReader(rec.String()), 1<<10)
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		n++
	}
	if n != 2 || r.Retry() != 2*time.Second || r.LastEventID() != id {
		t.Fatalf("a client sees %d events, retry %v, last id %q", n, r.Retry(), r.LastEventID())
	}
}

// The first failed write ends the writer: OnFail runs once and every
// later write fails at once with the same error.
func TestWriterFirstFailureEndsIt(t *testing.T) {
	rec := newRecorder()
	var fails atomic.Int32
	w := sse.NewWriter(rec, sse.WriterOptions{OnFail: func() { fails.Add(1) }})
	w.Start(nil)
	boom := errors.New("broken pipe")
	rec.setFail(boom)
	if err := w.Event(sse.Event{Data: []byte("x")}); !errors.Is(err, boom) {
		t.Fatalf("first write: %v", err)
	}
	rec.setFail(nil) // the connection cannot come back
	for _, err := range []error{w.Event(sse.Event{Data: []byte("y")}), w.Comment("c"), w.Retry(time.Second)} {
		if !errors.Is(err, boom) {
			t.Fatalf("later write: %v", err)
		}
	}
	w.Close()
	if fails.Load() != 1 || rec.String() != "" {
		t.Fatalf("OnFail ran %d times; written %q", fails.Load(), rec.String())
	}
}

// Close is idempotent, is not a failure, and lifts the write deadline
// each write set.
func TestWriterCloseAndWriteDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		w := sse.NewWriter(rec, sse.WriterOptions{WriteTimeout: 3 * time.Second, OnFail: func() { t.Error("Close is not a failure") }})
		w.Start(nil)
		time.Sleep(time.Second)
		_ = w.Comment("x")
		start := time.Now()
		w.Close()
		w.Close()
		if err := w.Comment("y"); !errors.Is(err, sse.ErrClosed) {
			t.Fatalf("write after Close: %v", err)
		}
		w.Start(nil)
		d := rec.deadlines
		if len(d) != 3 || !d[0].Equal(start.Add(2*time.Second)) || !d[1].Equal(start.Add(3*time.Second)) || !d[2].IsZero() {
			t.Fatalf("deadlines %v (now %v)", d, start)
		}
	})
}

// Keep-alives go out only when the stream was quiet for the interval,
// a failed one ends the writer, and none follow Close.
func TestWriterKeepAliveWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 10 * time.Second
		rec := newRecorder()
		var fails atomic.Int32
		w := sse.NewWriter(rec, sse.WriterOptions{KeepAlive: every, OnFail: func() { fails.Add(1) }})
		time.Sleep(3 * every)
		if rec.keepAlives() != 0 {
			t.Fatal("keep-alive before Start")
		}
		w.Start(nil)
		time.Sleep(every - time.Millisecond)
		synctest.Wait()
		if n := rec.keepAlives(); n != 0 {
			t.Fatalf("%d keep-alives before the interval", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := rec.keepAlives(); n != 1 {
			t.Fatalf("%d keep-alives after one quiet interval", n)
		}
		// A busy stream needs none.
		for range 10 {
			time.Sleep(every / 2)
			_ = w.Event(sse.Event{Data: []byte("x")})
		}
		synctest.Wait()
		if n := rec.keepAlives(); n != 1 {
			t.Fatalf("%d keep-alives on a busy stream", n)
		}
		time.Sleep(3*every + every/2)
		synctest.Wait()
		if n := rec.keepAlives(); n != 4 {
			t.Fatalf("%d keep-alives after three quiet intervals, want 4", n)
		}

		rec.setFail(errors.New("gone"))
		time.Sleep(every)
		synctest.Wait()
		if fails.Load() != 1 {
			t.Fatalf("a failed keep-alive ran OnFail %d times", fails.Load())
		}
		if err := w.Event(sse.Event{Data: []byte("x")}); err == nil {
			t.Fatal("the writer went on after a failed keep-alive")
		}
	})
}

func TestWriterNoKeepAliveAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		w := sse.NewWriter(rec, sse.WriterOptions{KeepAlive: time.Second})
		w.Start(nil)
		time.Sleep(1500 * time.Millisecond)
		w.Close()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := rec.keepAlives(); n != 1 {
			t.Fatalf("%d keep-alives, want the one before Close", n)
		}
	})
}

// Concurrent writes never interleave.
func TestWriterConcurrentWrites(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{KeepAlive: time.Microsecond})
	w.Start(nil)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				data := []byte(strings.Repeat(fmt.Sprintf("%d-%d\n", g, i), 20))
				if err := w.Event(sse.Event{ID: fmt.Sprintf("%d.%d", g, i), Data: data}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	w.Close()
	r := sse.NewReader(strings.NewReader(rec.String()), 1<<16)
	n := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var g, i int
		if _, err := fmt.Sscanf(ev.ID, "%d.%d", &g, &i); err != nil {
			t.Fatalf("event id %q", ev.ID)
		}
		if want := strings.Repeat(fmt.Sprintf("%d-%d\n", g, i), 20); string(ev.Data) != want {
			t.Fatalf("event %s has data %q", ev.ID, ev.Data)
		}
		n++
	}
	if n != writers*each {
		t.Fatalf("%d events, want %d", n, writers*each)
	}
}

// On a real connection whose client stopped reading, a write blocks for
// at most WriteTimeout, and that ends the writer.
func TestWriterWriteTimeoutOnStalledClient(t *testing.T) {
	failed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var fails atomic.Int32
		w := sse.NewWriter(rw, sse.WriterOptions{WriteTimeout: 100 * time.Millisecond, OnFail: func() { fails.Add(1) }})
		defer w.Close()
		w.Start(nil)
		big := sse.Event{Data: bytes.Repeat([]byte("x"), 64<<10)}
		for {
			if err := w.Event(big); err != nil {
				if fails.Load() != 1 {
					err = fmt.Errorf("OnFail ran %d times", fails.Load())
				}
				failed <- err
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("the stalled stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a stalled client was not bounded")
	}
}

// Replace moves the writer to another response between writes; a failed
// replacement keeps the old one, and an ended writer is not replaced.
func TestWriterReplace(t *testing.T) {
	old, next := newRecorder(), newRecorder()
	s := sse.NewWriter(old, sse.WriterOptions{WriteTimeout: time.Second})
	s.Start(nil)
	_ = s.Comment("before")
	boom := errors.New("boom")
	if err := s.Replace(func(http.ResponseWriter) (http.ResponseWriter, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed Replace: %v", err)
	}
	var given http.ResponseWriter
	if err := s.Replace(func(w http.ResponseWriter) (http.ResponseWriter, error) { given = w; return next, nil }); err != nil {
		t.Fatal(err)
	}
	if given != old {
		t.Fatal("Replace was not given the writer's response")
	}
	_ = s.Comment("after")
	if got := old.String(); !strings.Contains(got, ": before\n") || strings.Contains(got, "after") {
		t.Fatalf("old response got %q", got)
	}
	if got := next.String(); got != ": after\n\n" || next.flushes != 1 || len(next.deadlines) != 1 {
		t.Fatalf("new response got %q, %d flushes, deadlines %v", got, next.flushes, next.deadlines)
	}
	s.Close()
	called := false
	if err := s.Replace(func(http.ResponseWriter) (http.ResponseWriter, error) { called = true; return old, nil }); !errors.Is(err, sse.ErrClosed) || called {
		t.Fatalf("Replace after Close: %v, fn called %v", err, called)
	}
}

// Queued events go out with the next write, all in one Write and one
// flush, each write under its own deadline; Flush with nothing queued
// does nothing; a large queue is written before it grows past a bound.
func TestWriterQueueWritesABatchOnce(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{WriteTimeout: time.Minute})
	w.Start(nil)
	for i := range 3 {
		if err := w.Queue(sse.Event{ID: fmt.Sprint(i), Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if writes, flushes := rec.counts(); writes != 0 || flushes != 1 || rec.String() != "" {
		t.Fatalf("queueing wrote: %d writes, %d flushes, %q", writes, flushes, rec.String())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "id: 0\ndata: x\n\nid: 1\ndata: x\n\nid: 2\ndata: x\n\n"
	if writes, flushes := rec.counts(); writes != 1 || flushes != 2 || rec.String() != want {
		t.Fatalf("after Flush: %d writes, %d flushes, %q", writes, flushes, rec.String())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if writes, flushes := rec.counts(); writes != 1 || flushes != 2 {
		t.Fatalf("an empty Flush wrote: %d writes, %d flushes", writes, flushes)
	}
	// Another write sends the queued events first.
	_ = w.Queue(sse.Event{Data: []byte("y")})
	_ = w.Comment("c")
	if writes, flushes := rec.counts(); writes != 2 || flushes != 3 || !strings.HasSuffix(rec.String(), "data: y\n\n: c\n\n") {
		t.Fatalf("after a comment: %d writes, %d flushes, %q", writes, flushes, rec.String())
	}
	rec.mu.Lock()
	deadlines := len(rec.deadlines)
	rec.mu.Unlock()
	if deadlines != 3 {
		t.Fatalf("%d write deadlines set for 3 writes", deadlines)
	}
	// A queue past its bound is written by Queue.
	big := bytes.Repeat([]byte("z"), 1<<10)
	for range 100 {
		_ = w.Queue(sse.Event{Data: big})
	}
	if writes, _ := rec.counts(); writes < 3 || writes > 6 {
		t.Fatalf("100 KiB queued took %d writes in all", writes)
	}
	_ = w.Flush()
	if got := strings.Count(rec.String(), string(big)); got != 100 {
		t.Fatalf("%d of 100 large events written", got)
	}
	w.Close()
	if err := w.Queue(sse.Event{Data: []byte("late")}); !errors.Is(err, sse.ErrClosed) {
		t.Fatalf("Queue after Close: %v", err)
	}
}

// The last event is written without a flush of its own (the response's
// end sends it), the events queued before it with it; a writer whose
// response was replaced flushes it.
func TestWriterQueueLastLeavesTheFlushToTheEnd(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{})
	w.Start(nil)
	_ = w.Queue(sse.Event{Data: []byte("a")})
	if err := w.QueueLast(sse.Event{Data: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if writes, flushes := rec.counts(); writes != 1 || flushes != 1 || rec.String() != "data: a\n\ndata: b\n\n" {
		t.Fatalf("after the last event: %d writes, %d flushes (1 of Start), %q", writes, flushes, rec.String())
	}
	w.Close()

	old, next := newRecorder(), newRecorder()
	w = sse.NewWriter(old, sse.WriterOptions{})
	w.Start(nil)
	if err := w.Replace(func(http.ResponseWriter) (http.ResponseWriter, error) { return next, nil }); err != nil {
		t.Fatal(err)
	}
	_ = w.QueueLast(sse.Event{Data: []byte("b")})
	_ = w.Flush()
	if writes, flushes := next.counts(); writes != 1 || flushes != 1 {
		t.Fatalf("replaced response: %d writes, %d flushes, want 1 and 1", writes, flushes)
	}
	w.Close()
	if err := w.QueueLast(sse.Event{Data: []byte("late")}); !errors.Is(err, sse.ErrClosed) {
		t.Fatalf("QueueLast after Close: %v", err)
	}
}

// Closing a writer whose last event waits for the response's end keeps a
// write deadline for that end; any other close lifts it.
func TestWriterCloseBoundsTheResponseEnd(t *testing.T) {
	const timeout = time.Minute
	for _, last := range []bool{true, false} {
		rec := newRecorder()
		w := sse.NewWriter(rec, sse.WriterOptions{WriteTimeout: timeout})
		w.Start(nil)
		ev := sse.Event{Data: []byte("b")}
		if last {
			_ = w.QueueLast(ev)
		} else {
			_ = w.Queue(ev)
		}
		_ = w.Flush()
		before := time.Now()
		w.Close()
		rec.mu.Lock()
		final := rec.deadlines[len(rec.deadlines)-1]
		rec.mu.Unlock()
		switch {
		case last && final.Before(before.Add(timeout)):
			t.Errorf("last event queued: the deadline left for the response's end is %v, want at least %v", final, before.Add(timeout))
		case !last && !final.IsZero():
			t.Errorf("no last event queued: the deadline left is %v, want none", final)
		}
	}
}

// StartBuffered writes the stream's headers without a flush: the first
// write sends them with its event; a second start does nothing.
func TestWriterStartBufferedFlushesWithTheFirstWrite(t *testing.T) {
	rec := newRecorder()
	w := sse.NewWriter(rec, sse.WriterOptions{})
	starts := 0
	w.StartBuffered(func(h http.Header) { starts++ })
	w.Start(func(h http.Header) { starts++ })
	if writes, flushes := rec.counts(); rec.status != http.StatusOK || starts != 1 || writes != 0 || flushes != 0 ||
		rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("after StartBuffered: status %d, header callback ran %d times, %d writes, %d flushes, headers %v",
			rec.status, starts, writes, flushes, rec.Header())
	}
	if err := w.Event(sse.Event{Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if writes, flushes := rec.counts(); writes != 1 || flushes != 1 {
		t.Fatalf("after the first event: %d writes, %d flushes, want 1 and 1", writes, flushes)
	}
	w.Close()
	closed := newRecorder()
	w = sse.NewWriter(closed, sse.WriterOptions{})
	w.Close()
	w.StartBuffered(nil)
	if closed.status != 0 {
		t.Fatalf("StartBuffered after Close wrote status %d", closed.status)
	}
}
