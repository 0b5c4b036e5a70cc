package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// openStream is one long-lived stream: a legacy session's GET stream or
// a 2026-07-28 subscriptions/listen stream.
type openStream struct {
	i      int
	sess   *session
	body   io.ReadCloser
	rd     *sse.Reader
	cancel context.CancelFunc
	closed atomic.Bool
	// lastRound is the fan-out round of the last list_changed received.
	lastRound atomic.Int64
}

// openStreams opens n streams with bounded parallelism: on handshake
// revisions a session (initialize) and its GET stream per stream, on
// 2026-07-28 a subscriptions/listen stream. Sessions are all opened
// before the first stream, with a "sessions-ready" phase in between so
// that a watcher can tell the memory of sessions from that of streams.
// Streams that fail to open are counted as setup errors.
func openStreams(ctx context.Context, r *runner, n int) []*openStream {
	cl := r.cl
	all := make([]*openStream, n)
	parallel := func(f func(i int) error) {
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := f(i); err != nil {
					r.setupErrs.Add(err)
				}
			}()
		}
		wg.Wait()
	}
	sessions := make([]*session, n)
	if !cl.modern {
		parallel(func(i int) error {
			t := time.Now()
			ctx := withSource(ctx, i)
			s, err := cl.openSession(ctx, cl.urls[cl.pick()])
			if err != nil {
				return err
			}
			r.record("initialize", time.Since(t))
			sessions[i] = s
			return nil
		})
	}
	r.phase(ctx, "sessions-ready", n)
	parallel(func(i int) error {
		if !cl.modern && sessions[i] == nil {
			return nil // its initialize failed and was counted
		}
		sctx, cancel := context.WithCancel(withSource(context.Background(), i))
		st := &openStream{i: i, sess: sessions[i], cancel: cancel}
		t := time.Now()
		if cl.modern {
			resp, rd, err := cl.openListen(sctx, cl.urls[cl.pick()], int64(1000000+i))
			if err != nil {
				cancel()
				return err
			}
			st.body, st.rd = resp.Body, rd
		} else {
			resp, err := cl.openGet(sctx, cl.urls[cl.pick()], st.sess, "")
			if err != nil {
				cancel()
				return err
			}
			st.body, st.rd = resp.Body, sse.NewReader(resp.Body, 1<<20)
		}
		r.record("stream_open", time.Since(t))
		all[i] = st
		return nil
	})
	var out []*openStream
	for _, st := range all {
		if st != nil {
			out = append(out, st)
		}
	}
	r.count("streams_opened", int64(len(out)), true)
	if len(out) < n {
		r.note("only %d of %d streams opened", len(out), n)
	}
	return out
}

// closeStreams cuts every stream and ends the sessions.
func closeStreams(r *runner, streams []*openStream) {
	closedEarly := 0
	for _, st := range streams {
		if st.closed.Load() {
			closedEarly++
		}
		st.cancel()
		st.body.Close()
	}
	r.count("streams_closed_by_server", int64(closedEarly), true)
	if r.cl.modern {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.timeout)
	defer cancel()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = r.cl.deleteSession(withSource(ctx, st.i), r.cl.urls[r.cl.pick()], st.sess)
		}()
	}
	wg.Wait()
}

// idleScenario opens cfg.streams idle streams and holds them for the
// duration: the run that measures what an open stream costs a server
// (memory, goroutines, Redis connections). Ops count nothing; the
// report's extras hold the open latencies.
type idleScenario struct {
	noHooks
	streams []*openStream
}

func (s *idleScenario) prepare(ctx context.Context, r *runner) error {
	s.streams = openStreams(ctx, r, r.cfg.streams)
	for _, st := range s.streams {
		go func() {
			for {
				if _, err := st.rd.Next(); err != nil {
					st.closed.Store(true)
					return
				}
			}
		}()
	}
	r.phase(ctx, "streams-open", len(s.streams))
	if len(s.streams) == 0 {
		return errors.New("no stream could be opened")
	}
	return nil
}

func (s *idleScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	select {
	case <-ctx.Done():
	case <-w.r.stopping:
	}
	return 0, errHold
}

func (s *idleScenario) finish(r *runner) { closeStreams(r, s.streams) }

