package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
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
}

type pending struct {
	data    []byte
	final   bool
	start   bool // the stream's start (seq 0): opens it, appends nothing
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
// seq once the event is recorded, or with the store's error (the event
// is then not in the history). deliver runs on the producer's own
// goroutine, for one event at a time, in the order of Add; it must not
// wait for a later event. backlog is the number of events added and not
// yet delivered, this one included.
func (p *Producer) Add(data []byte, final bool, deliver func(seq uint64, err error)) (done <-chan struct{}, backlog int) {
	return p.add(pending{data: data, final: final, deliver: deliver})
}

func (p *Producer) add(ev pending) (<-chan struct{}, int) {
	ev.done = make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, ev)
	p.tail = ev.done
	if !ev.start {
		p.queued++
	}
	if !p.busy {
		p.busy = true
		go p.run()
	}
	return ev.done, p.queued
}

// Start queues the stream's start, sequence 0, which is no event of the
// history: deliver runs once the stream is open (with the batch that
// opens it), or with the store's error. It must come before any Add.
func (p *Producer) Start(deliver func(err error)) <-chan struct{} {
	done, _ := p.add(pending{start: true, deliver: func(_ uint64, err error) { deliver(err) }})
	return done
}

// Sync returns a channel closed once every event added so far is
// delivered.
func (p *Producer) Sync() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
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
		var open *cluster.StreamMeta
		if !p.opened {
			open = &cluster.StreamMeta{Session: p.session, Owner: p.n.instance, Request: p.request}
		}
		p.mu.Unlock()

		data := make([][]byte, 0, len(batch))
		for _, ev := range batch {
			if !ev.start {
				data = append(data, ev.data)
			}
		}
		final := batch[len(batch)-1].final
		ctx, cancel := context.WithTimeout(p.n.ctx, recordBound)
		var first uint64
		var err error
		switch {
		case len(data) > 0:
			first, err = p.n.be.Events.AppendBatch(ctx, p.session, p.stream, data, final, open, p.n.lim)
		case open != nil:
			err = p.n.be.Events.Open(ctx, p.stream, *open, p.n.lim)
		}
		cancel()

		p.mu.Lock()
		if err == nil {
			p.opened = true
			if final {
				p.n.producing.ended(p.stream)
			}
			if len(data) > 0 {
				p.last = first + uint64(len(data)) - 1
			}
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

// recordBound bounds one batch's append (the store's client gives up
// sooner on its own).
const recordBound = 30 * time.Second
