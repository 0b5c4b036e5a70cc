package backendtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func (s *suite) testMembers(t *testing.T) {
	b := s.newBackend(t)
	ctx := t.Context()
	n1, n2, n3 := uniq("node-a"), uniq("node-b"), uniq("node-c")
	must(t, "Heartbeat", b.Members.Heartbeat(ctx, n1, time.Minute))
	must(t, "Heartbeat", b.Members.Heartbeat(ctx, n2, time.Minute))
	must(t, "Heartbeat", b.Members.Heartbeat(ctx, n3, time.Second))
	got, err := b.Members.Members(ctx)
	must(t, "Members", err)
	if want := sorted([]string{n1, n2, n3}); !slices.Equal(sorted(got), want) {
		t.Fatalf("Members: got %v, want %v", got, want)
	}
	for node, want := range map[string]bool{n1: true, n3: true, uniq("ghost"): false} {
		alive, err := b.Members.Alive(ctx, node)
		if err != nil || alive != want {
			t.Fatalf("Alive(%s): got %v, %v, want %v", node, alive, err, want)
		}
	}
	must(t, "Leave", b.Members.Leave(ctx, n2))
	must(t, "Leave unknown", b.Members.Leave(ctx, uniq("ghost")))
	if alive, _ := b.Members.Alive(ctx, n2); alive {
		t.Fatalf("Alive after Leave: got true")
	}
	waitFor(t, 10*time.Second, "a lapsed lease to drop the node", func() bool {
		alive, err := b.Members.Alive(ctx, n3)
		return err == nil && !alive
	})
	got, err = b.Members.Members(ctx)
	if err != nil || !slices.Equal(got, []string{n1}) {
		t.Fatalf("Members after Leave and expiry: got %v, %v, want [%s]", got, err, n1)
	}
	// A heartbeat renews, and brings a lapsed node back.
	must(t, "Heartbeat", b.Members.Heartbeat(ctx, n3, time.Minute))
	if alive, _ := b.Members.Alive(ctx, n3); !alive {
		t.Fatalf("Alive after a new heartbeat: got false")
	}
}