// fanoutScenario holds cfg.streams streams open and, per operation,
// calls toggle_extra_tool once; the operation's latency is the time
// until every stream has received the resulting
// notifications/tools/list_changed.
type fanoutScenario struct {
	noHooks
	r       *runner
	streams []*openStream
	control *session

	round   atomic.Int64
	started atomic.Int64 // unix ns of the round's start
	last    atomic.Int64 // unix ns of the round's latest arrival

	// The round's progress: a stream the server closes before its
	// notification arrived is lost to the round, which then ends with
	// an error instead of waiting for it until the timeout.
	mu       sync.Mutex
	arrived  int64
	lost     int64
	expected int64
	done     chan struct{} // closed when every stream arrived or was lost
}

func (s *fanoutScenario) prepare(ctx context.Context, r *runner) error {
	s.r = r
	cl := r.cl
	if !cl.modern {
		var err error
		if s.control, err = cl.initialize(ctx, cl.urls[0]); err != nil {
			return fmt.Errorf("control session: %w", err)
		}
	} else {
		s.control = &session{}
	}
	s.streams = openStreams(ctx, r, r.cfg.streams)
	if len(s.streams) == 0 {
		return errors.New("no stream could be opened")
	}
	for _, st := range s.streams {
		go s.follow(st)
	}
	r.phase(ctx, "streams-open", len(s.streams))
	return nil
}

// follow reads one stream and counts its list_changed notifications.
func (s *fanoutScenario) follow(st *openStream) {
	for {
		ev, err := st.rd.Next()
		if err != nil {
			s.mu.Lock()
			st.closed.Store(true)
			if st.lastRound.Load() != s.round.Load() {
				s.lost++
				s.settleLocked()
			}
			s.mu.Unlock()
			return
		}
		if len(ev.Data) == 0 {
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil || msg.Method != "notifications/tools/list_changed" {
			continue
		}
		now := time.Now()
		s.mu.Lock()
		round := s.round.Load()
		if st.lastRound.Swap(round) == round {
			s.mu.Unlock()
			s.r.count("duplicate_notifications", 1, true)
			continue
		}
		s.arrived++
		s.settleLocked()
		s.mu.Unlock()
		s.r.extra("per_stream", now.Sub(time.Unix(0, s.started.Load())))
		storeMax(&s.last, now.UnixNano())
	}
}

// settleLocked ends the round once every stream arrived or was lost.
func (s *fanoutScenario) settleLocked() {
	if s.done != nil && s.arrived+s.lost == s.expected {
		close(s.done)
		s.done = nil
	}
}

func (s *fanoutScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl := w.r.cl
	done := make(chan struct{})
	s.mu.Lock()
	open := int64(0)
	for _, st := range s.streams {
		if !st.closed.Load() {
			open++
		}
	}
	if open == 0 {
		s.mu.Unlock()
		return 0, bench.Errorf("streams_closed", "every stream was closed by the server")
	}
	s.done, s.arrived, s.lost, s.expected = done, 0, 0, open
	start := time.Now()
	s.started.Store(start.UnixNano())
	s.round.Add(1)
	s.mu.Unlock()

	// Every toggle goes to the first endpoint. The tool flips what its
	// node last saw of the cluster's state, which a node learns from a
	// bus message after the change: on another node, a toggle right
	// after a round could find the state already set, change nothing
	// and notify no stream (the round then waited until the timeout).
	// The node that made every change always sees the latest.
	id := s.control.newID()
	body := cl.requestBody(id, "tools/call", map[string]any{"name": "toggle_extra_tool", "arguments": map[string]any{}}, nil)
	if _, err := cl.call(ctx, cl.urls[0], s.control, id, body, "tools/call", "toggle_extra_tool", nil); err != nil {
		return time.Since(start), fmt.Errorf("toggle_extra_tool: %w", err)
	}
	w.r.extra("toggle_call", time.Since(start))
	select {
	case <-done:
		s.mu.Lock()
		lost := s.lost
		s.mu.Unlock()
		if lost > 0 {
			return time.Since(start), bench.Errorf("stream_closed", "%d of %d streams were closed by the server before tools/list_changed arrived", lost, open)
		}
		return time.Unix(0, s.last.Load()).Sub(start), nil
	case <-ctx.Done():
		s.mu.Lock()
		got := s.arrived
		s.mu.Unlock()
		return time.Since(start), bench.Errorf("fanout_incomplete", "%d of %d streams got tools/list_changed within %s", got, open, w.r.cfg.timeout)
	}
}

func (s *fanoutScenario) finish(r *runner) {
	closeStreams(r, s.streams)
	if s.control != nil && s.control.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.timeout)
		defer cancel()
		_ = r.cl.deleteSession(ctx, r.cl.urls[0], s.control)
	}
}

