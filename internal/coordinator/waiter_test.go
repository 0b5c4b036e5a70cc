package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster/memory"
	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// wait runs w.Wait with a bound, so a waiter that never wakes fails the
// test instead of hanging it.
func wait(t *testing.T, w *coordinator.Waiter) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := w.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("waiter %v did not wake", w.ID)
	}
	return string(res), err
}

func register(t *testing.T, c *coordinator.Coordinator, session, tag string) *coordinator.Waiter {
	t.Helper()
	w, err := c.Register(session, "", c.NewID(), tag)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A reply settles its waiter with its result or its error, whether it
// arrives before Wait is called or after; the waiter leaves the table.
func TestResolveSettlesTheWaiter(t *testing.T) {
	c := coordinator.New("n", "i", nil, 0)
	ctx := context.Background()

	early := register(t, c, "s", "")
	if ok, err := c.Resolve(ctx, "s", "", &jsonrpc.Message{ID: early.ID, Result: []byte(`"early"`)}); !ok || err != nil {
		t.Fatalf("Resolve: got %v, %v", ok, err)
	}
	if res, err := wait(t, early); res != `"early"` || err != nil {
		t.Fatalf("got %s, %v", res, err)
	}

	late := register(t, c, "s", "")
	go func() {
		_, _ = c.Resolve(ctx, "s", "", &jsonrpc.Message{ID: late.ID, Error: jsonrpc.NewError(-1, "declined", nil)})
	}()
	if _, err := wait(t, late); !errors.Is(err, jsonrpc.NewError(-1, "", nil)) {
		t.Fatalf("got %v, want the client's error -1", err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d waiters left, want 0", n)
	}
	// A second reply to a settled id finds nothing.
	if ok, _ := c.Resolve(ctx, "s", "", &jsonrpc.Message{ID: late.ID, Result: []byte(`1`)}); ok {
		t.Fatal("a second reply settled something")
	}
}

// A reply on another session never reaches the waiter, even with the
// right id; nor do replies to ids this cluster did not mint.
func TestForeignRepliesIgnored(t *testing.T) {
	c := coordinator.New("n", "i", nil, 0)
	ctx := context.Background()
	w := register(t, c, "mine", "")
	for _, tc := range []struct {
		name    string
		session string
		id      jsonrpc.ID
	}{
		{"other session, same id", "theirs", w.ID},
		{"integer id", "mine", jsonrpc.IntID(1)},
		{"id not minted here", "mine", jsonrpc.StringID("x.n.i.abc")},
		{"minted prefix without owner", "mine", jsonrpc.StringID("c.abc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := c.Resolve(ctx, tc.session, "", &jsonrpc.Message{ID: tc.id, Result: []byte(`"forged"`)})
			if ok || err != nil {
				t.Fatalf("Resolve: got %v, %v; want false, nil", ok, err)
			}
		})
	}
	if c.Pending() != 1 {
		t.Fatalf("the waiter left the table")
	}
	if _, err := c.Resolve(ctx, "mine", "", &jsonrpc.Message{ID: w.ID, Result: []byte(`"real"`)}); err != nil {
		t.Fatal(err)
	}
	if res, _ := wait(t, w); res != `"real"` {
		t.Fatalf("got %s, want the real reply", res)
	}
}

// Routed over the bus, a reply on another session does not settle the
// owner's waiter either: the owner checks the session the reply came on.
func TestRoutedForeignReplyIgnored(t *testing.T) {
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	owner := coordinator.New("owner", "i", be.Bus, 0)
	stop, err := owner.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	relay := coordinator.New("relay", "i", be.Bus, 0)
	w := register(t, owner, "mine", "")
	// The bus delivers to one subscriber in order: the forged reply is
	// handled before the real one.
	for _, r := range []struct{ session, result string }{{"theirs", `"forged"`}, {"mine", `"real"`}} {
		if ok, err := relay.Resolve(ctx, r.session, "", &jsonrpc.Message{ID: w.ID, Result: []byte(r.result)}); !ok || err != nil {
			t.Fatalf("forwarding the %s reply: got %v, %v", r.result, ok, err)
		}
	}
	if res, _ := wait(t, w); res != `"real"` {
		t.Fatalf("got %s, want the real reply", res)
	}
}

// A waiter takes a reply only from the principal its session is bound
// to, whether the reply lands on its node or is routed to it over the
// bus: a reply on the right session with the right id, posted by another
// caller (or by no caller for an authenticated session, and the
// reverse), is dropped and the waiter keeps waiting for the real one.
func TestRepliesFromAnotherPrincipalIgnored(t *testing.T) {
	be := memory.New(memory.Options{})
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	owner := coordinator.New("owner", "i", be.Bus, 0)
	stop, err := owner.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	relay := coordinator.New("relay", "i", be.Bus, 0)
	for _, mine := range []string{"iss#ada", ""} {
		for _, via := range []*coordinator.Coordinator{owner, relay} {
			w, err := owner.Register("s", mine, owner.NewID(), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, other := range []string{"iss#eve", "", "iss#ada ", "other#ada"} {
				if other == mine {
					continue
				}
				if _, err := via.Resolve(ctx, "s", other, &jsonrpc.Message{ID: w.ID, Result: []byte(`"forged"`)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := via.Resolve(ctx, "s", mine, &jsonrpc.Message{ID: w.ID, Result: []byte(`"real"`)}); err != nil {
				t.Fatal(err)
			}
			if res, _ := wait(t, w); res != `"real"` {
				t.Fatalf("owner %q: got %s, want the real reply", mine, res)
			}
		}
	}
}

// Wait ends with a timeout error when its context ends; the waiter is
// gone, and a late reply settles nothing.
func TestWaitTimeout(t *testing.T) {
	c := coordinator.New("n", "i", nil, 0)
	w := register(t, c, "s", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := w.Wait(ctx); !errors.Is(err, jsonrpc.ErrRequestTimeout) {
		t.Fatalf("got %v, want a request timeout", err)
	}
	if c.Pending() != 0 {
		t.Fatal("the timed-out waiter stayed in the table")
	}
	if ok, _ := c.Resolve(context.Background(), "s", "", &jsonrpc.Message{ID: w.ID, Result: []byte(`1`)}); ok {
		t.Fatal("a late reply settled a timed-out waiter")
	}
	w.Cancel() // idempotent
}

// Fail, FailTag, FailSession and FailAll release exactly the waiters they
// name, with the error given.
func TestFail(t *testing.T) {
	c := coordinator.New("n", "i", nil, 0)
	errA, errB, errC, errD := errors.New("a"), errors.New("b"), errors.New("c"), errors.New("d")
	one := register(t, c, "s1", "get")
	tagged := register(t, c, "s1", "get")
	untagged := register(t, c, "s1", "post")
	sameTagOtherSession := register(t, c, "s2", "get")
	s3 := register(t, c, "s3", "post")

	one.Fail(errA)
	if _, err := wait(t, one); err != errA {
		t.Fatalf("Fail: got %v", err)
	}
	c.FailTag("s1", "get", errB)
	if _, err := wait(t, tagged); err != errB {
		t.Fatalf("FailTag: got %v", err)
	}
	if c.Pending() != 3 {
		t.Fatalf("FailTag released %d waiters of other tags or sessions", 3-c.Pending())
	}
	c.FailSession("s1", errC)
	if _, err := wait(t, untagged); err != errC {
		t.Fatalf("FailSession: got %v", err)
	}
	if c.Pending() != 2 {
		t.Fatal("FailSession released another session's waiter")
	}
	c.FailAll(errD)
	for _, w := range []*coordinator.Waiter{sameTagOtherSession, s3} {
		if _, err := wait(t, w); err != errD {
			t.Fatalf("FailAll: got %v", err)
		}
	}
	// A failed waiter keeps its first outcome.
	one.Fail(errD)
	if _, err := wait(t, one); err != errA {
		t.Fatalf("after a second Fail: got %v, want the first error", err)
	}
}

// One id is pending once per session; the same id on another session is
// another waiter.
func TestRegisterDuplicate(t *testing.T) {
	c := coordinator.New("n", "i", nil, 0)
	id := c.NewID()
	if _, err := c.Register("s", "", id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register("s", "", id, ""); err == nil {
		t.Fatal("the same id registered twice on one session")
	}
	if _, err := c.Register("t", "", id, ""); err != nil {
		t.Fatalf("the same id on another session: %v", err)
	}
}

// Owner reads the process out of ids minted by NewID only.
func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		id    jsonrpc.ID
		owner string
		ok    bool
	}{
		{jsonrpc.StringID("c.node.inc.rand"), "node.inc", true},
		{jsonrpc.StringID("c.a.b.c.inc.rand"), "a.b.c.inc", true},
		{jsonrpc.StringID("c.rand"), "", false},
		{jsonrpc.StringID("c..rand"), "", false},
		{jsonrpc.StringID("x.node.inc.rand"), "", false},
		{jsonrpc.IntID(7), "", false},
	} {
		owner, ok := coordinator.Owner(tc.id)
		if owner != tc.owner || ok != tc.ok {
			t.Errorf("Owner(%v) = %q, %v; want %q, %v", tc.id, owner, ok, tc.owner, tc.ok)
		}
	}
}
