// Package backendtest is the contract suite of package cluster: one set of
// tests that every Backend implementation must pass. Implementations call
// Run from their own tests:
//
//	func TestContract(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) *cluster.Backend { ... })
//	}
//
// newBackend is called once per subtest and must return a fresh, empty
// backend (a new memory backend, or a Redis backend with a unique key
// prefix); it registers its own cleanup. Time-dependent rules are checked
// with short TTLs (tens to hundreds of milliseconds) and polling waits,
// so the suite runs against real time and a real Redis alike.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Run runs every contract test against backends made by newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) *cluster.Backend) {
	t.Helper()
	s := &suite{newBackend: newBackend}
	// Every subtest has a backend of its own, so they all run in parallel:
	// the time-dependent ones mostly wait.
	for _, group := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Backend", s.testBackend},
		{"Sessions", s.testSessions},
		{"Events", s.testEvents},
		{"Batch", s.testAppendBatch},
		{"BatchNextToken", s.testBatchNextToken},
		{"BatchLateCopies", s.testBatchLateCopies},
		{"Tail", s.testTail},
		{"Bus", s.testBus},
		{"Members", s.testMembers},
		{"Claims", s.testClaims},
		{"Registry", s.testRegistry},
		{"Limiter", s.testLimiter},
		{"SessionLeases", s.testSessionLeases},
		{"Tasks", s.testTasks},
		{"TaskTakeOver", s.testTaskTakeOver},
		{"TaskList", s.testTaskList},
	} {
		t.Run(group.name, func(t *testing.T) {
			t.Parallel()
			group.run(t)
		})
	}
}

type suite struct {
	newBackend func(t *testing.T) *cluster.Backend
}

// seq makes ids unique across subtests and runs, so backends that share a
// store (one Redis, many prefixes) never see each other's data even if a
// prefix were reused.
var seq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantErr fails unless errors.Is(err, want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// must fails on a non-nil error.
// announcements subscribes to a new topic of b; it returns the topic and
// the messages it receives.
func announcements(t *testing.T, b *cluster.Backend) (string, <-chan string) {
	t.Helper()
	topic := uniq("topic")
	got := make(chan string, 10)
	stop, err := b.Bus.Subscribe(t.Context(), topic, func(msg []byte) { got <- string(msg) })
	must(t, "Subscribe", err)
	t.Cleanup(stop)
	return topic, got
}

// wantAnnounced checks that got receives want, in order, and nothing
// more within 100ms.
func wantAnnounced(t *testing.T, got <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case m := <-got:
			if m != w {
				t.Fatalf("announced %q, want %q", m, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q not announced", w)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("announced %q more", m)
	case <-time.After(100 * time.Millisecond):
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (s *suite) testBackend(t *testing.T) {
	b := s.newBackend(t)
	if b.Name == "" {
		t.Errorf("Name is empty")
	}
	for name, seam := range map[string]any{
		"Sessions": b.Sessions, "Events": b.Events, "Bus": b.Bus,
		"Members": b.Members, "Claims": b.Claims, "Registry": b.Registry,
		"Limiter": b.Limiter,
		"Tasks":   b.Tasks,
	} {
		if seam == nil {
			t.Errorf("%s is nil", name)
		}
	}
	if b.Ping == nil || b.Close == nil {
		t.Fatalf("Ping or Close is nil")
	}
	must(t, "Ping", b.Ping(t.Context()))

	t.Run("CanceledContext", func(t *testing.T) {
		b := s.newBackend(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 0, cluster.CreateOptions{}); err == nil {
			t.Fatalf("Create with a canceled context: got nil error")
		}
	})
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