// resumeScenario starts a progress call, cuts its SSE stream after
// cfg.cutAfter progress notifications, waits cfg.gap while the handler
// goes on, and resumes with GET + Last-Event-ID (on the same endpoint or
// the next, --reply-to). The operation's latency is the time from the
// resuming GET to the first replayed event; the whole call must deliver
// every progress step exactly once.
type resumeScenario struct {
	sessionHooks
}

func (resumeScenario) setup(ctx context.Context, w *worker) error {
	if w.r.cl.modern {
		return fmt.Errorf("resume needs resumable streams: use a handshake revision (%s, %s or %s)", rev20250326, rev20250618, rev20251125)
	}
	return sessionHooks{}.setup(ctx, w)
}

func progressValue(msg *jsonrpc.Message, token string) (int, bool) {
	if msg.Method != "notifications/progress" {
		return 0, false
	}
	var p struct {
		Token    json.RawMessage `json:"progressToken"`
		Progress float64         `json:"progress"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || string(p.Token) != strconv.Quote(token) {
		return 0, false
	}
	return int(math.Round(p.Progress)), true
}

func (resumeScenario) op(ctx context.Context, w *worker) (time.Duration, error) {
	cl, cfg := w.r.cl, w.r.cfg
	id := w.sess.newID()
	token := "r" + strconv.Itoa(w.n) + "-" + strconv.FormatInt(id, 10)
	body := cl.requestBody(id, "tools/call", map[string]any{
		"name": "progress", "arguments": map[string]any{"steps": cfg.steps, "delayMs": cfg.delayMs},
	}, map[string]any{"progressToken": token})
	seen := map[int]int{}
	lastID := ""
	before := 0
	at := cl.pick()
	opStart := time.Now()
	_, err := cl.call(ctx, cl.urls[at], w.sess, id, body, "tools/call", "progress", func(in incoming) error {
		if in.eventID != "" {
			lastID = in.eventID
		}
		if v, ok := progressValue(in.msg, token); ok {
			seen[v]++
			before++
			if before >= cfg.cutAfter {
				return errCut
			}
		}
		return nil
	})
	if err == nil {
		return 0, bench.Errorf("config", "the call finished before %d progress notifications: raise --steps", cfg.cutAfter)
	}
	if !errors.Is(err, errCut) {
		return 0, err
	}
	if lastID == "" {
		return 0, bench.Errorf("no_event_id", "the stream's events carry no id: it cannot be resumed")
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(cfg.gap):
	}
	start := time.Now()
	resp, err := cl.openGet(ctx, replyURL(cl, cfg, at), w.sess, lastID)
	if err != nil {
		return time.Since(start), fmt.Errorf("resuming GET: %w", err)
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 16<<20)
	var first time.Duration
	for {
		ev, err := rd.Next()
		if err != nil {
			return time.Since(start), bench.Errorf("resume_eof", "the resumed stream ended before the response: %v", err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			return first, bench.Errorf("protocol", "undecodable SSE event: %.200s", ev.Data)
		}
		if v, ok := progressValue(msg, token); ok {
			seen[v]++
			continue
		}
		if msg.Kind() == jsonrpc.KindResponse && !msg.ID.IsString() && msg.ID.Int() == id {
			if err := rpcErr(msg); err != nil {
				return first, err
			}
			break
		}
	}
	w.r.extra("op_total", time.Since(opStart))
	for v := 1; v <= cfg.steps; v++ {
		switch n := seen[v]; {
		case n == 0:
			return first, bench.Errorf("resume_lost", "progress step %d never arrived", v)
		case n > 1:
			return first, bench.Errorf("resume_dup", "progress step %d arrived %d times", v, n)
		}
	}
	return first, nil
}

// storeMax raises a to v unless it holds more already: the readers of
// streams store their arrival times in any order, and the round lasts
// until the latest of them.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}