func (s *suite) testClaims(t *testing.T) {
	t.Run("TakeOver", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		key := uniq("session:s1:get")
		check := func(want string) {
			t.Helper()
			got, err := b.Claims.Holder(ctx, key)
			if err != nil || got != want {
				t.Fatalf("Holder: got %q, %v, want %q", got, err, want)
			}
		}
		check("")
		prev, err := b.Claims.Claim(ctx, key, "conn-1", time.Minute)
		if err != nil || prev != "" {
			t.Fatalf("first Claim: got %q, %v, want empty", prev, err)
		}
		check("conn-1")
		prev, err = b.Claims.Claim(ctx, key, "conn-2", time.Minute)
		if err != nil || prev != "conn-1" {
			t.Fatalf("take-over: got %q, %v, want conn-1", prev, err)
		}
		check("conn-2")
		if ok, err := b.Claims.Renew(ctx, key, "conn-1", time.Minute); err != nil || ok {
			t.Fatalf("Renew by the old holder: got %v, %v, want false", ok, err)
		}
		if ok, err := b.Claims.Renew(ctx, key, "conn-2", time.Minute); err != nil || !ok {
			t.Fatalf("Renew by the holder: got %v, %v, want true", ok, err)
		}
		must(t, "Release by a non-holder", b.Claims.Release(ctx, key, "conn-1"))
		check("conn-2")
		must(t, "Release", b.Claims.Release(ctx, key, "conn-2"))
		check("")
		if ok, err := b.Claims.Renew(ctx, key, "conn-2", time.Minute); err != nil || ok {
			t.Fatalf("Renew after Release: got %v, %v, want false", ok, err)
		}
		must(t, "Release of a free key", b.Claims.Release(ctx, key, "conn-2"))
	})

	t.Run("RenewMany", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		const short = 3 * time.Second // room for a loaded machine to set up
		// More claims than one batch of a backend that batches, of two
		// kinds (a session's and a free-standing one), held, taken over
		// and unknown.
		var claims []cluster.Held
		var want []bool
		for i := range 300 {
			key := uniq(fmt.Sprintf("session:s%d:get", i))
			if i%2 == 1 {
				key = uniq("follow:x")
			}
			c := cluster.Held{Key: key, Owner: "conn-1"}
			switch i % 5 {
			case 3: // taken over
				if _, err := b.Claims.Claim(ctx, key, "conn-1", short); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Claims.Claim(ctx, key, "conn-2", time.Minute); err != nil {
					t.Fatal(err)
				}
			case 4: // never claimed
			default:
				if _, err := b.Claims.Claim(ctx, key, "conn-1", short); err != nil {
					t.Fatal(err)
				}
			}
			claims = append(claims, c)
			want = append(want, i%5 < 3)
		}
		held, err := b.Claims.RenewMany(ctx, claims, time.Minute)
		if err != nil || !slices.Equal(held, want) {
			t.Fatalf("RenewMany: got %v, %v, want %v", held, err, want)
		}
		// The renewed claims outlive their first TTL; the others are
		// untouched.
		time.Sleep(short + short/2)
		for i, c := range claims {
			h, err := b.Claims.Holder(ctx, c.Key)
			wantHolder := map[int]string{3: "conn-2", 4: ""}[i%5]
			if i%5 < 3 {
				wantHolder = "conn-1"
			}
			if err != nil || h != wantHolder {
				t.Fatalf("Holder of claim %d after RenewMany: got %q, %v, want %q", i, h, err, wantHolder)
			}
		}
		if held, err := b.Claims.RenewMany(ctx, nil, time.Minute); err != nil || len(held) != 0 {
			t.Fatalf("RenewMany of nothing: got %v, %v", held, err)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		key := uniq("follow:x")
		const ttl = time.Second
		if _, err := b.Claims.Claim(ctx, key, "node-a", ttl); err != nil {
			t.Fatal(err)
		}
		// Renewing keeps it past its first TTL.
		for range 6 {
			time.Sleep(ttl / 5)
			if ok, err := b.Claims.Renew(ctx, key, "node-a", ttl); err != nil || !ok {
				t.Fatalf("Renew: got %v, %v", ok, err)
			}
		}
		waitFor(t, 10*time.Second, "the claim to lapse", func() bool {
			h, err := b.Claims.Holder(ctx, key)
			return err == nil && h == ""
		})
		if ok, _ := b.Claims.Renew(ctx, key, "node-a", time.Minute); ok {
			t.Fatalf("Renew of a lapsed claim: got true")
		}
		prev, err := b.Claims.Claim(ctx, key, "node-b", time.Minute)
		if err != nil || prev != "" {
			t.Fatalf("Claim after lapse: got %q, %v, want empty previous holder", prev, err)
		}
	})

	t.Run("Once", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		key, other := uniq("token"), uniq("token")
		if ok, err := b.Claims.Once(ctx, key, time.Second); err != nil || !ok {
			t.Fatalf("first Once: got %v, %v, want true", ok, err)
		}
		for range 3 {
			if ok, err := b.Claims.Once(ctx, key, time.Second); err != nil || ok {
				t.Fatalf("repeated Once: got %v, %v, want false", ok, err)
			}
		}
		if ok, err := b.Claims.Once(ctx, other, time.Minute); err != nil || !ok {
			t.Fatalf("Once of another key: got %v, %v, want true", ok, err)
		}
		// Once and Claim do not share keys.
		if h, _ := b.Claims.Holder(ctx, key); h != "" {
			t.Fatalf("Once created a claim held by %q", h)
		}
		waitFor(t, 10*time.Second, "the token to expire", func() bool {
			ok, err := b.Claims.Once(ctx, key, time.Minute)
			return err == nil && ok
		})
	})
}
