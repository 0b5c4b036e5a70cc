package inproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// ErrCut is what a node cut off the bus, or killed, gets from the seams
// it cannot reach; it matches cluster.ErrUnavailable, as a lost Redis
// connection does.
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
//     operation fails with ErrCut, heartbeats included, so its membership
//     lease lapses after its TTL, as after kill -9.
type Faults struct {
	shared *cluster.Backend

	mu        sync.Mutex
	cut, dead bool
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

func newFaults(shared *cluster.Backend) *Faults {
	return &Faults{shared: shared, subs: map[*sub]struct{}{}}
}

// Backend returns the node's view of the shared backend. Closing it does
// not close the shared one.
func (f *Faults) Backend() *cluster.Backend {
	s := f.shared
	return &cluster.Backend{
		Sessions: sessions{s.Sessions, f},
		Events:   events{s.Events, f},
		Bus:      (*bus)(f),
		Members:  members{s.Members, f},
		Claims:   claims{s.Claims, f},
		Registry: registry{s.Registry, f},
		Limiter:  limiter{s.Limiter, f},
		Tasks:    tasks{s.Tasks, f},
		Close:    func() error { return nil },
		Ping:     func(context.Context) error { return f.down() },
		Ready:    f.Ready,
		Name:     s.Name,
	}
}

// Ready reports whether the node's bus is up.
func (f *Faults) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.cut && !f.dead
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
	if f.dead {
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
	f.Cut()
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
}

// down returns ErrCut once the node is killed.
func (f *Faults) down() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
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
	if f.dead {
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

// The store seams pass every operation through until the node is killed.

type sessions struct {
	cluster.SessionStore
	f *Faults
}

func (s sessions) Create(ctx context.Context, id string, fields map[string]string, ttl time.Duration, max int, opts cluster.CreateOptions) error {
	if err := s.f.down(); err != nil {
		return err
	}
	return s.SessionStore.Create(ctx, id, fields, ttl, max, opts)
}

func (s sessions) Load(ctx context.Context, id string, ttl time.Duration, holder string) (map[string]string, error) {
	if err := s.f.down(); err != nil {
		return nil, err
	}
	return s.SessionStore.Load(ctx, id, ttl, holder)
}

func (s sessions) Touch(ctx context.Context, id string, ttl time.Duration) error {
	if err := s.f.down(); err != nil {
		return err
	}
	return s.SessionStore.Touch(ctx, id, ttl)
}

func (s sessions) TouchMany(ctx context.Context, ids []string, ttl time.Duration) ([]bool, error) {
	if err := s.f.down(); err != nil {
		return nil, err
	}
	return s.SessionStore.TouchMany(ctx, ids, ttl)
}

func (s sessions) Set(ctx context.Context, id string, fields map[string]string) ([]cluster.Holder, error) {
	if err := s.f.down(); err != nil {
		return nil, err
	}
	return s.SessionStore.Set(ctx, id, fields)
}

func (s sessions) End(ctx context.Context, id string, opts cluster.EndOptions) (bool, error) {
	if err := s.f.down(); err != nil {
		return false, err
	}
	return s.SessionStore.End(ctx, id, opts)
}

func (s sessions) Subscribe(ctx context.Context, id, uri string) error {
	if err := s.f.down(); err != nil {
		return err
	}
	return s.SessionStore.Subscribe(ctx, id, uri)
}

func (s sessions) Unsubscribe(ctx context.Context, id, uri string) error {
	if err := s.f.down(); err != nil {
		return err
	}
	return s.SessionStore.Unsubscribe(ctx, id, uri)
}

func (s sessions) Subscribers(ctx context.Context, uri string) ([]string, error) {
	if err := s.f.down(); err != nil {
		return nil, err
	}
	return s.SessionStore.Subscribers(ctx, uri)
}

func (s sessions) Scan(ctx context.Context, cursor string, count int) ([]string, string, error) {
	if err := s.f.down(); err != nil {
		return nil, "", err
	}
	return s.SessionStore.Scan(ctx, cursor, count)
}

func (s sessions) Count(ctx context.Context) (int, error) {
	if err := s.f.down(); err != nil {
		return 0, err
	}
	return s.SessionStore.Count(ctx)
}

type events struct {
	cluster.EventLog
	f *Faults
}

func (e events) Open(ctx context.Context, stream string, meta cluster.StreamMeta, lim cluster.Limits) error {
	if err := e.f.down(); err != nil {
		return err
	}
	return e.EventLog.Open(ctx, stream, meta, lim)
}

func (e events) Append(ctx context.Context, session, stream string, data []byte, final bool, lim cluster.Limits) (uint64, error) {
	if err := e.f.down(); err != nil {
		return 0, err
	}
	return e.EventLog.Append(ctx, session, stream, data, final, lim)
}

func (e events) AppendBatch(ctx context.Context, session, stream string, data [][]byte, final bool, b cluster.Batch, lim cluster.Limits) (uint64, error) {
	if err := e.f.down(); err != nil {
		return 0, err
	}
	return e.EventLog.AppendBatch(ctx, session, stream, data, final, b, lim)
}

func (e events) Read(ctx context.Context, session, stream string, after uint64) ([]cluster.Event, cluster.StreamInfo, error) {
	if err := e.f.down(); err != nil {
		return nil, cluster.StreamInfo{}, err
	}
	return e.EventLog.Read(ctx, session, stream, after)
}

func (e events) SlideMany(ctx context.Context, streams []cluster.StreamRef, ttl time.Duration) error {
	if err := e.f.down(); err != nil {
		return err
	}
	return e.EventLog.SlideMany(ctx, streams, ttl)
}

func (e events) Follow(ctx context.Context, session, stream string, fn func(cluster.Event)) (func(), error) {
	if err := e.f.down(); err != nil {
		return nil, err
	}
	return e.EventLog.Follow(ctx, session, stream, fn)
}

type members struct {
	cluster.Membership
	f *Faults
}

func (m members) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	if err := m.f.down(); err != nil {
		return err
	}
	return m.Membership.Heartbeat(ctx, node, ttl)
}

func (m members) Alive(ctx context.Context, node string) (bool, error) {
	if err := m.f.down(); err != nil {
		return false, err
	}
	return m.Membership.Alive(ctx, node)
}

func (m members) Leave(ctx context.Context, node string) error {
	if err := m.f.down(); err != nil {
		return err
	}
	return m.Membership.Leave(ctx, node)
}

func (m members) Members(ctx context.Context) ([]string, error) {
	if err := m.f.down(); err != nil {
		return nil, err
	}
	return m.Membership.Members(ctx)
}

type claims struct {
	cluster.Claims
	f *Faults
}

func (c claims) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	if err := c.f.down(); err != nil {
		return "", err
	}
	return c.Claims.Claim(ctx, key, owner, ttl)
}

