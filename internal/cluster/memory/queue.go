package memory

import "sync"

// queue is a bounded FIFO delivered to one consumer, so producers
// (Append, Publish) never block on, or run, a consumer's callback. A
// goroutine delivers while the queue has items, and exits once it is
// empty: an idle follower holds none. When the queue is full, new items
// are dropped and the consumer is told once the queue has drained
// (onLost), so it can recover what it missed.
type queue[T any] struct {
	max     int
	deliver func(T)
	onLost  func() // may be nil

	mu      sync.Mutex
	items   []T
	spare   []T
	lost    bool
	closed  bool
	running bool // a goroutine delivers; always true while items are queued
}

// newQueue returns a queue delivering its items, in order and one at a
// time, to deliver; onLost (may be nil) runs after the items queued
// before an overflow have been delivered.
func newQueue[T any](max int, deliver func(T), onLost func()) *queue[T] {
	return &queue[T]{max: max, deliver: deliver, onLost: onLost}
}

// push enqueues v without blocking; it reports false when v was dropped
// because the queue is full or closed.
func (q *queue[T]) push(v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if len(q.items) >= q.max {
		q.lost = true // a delivery runs: the queue has items
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
	return true
}

// close stops the queue; pending items are discarded and the delivery
// stops. It does not wait: a callback already under way may still
// finish.
func (q *queue[T]) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items = nil
}

// run delivers the queued items until the queue is empty or closed.
func (q *queue[T]) run() {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		batch := q.items
		lost := q.lost && len(batch) == 0
		if lost {
			q.lost = false
		}
		q.items, q.spare = q.spare[:0], nil
		if len(batch) == 0 && !lost {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if lost {
			if q.onLost != nil {
				q.onLost()
			}
			continue
		}
		for i, v := range batch {
			if q.isClosed() {
				return
			}
			q.deliver(v)
			var zero T
			batch[i] = zero
		}
		q.mu.Lock()
		if q.spare == nil {
			q.spare = batch[:0]
		}
		q.mu.Unlock()
	}
}

func (q *queue[T]) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
