package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Defaults of TailOptions.
const (
	DefaultTailPoll   = 10 * time.Second
	DefaultTailBuffer = 1024
)

// TailOptions tunes TailWith. The zero value means the defaults.
type TailOptions struct {
	// Poll is the safety net against lost notifications: when nothing
	// arrived for this long, Tail re-reads the stream, so a dropped bus
	// message or a stream that expired silently never stalls a follower
	// for longer than Poll. DefaultTailPoll when 0; negative disables it.
	Poll time.Duration
	// Buffer bounds the followed events held while fn runs
	// (DefaultTailBuffer when 0). Past it Tail drops them and re-reads.
	Buffer int
	// Head, when not nil, is what the caller's own Read of the stream
	// after `after` returned. TailWith delivers its events first, before
	// it follows the stream (a replay then waits for no subscription),
	// and reads once more after following, so an event appended in
	// between is not missed; a Head that reaches the final event ends
	// the call without following at all. TailMerged ignores it.
	Head *History
	// Flush, when not nil, is called after each round of deliveries
	// (the Head; the history read; the followed events of one wake-up),
	// before the tail waits for more or returns, so that fn may only
	// queue what it is given and write a round at once. Its error ends
	// the tail as fn's would.
	Flush func() error
}

// History is what one EventLog.Read returned.
type History struct {
	Events []Event
	Info   StreamInfo
}

// Tail is TailWith with the default options.
func Tail(ctx context.Context, log EventLog, session, stream string, after uint64, fn func(Event) error) (StreamInfo, error) {
	return TailWith(ctx, log, session, stream, after, TailOptions{}, fn)
}

// TailWith delivers to fn every event of stream with Seq > after, exactly
// once and in seq order, replaying history and then following live
// appends. It subscribes with Follow before the first Read, so nothing
// appended in between is missed, de-duplicates by seq, and re-reads the
// history whenever the followed events show a gap, the log hints at an
// out-of-band change (an Event with Seq 0), or Poll passes in silence.
//
// It returns:
//   - nil after delivering the Final event (at once when the final event
//     is at or before after);
//   - fn's error, unwrapped, when fn fails (the event is then not counted
//     as delivered);
//   - ctx.Err() when ctx ends;
//   - otherwise the failing Read's error wrapped: ErrNotFound when the
//     stream disappeared (expired, evicted, its session ended),
//     ErrEvicted when the history moved past the cursor, ErrForbidden,
//     ErrUnavailable.
//
// The StreamInfo is the stream's as last read, with Last and Done
// advanced by the events delivered since. fn runs on the caller's
// goroutine.
func TailWith(ctx context.Context, log EventLog, session, stream string, after uint64, opts TailOptions, fn func(Event) error) (StreamInfo, error) {
	t := &tail{session: session, stream: stream, cursor: after, fn: fn}
	err := tailAll(ctx, log, []*tail{t}, opts)
	return t.info, err
}

// TailSource is one stream of a TailMerged.
type TailSource struct {
	Session, Stream string
	After           uint64 // deliver the events after this seq
	// NoPoll leaves this stream out of the Poll re-reads: for a stream
	// followed by many tails at once, whose lost notifications the log
	// hints at anyway (an Event with Seq 0).
	NoPoll bool
}

// TailMerged is TailWith over several streams at once, on the caller's
// goroutine: fn gets the events of each source exactly once and in seq
// order, with the source's index, the sources interleaved as their
// events come. It ends as TailWith does, and after the Final event of
// any source.
func TailMerged(ctx context.Context, log EventLog, srcs []TailSource, opts TailOptions, fn func(i int, ev Event) error) error {
	return tailAll(ctx, log, mergedTails(srcs, fn), opts)
}

// mergedTails are the tails of TailMerged.
func mergedTails(srcs []TailSource, fn func(i int, ev Event) error) []*tail {
	tails := make([]*tail, len(srcs))
	for i, src := range srcs {
		tails[i] = &tail{session: src.Session, stream: src.Stream, cursor: src.After, noPoll: src.NoPoll,
			fn: func(ev Event) error { return fn(i, ev) }}
	}
	return tails
}

func tailAll(ctx context.Context, log EventLog, tails []*tail, opts TailOptions) error {
	a := newTailer(ctx, tails, opts)
	defer a.close()
	wake := make(chan struct{}, 1)
	if over, err := a.open(log, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}); over {
		return err
	}
	var poll <-chan time.Time
	var timer *time.Timer
	if a.opts.Poll > 0 {
		timer = time.NewTimer(a.opts.Poll)
		defer timer.Stop()
		poll = timer.C
	}
	for {
		polled := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-poll:
			polled = true
		}
		if over, err := a.step(polled); over {
			return err
		}
		if timer != nil {
			timer.Reset(a.opts.Poll)
		}
	}
}

// tailer is what tailAll and TailMergedFunc share: the tails, and the
// follows to stop at the end.
type tailer struct {
	ctx   context.Context
	tails []*tail
	opts  TailOptions
	stops []func()
}

func newTailer(ctx context.Context, tails []*tail, opts TailOptions) *tailer {
	if opts.Poll == 0 {
		opts.Poll = DefaultTailPoll
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultTailBuffer
	}
	return &tailer{ctx: ctx, tails: tails, opts: opts}
}

