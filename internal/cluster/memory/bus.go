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
	store *store

	mu     sync.Mutex
	closed bool
	topics map[string]map[*queue[[]byte]]struct{}
}

var _ cluster.Bus = (*bus)(nil)

func (b *bus) Publish(ctx context.Context, topic string, msg []byte) (int, error) {
	if err := b.store.check(ctx, "Bus.Publish"); err != nil {
		return 0, err
	}
	msg = append(msg[:0:0], msg...) // shared read-only by every subscriber
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for q := range b.topics[topic] {
		if b.store.dropped("Bus.deliver") {
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
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.fmu.Lock()
		s.listeners--
		s.fmu.Unlock()
		return nil, errClosed
	}
	set := b.topics[topic]
	if set == nil {
		set = make(map[*queue[[]byte]]struct{})
		b.topics[topic] = set
	}
	set[q] = struct{}{}
	b.mu.Unlock()

	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			if set := b.topics[topic]; set != nil {
				delete(set, q)
				if len(set) == 0 {
					delete(b.topics, topic)
				}
			}
			b.mu.Unlock()
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
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for topic, set := range b.topics {
		for q := range set {
			q.close()
		}
		delete(b.topics, topic)
	}
}
