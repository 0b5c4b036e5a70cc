package inproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
)

// ErrCut is what a node cut off the bus, or killed, gets from the seams
// it cannot reach; it matches cluster.ErrUnavailable, as a lost Redis
// connection (or a closed one, what a killed node's own connection
// gets) does.
var ErrCut = fmt.Errorf("%w: cut off by the test", cluster.ErrUnavailable)

// Verdict is what a bus filter decides for one message on its way to a
// node: deliver it (the zero Verdict), drop it, or deliver it late.
type Verdict struct {
	Drop  bool
	Delay time.Duration
}

// Faults is one node's view of the shared backend, with the faults a
// test turns on and off while the node runs:
//
//   - Cut and Heal: the node's bus connection is down (both directions),
//     as when its connection to Redis drops. Publishing fails, its
//     subscriptions are gone (so a publisher elsewhere counts no receiver
//     on it), and Ready reports false. Heal subscribes again and then
//     runs the OnReconnect callbacks, as the Redis bus does after a
//     reconnection. The store (sessions, events, claims) stays reachable.
//   - Filter: every bus message on its way to this node passes through
//     it, to be dropped or delayed (the connection stays up).
//   - Kill: the node can no longer reach anything, for good: every
//     operation fails, heartbeats included, so its membership lease
//     lapses after its TTL, as after kill -9. On the in-memory backend
//     the node sees the tables through a view of its own (memory.View)
//     whose fault hook fails every operation with ErrCut, and every
//     delivery to it, once the node is killed: a table the backend adds
//     is cut off with the others, with no code here. On another backend
//     (the node's own connection, Options.Backend), Kill closes the
//     connection.
type Faults struct {
	shared *cluster.Backend // the node's connection: its bus, and its tables unless viewed
	tables *cluster.Backend // the node's view of the tables
	// closeOwn closes a connection of the node's own (nil on the shared
	// in-memory backend); Kill closes it unless the node has a view.
	closeOwn func() error

	dead atomic.Bool // read by the view's fault hook, which runs under the backend's locks

	mu        sync.Mutex
	cut       bool
	filter    func(topic string, msg []byte) Verdict
	subs      map[*sub]struct{}
	reconnect []func()
	late      sync.WaitGroup // delayed deliveries in flight
}

type sub struct {
	topic  string
	fn     func([]byte)
	cancel func() // of the subscription on the shared bus; nil while cut
}

// newFaults returns the faults of a node whose connection to the state
// is conn, own when it is the node's own (Options.Backend): the node sees
// the tables of an in-memory backend through a view of its own, those of
// any other through conn.
func newFaults(conn *cluster.Backend, own bool) *Faults {
	f := &Faults{shared: conn, tables: conn, subs: map[*sub]struct{}{}}
	if own {
		f.closeOwn = sync.OnceValue(conn.Close)
	}
	if v, ok := memory.View(conn, func(string) error { return f.down() }); ok {
		f.tables = v
	}
	return f
}

// Backend returns the node's view of the shared backend: its tables,
// with the bus, readiness and currency of the faults. Closing it does
// not close the shared one.
func (f *Faults) Backend() *cluster.Backend {
	b := *f.tables
	b.Bus = (*bus)(f)
	b.Ready = f.Ready
	if current := b.Current; current != nil {
		b.Current = func() bool { return f.Ready() && current() }
	}
	b.Close = func() error { return nil }
	return &b
}

// Ready reports whether the node's bus is up.
func (f *Faults) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.cut && !f.dead.Load()
}

// Cut takes the node's bus connection down.
func (f *Faults) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	for s := range f.subs {
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
	}
}

// Heal brings the node's bus connection back: its subscriptions are
// restored and its OnReconnect callbacks have run when Heal returns.
func (f *Faults) Heal() error {
	f.mu.Lock()
	if f.dead.Load() {
		f.mu.Unlock()
		return errors.New("inproc: a killed node cannot heal")
	}
	for s := range f.subs {
		if err := f.subscribeLocked(s); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	f.cut = false
	callbacks := append([]func(){}, f.reconnect...)
	f.mu.Unlock()
	for _, fn := range callbacks {
		fn()
	}
	return nil
}

// Filter sets the filter of the bus messages delivered to this node (nil
// delivers everything).
func (f *Faults) Filter(fn func(topic string, msg []byte) Verdict) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = fn
}

// kill makes every later operation of the node fail.
func (f *Faults) kill() {
	f.dead.Store(true)
	f.Cut()
	if f.tables == f.shared && f.closeOwn != nil {
		_ = f.closeOwn()
	}
}

// down returns ErrCut once the node is killed.
func (f *Faults) down() error {
	if f.dead.Load() {
		return ErrCut
	}
	return nil
}

// subscribeLocked subscribes s on the shared bus, through the filter.
func (f *Faults) subscribeLocked(s *sub) error {
	cancel, err := f.shared.Bus.Subscribe(context.Background(), s.topic, func(msg []byte) {
		f.mu.Lock()
		filter := f.filter
		f.mu.Unlock()
		var v Verdict
		if filter != nil {
			v = filter(s.topic, msg)
		}
		switch {
		case v.Drop:
		case v.Delay > 0:
			f.late.Add(1)
			time.AfterFunc(v.Delay, func() {
				defer f.late.Done()
				f.mu.Lock()
				_, live := f.subs[s]
				up := live && s.cancel != nil
				f.mu.Unlock()
				if up {
					s.fn(msg)
				}
			})
		default:
			s.fn(msg)
		}
	})
	if err != nil {
		return err
	}
	s.cancel = cancel
	return nil
}

// bus is the node's connection to the shared bus.
type bus Faults

var _ cluster.Bus = (*bus)(nil)

func (b *bus) Publish(ctx context.Context, topic string, msg []byte) (int, error) {
	f := (*Faults)(b)
	if !f.Ready() {
		return 0, ErrCut
	}
	return f.shared.Bus.Publish(ctx, topic, msg)
}

func (b *bus) Subscribe(_ context.Context, topic string, fn func([]byte)) (func(), error) {
	f := (*Faults)(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		return nil, ErrCut
	}
	s := &sub{topic: topic, fn: fn}
	if !f.cut {
		if err := f.subscribeLocked(s); err != nil {
			return nil, err
		}
	}
	f.subs[s] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, s)
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
	}, nil
}

func (b *bus) OnReconnect(fn func()) {
	f := (*Faults)(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconnect = append(f.reconnect, fn)
}
