package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

// stats are the figures of one scenario. Every call ends in exactly one
// of completed, an error (by its JSON-RPC code, or HTTP status when the
// body had none) or hung (no end within the call bound).
type stats struct {
	mu                sync.Mutex
	started           int
	completed         int
	errs              map[string]int
	hung              int
	lost, dup         int
	lostAnswered      int // of lost, those of calls that ended with an error
	unclear           int // errors in internal terms (see unclear)
	resumes, resumed  int // calls cut and resumed; of those, ended through the resume
	resumeGets        int // GET requests made to resume
	getStreams        int // legacy GET streams: reconnects
	getReconnects     int
	listenReopens     int
	listenUpdates     int
	repliesRetried    int
	probes, probeFail int
	probeFails        []time.Time
	notes             []string
	// The upgrade scenario's: exchanges across releases, and its tasks.
	cross                                crossStats
	tasksCreated, tasksDone, tasksFailed int
}

func newStats() *stats { return &stats{errs: map[string]int{}, cross: newCrossStats()} }

func (s *stats) add(f func(s *stats)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

// countLost counts the events lost and duplicated on one stream;
// answered says the client was told with an error that the stream or
// its call ended.
func (s *stats) countLost(lost, dup int, answered bool) {
	s.add(func(s *stats) {
		s.lost += lost
		s.dup += dup
		if answered {
			s.lostAnswered += lost
		}
	})
}

// lostCell is the row's count of lost events, with those of streams
// whose client was told with an error when there are any.
func (s *stats) lostCell() string {
	if s.lostAnswered > 0 {
		return fmt.Sprintf("%d (%d with an error to the client)", s.lost, s.lostAnswered)
	}
	return strconv.Itoa(s.lost)
}

// note keeps a bounded list of details about bad outcomes.
func (s *stats) note(format string, args ...any) {
	s.add(func(s *stats) {
		if len(s.notes) < 40 {
			s.notes = append(s.notes, fmt.Sprintf(format, args...))
		}
	})
}

// tracker checks one client's view of SSE streams: every message event
// of a stream (their sequence numbers in history start at 1 and have no
// gaps; priming events carry no message and are not counted) must arrive
// exactly once, and every progress value of a call once.
type tracker struct {
	seqs     map[string]map[uint64]int // message events received per stream
	primed   map[string]map[uint64]bool
	floor    map[string]uint64    // positions before the first one seen, not expected
	getAt    map[string][2]uint64 // a GET stream's last (broadcast, own) position
	progress map[float64]int
	last     string
	// The storm's (storm.go): when the call's stream was first cut and
	// first resumed, the retry hint last received, and a hook run after
	// each event with an id is recorded.
	cut, resumed time.Time
	retry        time.Duration
	onEvent      func()
}

func newTracker() *tracker {
	return &tracker{seqs: map[string]map[uint64]int{}, primed: map[string]map[uint64]bool{},
		floor: map[string]uint64{}, getAt: map[string][2]uint64{}, progress: map[float64]int{}}
}

// event records an event; a priming one (no data) only marks its
// position as accounted for.
func (t *tracker) event(id string, priming bool) {
	if id == "" {
		return
	}
	t.last = id
	eid, err := sse.ParseEventID(id)
	if err != nil {
		return
	}
	stream, seq := t.position(eid, priming)
	if t.onEvent != nil {
		defer t.onEvent()
	}
	if priming {
		if t.primed[stream] == nil {
			t.primed[stream] = map[uint64]bool{}
		}
		t.primed[stream][seq] = true
		return
	}
	m := t.seqs[stream]
	if m == nil {
		m = map[uint64]int{}
		t.seqs[stream] = m
	}
	m[seq]++
}

// position names the sequence an event belongs to. A GET stream's ids
// (<stream>-<broadcast>_<own>) carry two positions: its own events and
// the deployment's broadcast log, which a stream joins where it stands
// (its floor); an event moves one of them on.
func (t *tracker) position(eid sse.EventID, priming bool) (string, uint64) {
	base, bs, ok := strings.Cut(eid.Stream, "-")
	if !ok {
		return eid.Stream, eid.Seq
	}
	b, err := strconv.ParseUint(bs, 10, 64)
	if err != nil {
		return eid.Stream, eid.Seq
	}
	bkey := base + "/broadcast"
	prev, seen := t.getAt[base]
	t.getAt[base] = [2]uint64{b, eid.Seq}
	if !seen {
		// Without a priming event first, a message at own position 0
		// can only be a broadcast one (own events start at 1).
		t.floor[bkey] = b
		if !priming && eid.Seq == 0 {
			t.floor[bkey] = b - 1
			return bkey, b
		}
	}
	if seen && b != prev[0] && !priming {
		return bkey, b
	}
	return base, eid.Seq
}

// result counts duplicated events (an id twice, or a progress value
// twice), and lost events: positions 1 up to the highest one received
// that no event filled (recorded, never delivered), whatever ended the
// call; progress values missing below the highest one received (a gap,
// also one a terminal error follows); and, when complete is set (the
// call returned a result), progress values missing out of 1..steps, the
// number of notifications its handler sent.
func (t *tracker) result(steps int, complete bool) (lost, dup int) {
	for st, m := range t.seqs {
		var top uint64
		for seq, n := range m {
			dup += n - 1
			top = max(top, seq)
		}
		for seq := uint64(1); seq < top; seq++ {
			if m[seq] == 0 && !t.primed[st][seq] && seq > t.floor[st] {
				lost++
			}
		}
	}
	top := 0
	for v, n := range t.progress {
		dup += n - 1
		top = max(top, int(v))
	}
	if complete {
		top = max(top, steps)
	}
	for i := 1; i <= top; i++ {
		if t.progress[float64(i)] == 0 {
			lost++
		}
	}
	return lost, dup
}

func describeSeqs(t *tracker) string {
	var parts []string
	for st, m := range t.seqs {
		var seqs []int
		for q, n := range m {
			for range n {
				seqs = append(seqs, int(q))
			}
		}
		sort.Ints(seqs)
		parts = append(parts, fmt.Sprintf("%.6s:%v", st, seqs))
	}
	return strings.Join(parts, " ")
}

func describeProgress(t *tracker) string {
	var vs []float64
	for v, n := range t.progress {
		for range n {
			vs = append(vs, v)
		}
	}
	sort.Float64s(vs)
	return fmt.Sprint(vs)
}

// follow POSTs the request and reads its answer; when an SSE stream ends