func (c claims) Renew(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := c.f.down(); err != nil {
		return false, err
	}
	return c.Claims.Renew(ctx, key, owner, ttl)
}

func (c claims) RenewMany(ctx context.Context, claims []cluster.Held, ttl time.Duration) ([]bool, error) {
	if err := c.f.down(); err != nil {
		return nil, err
	}
	return c.Claims.RenewMany(ctx, claims, ttl)
}

func (c claims) Release(ctx context.Context, key, owner string) error {
	if err := c.f.down(); err != nil {
		return err
	}
	return c.Claims.Release(ctx, key, owner)
}

func (c claims) Holder(ctx context.Context, key string) (string, error) {
	if err := c.f.down(); err != nil {
		return "", err
	}
	return c.Claims.Holder(ctx, key)
}

func (c claims) Once(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := c.f.down(); err != nil {
		return false, err
	}
	return c.Claims.Once(ctx, key, ttl)
}

type registry struct {
	cluster.Registry
	f *Faults
}

func (r registry) Swap(ctx context.Context, key string, on, unset bool) (bool, error) {
	if err := r.f.down(); err != nil {
		return false, err
	}
	return r.Registry.Swap(ctx, key, on, unset)
}

func (r registry) Toggle(ctx context.Context, key string, unset bool) (bool, error) {
	if err := r.f.down(); err != nil {
		return false, err
	}
	return r.Registry.Toggle(ctx, key, unset)
}

func (r registry) All(ctx context.Context) (map[string]bool, error) {
	if err := r.f.down(); err != nil {
		return nil, err
	}
	return r.Registry.All(ctx)
}

type limiter struct {
	cluster.Limiter
	f *Faults
}

func (l limiter) Take(ctx context.Context, debits []cluster.Debit) ([]cluster.Taken, error) {
	if err := l.f.down(); err != nil {
		return nil, err
	}
	return l.Limiter.Take(ctx, debits)
}

func (l limiter) Acquire(ctx context.Context, key, member string, ttl time.Duration, max int) (bool, time.Duration, error) {
	if err := l.f.down(); err != nil {
		return false, 0, err
	}
	return l.Limiter.Acquire(ctx, key, member, ttl, max)
}

func (l limiter) Renew(ctx context.Context, leases []cluster.Lease) error {
	if err := l.f.down(); err != nil {
		return err
	}
	return l.Limiter.Renew(ctx, leases)
}

func (l limiter) Release(ctx context.Context, key, member string) error {
	if err := l.f.down(); err != nil {
		return err
	}
	return l.Limiter.Release(ctx, key, member)
}

type tasks struct {
	cluster.TaskStore
	f *Faults
}

func (t tasks) Create(ctx context.Context, task cluster.Task, max int) error {
	if err := t.f.down(); err != nil {
		return err
	}
	return t.TaskStore.Create(ctx, task, max)
}

func (t tasks) Get(ctx context.Context, id string) (cluster.Task, error) {
	if err := t.f.down(); err != nil {
		return cluster.Task{}, err
	}
	return t.TaskStore.Get(ctx, id)
}

func (t tasks) Update(ctx context.Context, id string, u cluster.TaskUpdate) (cluster.Task, error) {
	if err := t.f.down(); err != nil {
		return cluster.Task{}, err
	}
	return t.TaskStore.Update(ctx, id, u)
}

func (t tasks) Delete(ctx context.Context, id string) error {
	if err := t.f.down(); err != nil {
		return err
	}
	return t.TaskStore.Delete(ctx, id)
}