// open delivers the Head, follows the streams (wake is called when
// followed events are buffered) and delivers their history. It reports
// whether the tail is over, and then its error.
func (a *tailer) open(log EventLog, wake func()) (bool, error) {
	if h := a.opts.Head; h != nil && len(a.tails) == 1 {
		// The replay goes out before the follow's round trip.
		done, err := a.tails[0].take(h.Events, h.Info)
		if err = a.flush(err); done || err != nil {
			return true, err
		}
	}
	for _, t := range a.tails {
		t.log = log
		t.buf = tailBuffer{max: a.opts.Buffer, wake: wake}
		stop, err := log.Follow(a.ctx, t.session, t.stream, t.buf.push)
		if err != nil {
			return true, t.fail(a.ctx, fmt.Errorf("cluster: tail %q: follow: %w", t.stream, err))
		}
		a.stops = append(a.stops, stop)
	}
	for _, t := range a.tails {
		if done, err := t.read(a.ctx); done || err != nil {
			return true, a.flush(t.fail(a.ctx, err))
		}
	}
	return false, a.flush(nil)
}

// flush calls Flush after a round of deliveries that ended with err,
// and returns err, else Flush's error (the context's when it ended).
func (a *tailer) flush(err error) error {
	if a.opts.Flush == nil {
		return err
	}
	if ferr := a.opts.Flush(); err == nil && ferr != nil {
		if a.ctx.Err() != nil {
			return a.ctx.Err()
		}
		return ferr
	}
	return err
}

// step delivers the followed events buffered, re-reading the streams
// polled (when polled), and reports whether the tail is over.
func (a *tailer) step(polled bool) (bool, error) {
	for _, t := range a.tails {
		if done, err := t.catchUp(a.ctx, polled && !t.noPoll); done || err != nil {
			return true, a.flush(err)
		}
	}
	err := a.flush(nil)
	return err != nil, err
}

// close stops the follows, the last first.
func (a *tailer) close() {
	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
}

// catchUp delivers the followed events buffered, re-reading the history
// when reread, the buffer lost some, or they show a gap.
func (t *tail) catchUp(ctx context.Context, reread bool) (bool, error) {
	evs, lost := t.buf.take()
	reread = reread || lost
	for _, ev := range evs {
		if ev.Seq <= t.cursor {
			continue // already delivered (by a Read)
		}
		if ev.Seq != t.cursor+1 {
			reread = true // a gap: the history has the missing events
			break
		}
		if done, err := t.deliver(ev); done || err != nil {
			return done, err
		}
	}
	if reread {
		if done, err := t.read(ctx); done || err != nil {
			return done, t.fail(ctx, err)
		}
	}
	return false, nil
}

// tail is the state of one TailWith call.
type tail struct {
	log     EventLog
	session string
	stream  string
	cursor  uint64 // seq of the last event delivered
	noPoll  bool
	reads   int // Reads done
	info    StreamInfo
	fn      func(Event) error
	buf     tailBuffer
}

// read delivers the history after the cursor and reports whether the
// stream is complete.
func (t *tail) read(ctx context.Context) (bool, error) {
	evs, info, err := t.log.Read(ctx, t.session, t.stream, t.cursor)
	if err != nil {
		return false, fmt.Errorf("cluster: tail %q after %d: %w", t.stream, t.cursor, err)
	}
	return t.take(evs, info)
}

// take delivers the events of a Read after the cursor and reports
// whether the stream is complete.
func (t *tail) take(evs []Event, info StreamInfo) (bool, error) {
	if t.reads > 0 && info.Last < t.info.Last {
		// A stream's last seq never goes back: this one was lost (a
		// store restarted without its data) and opened again, and its
		// new events would hide behind the cursor.
		return false, fmt.Errorf("cluster: tail %q: the stream went back from %d to %d: %w", t.stream, t.info.Last, info.Last, ErrNotFound)
	}
	t.reads++
	t.info = info
	for _, ev := range evs {
		if ev.Seq <= t.cursor {
			continue
		}
		if ev.Seq != t.cursor+1 {
			return false, fmt.Errorf("cluster: tail %q: history jumps from %d to %d", t.stream, t.cursor, ev.Seq)
		}
		if done, err := t.deliver(ev); done || err != nil {
			return done, err
		}
	}
	return info.Done && t.cursor >= info.Last, nil
}

func (t *tail) deliver(ev Event) (bool, error) {
	if err := t.fn(ev); err != nil {
		return false, err
	}
	t.cursor = ev.Seq
	t.info.Last = max(t.info.Last, ev.Seq)
	if ev.Final {
		t.info.Done = true
		return true, nil
	}
	return false, nil
}

// fail prefers the context's error when the context ended, so callers can
// tell a cancellation from a failing log.
func (t *tail) fail(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// tailBuffer holds followed events between the Follow callback and the
// tailing goroutine. The callback never blocks: past max, or on a Seq 0
// hint, the buffer only notes that a re-read is needed.
type tailBuffer struct {
	max  int
	wake func() // must not block

	mu   sync.Mutex
	evs  []Event
	lost bool
}

func (b *tailBuffer) push(ev Event) {
	b.mu.Lock()
	if ev.Seq == 0 || len(b.evs) >= b.max {
		b.lost = true
	} else {
		b.evs = append(b.evs, ev)
	}
	b.mu.Unlock()
	b.wake()
}

func (b *tailBuffer) take() ([]Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	evs, lost := b.evs, b.lost
	b.evs, b.lost = nil, false
	return evs, lost
}
