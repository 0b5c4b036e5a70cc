package coordinator

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// Group commit of a stream with a single producer (a POST stream: only
// the node running its request appends to it, but for the error a
// follower appends once that node is lost). Events are appended in
// batches, one round trip each: the events added while a batch is in
// flight go together in the next one, and the stream's creation goes
// with the first. Each event is handed to its deliver function (which
// writes it to the client) only after the batch holding it was
// recorded, in order, so an event a client has seen is in the history
// by the time anyone can resume after it. Once a batch's events were
// handed over, a flush function runs, before any waiter of the batch is
// released: a writer that only queues the events it is handed writes
// the batch with one flush.

// MaxBatch bounds the events of one batch.
const MaxBatch = 256

// Producer records the events of one stream (see Produce).
type Producer struct {
	n                        *Node
	session, stream, request string
	flush                    func() // after each batch's deliveries; may be nil

	mu     sync.Mutex
	opened bool
	queue  []pending
	busy   bool          // a batch is in flight
	tail   chan struct{} // closed once the last added event is delivered
	last   uint64        // seq of the last recorded event
	queued int           // events added and not yet delivered
	failed error         // why an event was not recorded: the later ones fail with it
	hurry  chan struct{} // closed to end the in-flight batch's linger (cluster.Batch.Hurry)
}

type pending struct {
	data    []byte
	final   bool
	start   bool // the stream's start (seq 0): opens it, appends nothing
	notice  bool // a notification, which nothing waits on (see Notify)
	deliver func(seq uint64, err error)
	done    chan struct{}
}

// Produce returns the Producer of stream, a new response stream of
// request (its id key) of session pending by this process; the stream
// is opened with its first batch. flush, when not nil, runs on the
// producer's goroutine after the deliver functions of each batch, before
// the batch's done channels close (see Add).
func (n *Node) Produce(session, stream, request string, flush func()) *Producer {
	done := make(chan struct{})
	close(done)
	return &Producer{n: n, session: session, stream: stream, request: request, flush: flush, tail: done}
}

// Add queues an event (data nil for a priming event; final ends the
// stream) and returns a channel closed once deliver has run: with its
// seq once the event is recorded, or with a *RecordFailure, the store's error and what the client is told (the event
// is then not in the history). Once an event could not be recorded (the
// store stayed unavailable for the node's RecordRetry, or its history
// lost events this node recorded), every later one fails with the same
// error without being tried: a stream never skips an event. deliver
// runs on the producer's own goroutine, for one event at a time, in the
// order of Add; it must not wait for a later event. backlog is the number of events added and not
// yet delivered, this one included.
func (p *Producer) Add(data []byte, final bool, deliver func(seq uint64, err error)) (done <-chan struct{}, backlog int) {
	return p.add(pending{data: data, final: final, deliver: deliver})
}

// Notify is Add of a notification (not final), which nothing waits on:
// a batch of notifications only may be held by the store for up to its
// AppendLinger (cluster.Backend.AppendLinger) to share a round trip with
// other streams' writes. A server→client request, which its handler
// waits on, and the final message go through Add and are not held.
func (p *Producer) Notify(data []byte, deliver func(seq uint64, err error)) (done <-chan struct{}, backlog int) {
	return p.add(pending{data: data, notice: true, deliver: deliver})
}

func (p *Producer) add(ev pending) (<-chan struct{}, int) {
	ev.done = make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, ev)
	p.tail = ev.done
	if !ev.start {
		p.queued++
		if !ev.notice {
			p.hurryLocked()
		}
		p.kickLocked()
	}
	return ev.done, p.queued
}

// hurryLocked ends the linger of the batch in flight, if it lingers: an
// event that may not wait comes after it (p.mu is held).
func (p *Producer) hurryLocked() {
	if p.hurry != nil {
		close(p.hurry)
		p.hurry = nil
	}
}

// kickLocked starts appending the queue unless a batch is in flight (its
// goroutine takes what was queued meanwhile); p.mu is held.
func (p *Producer) kickLocked() {
	if !p.busy && len(p.queue) > 0 {
		p.busy = true
		go p.run()
	}
}

// Start queues the stream's start, sequence 0, which is no event of the
// history: deliver runs once the stream is open (with the batch that
// opens it), or with the store's error. It must come before any Add. The
// start waits for the first event added after it, so the two go in one
// round trip, or for Sync, which opens the stream alone.
func (p *Producer) Start(deliver func(err error)) <-chan struct{} {
	done, _ := p.add(pending{start: true, deliver: func(_ uint64, err error) { deliver(err) }})
	return done
}

