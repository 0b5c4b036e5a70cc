package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// bus implements cluster.Bus in process. Each subscription has its own
// bounded queue, delivered on a goroutine of its own while it has items,
// so a slow handler delays only itself;
// messages beyond the queue bound are dropped (delivery is at most once).
type bus struct {
	store *store // the view the bus belongs to
	subs  *subscriptions
}

// subscriptions are shared by every view of the bus.
type subscriptions struct {
	mu     sync.Mutex
	closed bool
	topics map[string]map[*queue[[]byte]]*store // topic → subscription → the view it was made through
}

var _ cluster.Bus = (*bus)(nil)

func (b *bus) Publish(ctx context.Context, topic string, msg []byte) (int, error) {
	if err := b.store.check(ctx, "Bus.Publish"); err != nil {
		return 0, err
	}
	msg = append(msg[:0:0], msg...) // shared read-only by every subscriber
	b.subs.mu.Lock()
	defer b.subs.mu.Unlock()
	n := 0
	for q, view := range b.subs.topics[topic] {
		if view.dropped("Bus.deliver") {
			continue
		}
		if !q.push(msg) {
			b.store.log.Debug().Str("topic", topic).Msg("bus subscriber queue full: message dropped")
			continue
		}
		n++
	}
	return n, nil
}

// Subscribe registers fn before returning, so a Publish that starts after
// it returns is delivered. ctx bounds only the call: the subscription
// lasts until cancel.
func (b *bus) Subscribe(ctx context.Context, topic string, fn func([]byte)) (func(), error) {
	s := b.store
	if err := s.check(ctx, "Bus.Subscribe"); err != nil {
		return nil, err
	}
	s.fmu.Lock()
	if s.listeners >= s.opts.MaxListeners {
		s.fmu.Unlock()
		return nil, fmt.Errorf("%d listeners: %w", s.opts.MaxListeners, cluster.ErrLimit)
	}
	s.listeners++
	s.fmu.Unlock()

	q := newQueue(s.opts.QueueLen, fn, nil)
	subs := b.subs
	subs.mu.Lock()
	if subs.closed {
		subs.mu.Unlock()
		s.fmu.Lock()
		s.listeners--
		s.fmu.Unlock()
		return nil, errClosed
	}
	set := subs.topics[topic]
	if set == nil {
		set = make(map[*queue[[]byte]]*store)
		subs.topics[topic] = set
	}
	set[q] = s
	subs.mu.Unlock()

	var once sync.Once
	cancel := func() {
		once.Do(func() {
			subs.mu.Lock()
			if set := subs.topics[topic]; set != nil {
				delete(set, q)
				if len(set) == 0 {
					delete(subs.topics, topic)
				}
			}
			subs.mu.Unlock()
			s.fmu.Lock()
			s.listeners--
			s.fmu.Unlock()
			q.close()
		})
	}
	return cancel, nil
}

// OnReconnect never fires: the memory bus cannot lose its connection.
func (b *bus) OnReconnect(func()) {}

func (b *bus) close() {
	subs := b.subs
	subs.mu.Lock()
	defer subs.mu.Unlock()
	subs.closed = true
	for topic, set := range subs.topics {
		for q := range set {
			q.close()
		}
		delete(subs.topics, topic)
	}
}
