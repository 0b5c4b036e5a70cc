package memory

import "sync"

// queue is a bounded FIFO drained by one goroutine, so producers (Append,
// Publish) never block on, or run, a consumer's callback. When the queue
// is full, new items are dropped and the consumer is told once the queue
// has drained (onLost), so it can recover what it missed.
type queue[T any] struct {
	max int

	mu     sync.Mutex
	items  []T
	spare  []T
	lost   bool
	closed bool
	wake   chan struct{}
}

func newQueue[T any](max int) *queue[T] {
	return &queue[T]{max: max, wake: make(chan struct{}, 1)}
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
		q.lost = true
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.signalLocked()
	q.mu.Unlock()
	return true
}

// signalLocked wakes the consumer; wake is closed only under mu.
func (q *queue[T]) signalLocked() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops the queue; pending items are discarded and run returns.
// It does not wait: a callback already under way may still finish.
func (q *queue[T]) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.items = nil
	close(q.wake)
	q.mu.Unlock()
}

// run delivers items in order to deliver until close. onLost (may be nil)
// runs after the items queued before an overflow have been delivered.
func (q *queue[T]) run(deliver func(T), onLost func()) {
	for range q.wake {
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
			q.mu.Unlock()
			if len(batch) == 0 {
				if lost && onLost != nil {
					onLost()
				}
				break
			}
			for i, v := range batch {
				if q.isClosed() {
					return
				}
				deliver(v)
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
}

func (q *queue[T]) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