// Sync returns a channel closed once every event added so far (and the
// start) is delivered.
func (p *Producer) Sync() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hurryLocked()
	p.kickLocked()
	return p.tail
}

// Next returns the seq the next event added will get (when this node
// remains the stream's only producer).
func (p *Producer) Next() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last + uint64(p.queued) + 1
}

// run appends batches until the queue is empty.
func (p *Producer) run() {
	for {
		p.mu.Lock()
		n := min(len(p.queue), MaxBatch)
		if n == 0 {
			p.busy = false
			p.mu.Unlock()
			return
		}
		for i, ev := range p.queue[:n] {
			if ev.final {
				n = i + 1
				break
			}
		}
		batch := p.queue[:n:n]
		p.queue = p.queue[n:]
		b := cluster.Batch{Next: p.last + 1}
		if l := p.n.be.AppendLinger; l > 0 && notices(batch) && notices(p.queue) {
			// Notifications only, and nothing that may not wait after
			// them: the store may hold them for company.
			p.hurry = make(chan struct{})
			b.LingerUntil, b.Hurry = time.Now().Add(l), p.hurry
		}
		if !p.opened {
			b.Open = &cluster.StreamMeta{Session: p.session, Owner: p.n.instance, Request: p.request}
		}
		err := p.failed
		p.mu.Unlock()

		data := make([][]byte, 0, len(batch))
		for _, ev := range batch {
			if !ev.start {
				data = append(data, ev.data)
			}
		}
		final := batch[len(batch)-1].final
		var first uint64
		if err == nil {
			first, err = p.record(data, final, b)
		}

		p.mu.Lock()
		p.hurry = nil
		switch {
		case err == nil:
			p.opened = true
			if final {
				p.n.producing.ended(p.stream)
			}
			if len(data) > 0 {
				p.last = first + uint64(len(data)) - 1
			}
		case p.failed == nil:
			// No later event may overtake one that is not recorded:
			// the stream ends here, every event after it fails alike.
			p.n.log.Warn().Err(err).Str("session", telemetry.SessionTag(p.session)).Str("stream", p.stream).
				Uint64("seq", p.last+1).Msg("stream event not recorded: the stream ends at it")
			p.failed = recordFailure(err)
			err = p.failed
		}
		p.queued -= len(data)
		p.mu.Unlock()
		seq := first
		for _, ev := range batch {
			switch {
			case err != nil:
				ev.deliver(0, err)
			case ev.start:
				ev.deliver(0, nil)
			default:
				ev.deliver(seq, nil)
				seq++
			}
		}
		if p.flush != nil {
			p.flush()
		}
		for _, ev := range batch {
			close(ev.done)
		}
	}
}

// record appends one batch (or opens the stream, for a start alone).
// While the store is unavailable it tries again under the batch's token
// for up to the node's RecordRetry after the first failure (a try itself
// may take the store client's own tries): a try whose reply was lost
// may have been recorded, and a retry then answers with its seq instead
// of appending twice; b.Next makes a history that lost recorded events
// (a failover) refuse the batch with ErrDiverged.
func (p *Producer) record(data [][]byte, final bool, b cluster.Batch) (uint64, error) {
	b.Token = p.n.batchToken()
	var deadline time.Time
	wait := 25 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(p.n.ctx, recordBound)
		var first uint64
		var err error
		if len(data) > 0 {
			first, err = p.n.be.Events.AppendBatch(ctx, p.session, p.stream, data, final, b, p.n.lim)
		} else {
			err = p.n.be.Events.Open(ctx, p.stream, *b.Open, p.n.lim)
		}
		cancel()
		if err == nil || !errors.Is(err, cluster.ErrUnavailable) {
			return first, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(p.n.recordRetry)
		}
		if !time.Now().Add(wait).Before(deadline) {
			return first, err
		}
		select {
		case <-p.n.ctx.Done():
			return 0, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// notices reports whether evs holds nothing but notifications (and the
// stream's start): nothing its producer's caller waits on.
func notices(evs []pending) bool {
	return !slices.ContainsFunc(evs, func(ev pending) bool { return !ev.notice && !ev.start })
}

// recordBound bounds one batch's append (the store's client gives up
// sooner on its own).
const recordBound = 30 * time.Second

// batchTokens numbers the batches of this process (see batchToken).
var batchTokens atomic.Uint64

// batchToken returns a token no other batch of the deployment has: the
// node's instance and a counter.
func (n *Node) batchToken() string {
	return n.instance + "#" + strconv.FormatUint(batchTokens.Add(1), 36)
}
