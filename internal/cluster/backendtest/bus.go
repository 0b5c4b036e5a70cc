package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// publish publishes and returns the receiver count.
func publish(t *testing.T, b *cluster.Backend, ctx context.Context, topic string, msg []byte) int {
	t.Helper()
	n, err := b.Bus.Publish(ctx, topic, msg)
	must(t, "Publish", err)
	return n
}

func (s *suite) testBus(t *testing.T) {
	t.Run("Delivery", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic, other := uniq("topic"), uniq("topic")
		a, c := make(chan string, 100), make(chan string, 100)
		stopA, err := b.Bus.Subscribe(ctx, topic, func(m []byte) { a <- string(m) })
		must(t, "Subscribe", err)
		stopC, err := b.Bus.Subscribe(ctx, topic, func(m []byte) { c <- string(m) })
		must(t, "Subscribe", err)
		defer stopC()
		o := make(chan string, 100)
		stopO, err := b.Bus.Subscribe(ctx, other, func(m []byte) { o <- string(m) })
		must(t, "Subscribe", err)
		defer stopO()

		for i := range 20 {
			publish(t, b, ctx, topic, fmt.Appendf(nil, "m%d", i))
		}
		publish(t, b, ctx, topic, []byte{}) // empty payload
		for _, ch := range []chan string{a, c} {
			for i := range 21 {
				want := fmt.Sprintf("m%d", i)
				if i == 20 {
					want = ""
				}
				select {
				case got := <-ch:
					if got != want {
						t.Fatalf("message %d: got %q, want %q (order per topic)", i, got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("timed out waiting for message %d", i)
				}
			}
		}
		if len(o) != 0 {
			t.Fatalf("a message crossed topics: %q", <-o)
		}

		stopA()
		stopA() // idempotent
		publish(t, b, ctx, topic, []byte("after"))
		select {
		case got := <-c:
			if got != "after" {
				t.Fatalf("got %q, want after", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("remaining subscriber missed a message")
		}
		time.Sleep(50 * time.Millisecond)
		if len(a) != 0 {
			t.Fatalf("canceled subscriber got %q", <-a)
		}
		publish(t, b, ctx, uniq("nobody"), []byte("x"))
	})

	// Publish counts the subscribers that received a message, so a
	// message nobody got is never taken for delivered.
	t.Run("Receivers", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic := uniq("topic")
		n := publish(t, b, ctx, topic, []byte("nobody"))
		if n == cluster.ReceiversUnknown {
			// A backend that cannot count says so every time.
			stop, err := b.Bus.Subscribe(ctx, topic, func([]byte) {})
			must(t, "Subscribe", err)
			defer stop()
			if n := publish(t, b, ctx, topic, []byte("x")); n != cluster.ReceiversUnknown {
				t.Fatalf("Publish: got %d receivers from a backend that could not count before", n)
			}
			return
		}
		if n != 0 {
			t.Fatalf("Publish without subscribers: got %d receivers, want 0", n)
		}
		got := make(chan []byte, 10)
		stop1, err := b.Bus.Subscribe(ctx, topic, func(m []byte) { got <- m })
		must(t, "Subscribe", err)
		if n := publish(t, b, ctx, topic, []byte("one")); n != 1 {
			t.Fatalf("Publish to one subscriber: got %d receivers, want 1", n)
		}
		select {
		case m := <-got:
			if string(m) != "one" {
				t.Fatalf("first message: got %q, want one", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a counted message was not delivered")
		}
		stop2, err := b.Bus.Subscribe(ctx, topic, func([]byte) {})
		must(t, "Subscribe", err)
		if n := publish(t, b, ctx, topic, []byte("two")); n < 1 || n > 2 {
			t.Fatalf("Publish to two subscriptions of one process: got %d receivers, want 1 or 2", n)
		}
		if n := publish(t, b, ctx, uniq("other"), []byte("x")); n != 0 {
			t.Fatalf("Publish to another topic: got %d receivers, want 0", n)
		}
		stop1()
		stop2()
		waitFor(t, 5*time.Second, "a canceled subscription to stop counting", func() bool {
			return publish(t, b, ctx, topic, []byte("gone")) == 0
		})
	})

	t.Run("SubscribeReturnsWhenActive", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		for i := range 20 {
			topic := uniq("topic")
			got := make(chan []byte, 1)
			stop, err := b.Bus.Subscribe(ctx, topic, func(m []byte) { got <- m })
			must(t, "Subscribe", err)
			publish(t, b, ctx, topic, []byte("hello"))
			select {
			case m := <-got:
				if string(m) != "hello" {
					t.Fatalf("got %q", m)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: a Publish right after Subscribe returned was lost", i)
			}
			stop()
		}
	})

	t.Run("ResubscribeSameTopic", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic := uniq("topic")
		for i := range 10 {
			got := make(chan []byte, 1)
			stop, err := b.Bus.Subscribe(ctx, topic, func(m []byte) { got <- m })
			must(t, "Subscribe", err)
			publish(t, b, ctx, topic, []byte("x"))
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: lost a message after re-subscribing", i)
			}
			stop()
		}
	})

	t.Run("HandlerMaySubscribe", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic, inner := uniq("topic"), uniq("inner")
		done := make(chan struct{})
		stop, err := b.Bus.Subscribe(ctx, topic, func([]byte) {
			// Subscribing and canceling from a handler must not deadlock.
			go func() {
				s, err := b.Bus.Subscribe(ctx, inner, func([]byte) {})
				if err == nil {
					s()
				}
				close(done)
			}()
		})
		must(t, "Subscribe", err)
		defer stop()
		publish(t, b, ctx, topic, []byte("go"))
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("subscribe from a handler's goroutine did not complete")
		}
		b.Bus.OnReconnect(func() {}) // registering never fails
	})
}
