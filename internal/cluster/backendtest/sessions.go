package backendtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

func (s *suite) testSessions(t *testing.T) {
	t.Run("HoldersForgottenAfterTheTTL", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, id, nil, time.Minute, 0, cluster.CreateOptions{}))
		_, err := b.Sessions.Load(ctx, id, time.Minute, "gone.x")
		must(t, "Load", err)
		time.Sleep(time.Second)
		// A holder recorded under a ttl of 400ms forgets "gone.x" (1s old).
		_, err = b.Sessions.Load(ctx, id, 400*time.Millisecond, "here.y")
		must(t, "Load", err)
		must(t, "Touch", b.Sessions.Touch(ctx, id, time.Minute))
		h, err := b.Sessions.Set(ctx, id, map[string]string{"a": "1"})
		must(t, "Set", err)
		if len(h) != 1 || h[0].Name != "here.y" {
			t.Fatalf("Set returned holders %v, want only here.y (gone.x was recorded more than a ttl ago)", h)
		}
	})
	t.Run("Holders", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("s")
		names := func(hs []cluster.Holder) []string {
			if hs == nil {
				return nil
			}
			out := make([]string, 0, len(hs))
			for _, h := range hs {
				if h.Age < 0 || h.Age > time.Minute {
					t.Fatalf("holder %q recorded %v ago", h.Name, h.Age)
				}
				out = append(out, h.Name)
			}
			slices.Sort(out)
			return out
		}
		must(t, "Create", b.Sessions.Create(ctx, id, map[string]string{"a": "1"}, time.Minute, 0, cluster.CreateOptions{Holder: "n1.x"}))
		f, err := b.Sessions.Load(ctx, id, time.Minute, "n2.y")
		must(t, "Load", err)
		if !maps.Equal(f, map[string]string{"a": "1"}) {
			t.Fatalf("Load returned %v, want the fields only (holders are not fields)", f)
		}
		_, err = b.Sessions.Load(ctx, id, time.Minute, "n2.y") // once per holder
		must(t, "Load", err)
		_, err = b.Sessions.Load(ctx, id, time.Minute, "")
		must(t, "Load", err)
		h, err := b.Sessions.Set(ctx, id, map[string]string{"a": "2"})
		must(t, "Set", err)
		if got := names(h); !slices.Equal(got, []string{"n1.x", "n2.y"}) {
			t.Fatalf("Set returned holders %q, want [n1.x n2.y]", got)
		}
		h, err = b.Sessions.Set(ctx, id, map[string]string{"a": "3"})
		must(t, "Set", err)
		if h == nil || len(h) != 0 {
			t.Fatalf("a second Set returned holders %v, want none (the first cleared them)", h)
		}
		must(t, "Touch", b.Sessions.Touch(ctx, id, time.Minute)) // records no holder
		_, err = b.Sessions.Load(ctx, id, time.Minute, "n3.z")
		must(t, "Load", err)
		time.Sleep(30 * time.Millisecond)
		var ended []cluster.Holder
		live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Holders: &ended})
		must(t, "End", err)
		if got := names(ended); !live || !slices.Equal(got, []string{"n3.z"}) {
			t.Fatalf("End: live %v, holders %q; want true, [n3.z]", live, got)
		}
		if age := ended[0].Age; age < 20*time.Millisecond {
			t.Fatalf("End: holder recorded %v ago, want at least the 30ms slept", age)
		}
		ended = []cluster.Holder{{Name: "stale"}}
		live, err = b.Sessions.End(ctx, id, cluster.EndOptions{Holders: &ended})
		must(t, "End", err)
		if live || ended != nil {
			t.Fatalf("End of an ended session: live %v, holders %v; want false, nil", live, ended)
		}
		if _, err := b.Sessions.Set(ctx, id, map[string]string{"a": "4"}); !errors.Is(err, cluster.ErrNotFound) {
			t.Fatalf("Set after End: %v, want ErrNotFound", err)
		}
	})
	t.Run("CreateLoad", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("s")
		fields := map[string]string{"version": "2025-06-18", "empty": "", "uni": "ünï"}
		must(t, "Create", b.Sessions.Create(ctx, id, fields, time.Minute, 0, cluster.CreateOptions{}))
		got, err := b.Sessions.Load(ctx, id, time.Minute, "")
		must(t, "Load", err)
		if !maps.Equal(got, fields) {
			t.Fatalf("Load: got %v, want %v", got, fields)
		}
		got["version"] = "changed"
		again, err := b.Sessions.Load(ctx, id, time.Minute, "")
		must(t, "Load", err)
		if again["version"] != "2025-06-18" {
			t.Fatalf("Load returned shared map: a caller's change leaked into the store")
		}
		if err := b.Sessions.Create(ctx, id, nil, time.Minute, 0, cluster.CreateOptions{}); err == nil {
			t.Fatalf("Create of an existing id: got nil error")
		}
	})

	t.Run("NoFields", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, id, nil, time.Minute, 0, cluster.CreateOptions{}))
		got, err := b.Sessions.Load(ctx, id, time.Minute, "")
		must(t, "Load", err)
		if len(got) != 0 {
			t.Fatalf("Load: got %v, want no fields", got)
		}
		must(t, "Touch", b.Sessions.Touch(ctx, id, time.Minute))
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("nope")
		_, err := b.Sessions.Load(ctx, id, time.Minute, "")
		wantErr(t, "Load", err, cluster.ErrNotFound)
		wantErr(t, "Touch", b.Sessions.Touch(ctx, id, time.Minute), cluster.ErrNotFound)
		wantErr(t, "Set", setFields(ctx, b, id, map[string]string{"a": "b"}), cluster.ErrNotFound)
		wantErr(t, "Subscribe", b.Sessions.Subscribe(ctx, id, "file:///a"), cluster.ErrNotFound)
		wantErr(t, "Unsubscribe", b.Sessions.Unsubscribe(ctx, id, "file:///a"), cluster.ErrNotFound)
		live, err := b.Sessions.End(ctx, id, cluster.EndOptions{})
		if err != nil || live {
			t.Fatalf("End of unknown: got %v, %v, want false, nil", live, err)
		}
		_, err = b.Sessions.Load(ctx, id, time.Minute, "")
		wantErr(t, "Load after Set on unknown", err, cluster.ErrNotFound)
	})

	t.Run("SetMerges", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id := uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, id, map[string]string{"a": "1", "b": "2"}, time.Minute, 0, cluster.CreateOptions{}))
		must(t, "Set", setFields(ctx, b, id, map[string]string{"b": "3", "c": "4"}))
		got, err := b.Sessions.Load(ctx, id, time.Minute, "")
		must(t, "Load", err)
		if want := map[string]string{"a": "1", "b": "3", "c": "4"}; !maps.Equal(got, want) {
			t.Fatalf("after Set: got %v, want %v", got, want)
		}
	})

	t.Run("SlidingTTL", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		// The TTL leaves room for scheduling stalls on a loaded machine.
		const ttl = 1500 * time.Millisecond
		load, touch := uniq("load"), uniq("touch")
		must(t, "Create", b.Sessions.Create(ctx, load, nil, ttl, 0, cluster.CreateOptions{}))
		must(t, "Create", b.Sessions.Create(ctx, touch, nil, ttl, 0, cluster.CreateOptions{}))
		// Keep both alive past one TTL by sliding every ttl/6.
		for range 8 {
			time.Sleep(ttl / 6)
			if _, err := b.Sessions.Load(ctx, load, ttl, ""); err != nil {
				t.Fatalf("Load while sliding: %v", err)
			}
			if err := b.Sessions.Touch(ctx, touch, ttl); err != nil {
				t.Fatalf("Touch while sliding: %v", err)
			}
		}
		// Set does not slide: left alone, both expire.
		must(t, "Set", setFields(ctx, b, load, map[string]string{"x": "y"}))
		waitFor(t, 10*time.Second, "sessions to expire", func() bool {
			n, err := b.Sessions.Count(ctx)
			return err == nil && n == 0
		})
		_, err := b.Sessions.Load(ctx, load, ttl, "")
		wantErr(t, "Load after expiry", err, cluster.ErrNotFound)
		wantErr(t, "Touch after expiry", b.Sessions.Touch(ctx, touch, ttl), cluster.ErrNotFound)
		wantErr(t, "Set after expiry", setFields(ctx, b, load, map[string]string{"x": "z"}), cluster.ErrNotFound)
		_, err = b.Sessions.Load(ctx, load, ttl, "")
		wantErr(t, "Load after Set on expired", err, cluster.ErrNotFound)
		live, err := b.Sessions.End(ctx, load, cluster.EndOptions{})
		if err != nil || live {
			t.Fatalf("End of expired: got %v, %v, want false, nil", live, err)
		}
	})

	t.Run("TouchMany", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		const short = 3 * time.Second // room for a loaded machine to set up
		uri := uniq("file:///touched")
		var ids []string
		var want []bool
		for i := range 300 {
			id := uniq("tm")
			ids = append(ids, id)
			want = append(want, i%3 != 2)
			switch i % 3 {
			case 0:
				must(t, "Create", b.Sessions.Create(ctx, id, nil, short, 0, cluster.CreateOptions{}))
			case 1:
				must(t, "Create", b.Sessions.Create(ctx, id, nil, short, 0, cluster.CreateOptions{}))
				must(t, "Subscribe", b.Sessions.Subscribe(ctx, id, uri))
			case 2:
				if i%2 == 0 {
					must(t, "Create", b.Sessions.Create(ctx, id, nil, short, 0, cluster.CreateOptions{}))
					if _, err := b.Sessions.End(ctx, id, cluster.EndOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		live, err := b.Sessions.TouchMany(ctx, ids, time.Minute)
		if err != nil || !slices.Equal(live, want) {
			t.Fatalf("TouchMany: got %v, %v, want %v", live, err, want)
		}
		// The touched sessions and their subscriptions outlive their first
		// TTL.
		time.Sleep(short + short/2)
		n, err := b.Sessions.Count(ctx)
		if err != nil || n != 200 {
			t.Fatalf("Count after TouchMany: got %d, %v, want 200", n, err)
		}
		subs, err := b.Sessions.Subscribers(ctx, uri)
		if err != nil || len(subs) != 100 {
			t.Fatalf("Subscribers after TouchMany: got %d, %v, want 100", len(subs), err)
		}
		for i, id := range ids {
			err := b.Sessions.Touch(ctx, id, time.Minute)
			if want[i] != (err == nil) {
				t.Fatalf("Touch of session %d after TouchMany: %v", i, err)
			}
		}
		if live, err := b.Sessions.TouchMany(ctx, nil, time.Minute); err != nil || len(live) != 0 {
			t.Fatalf("TouchMany of nothing: got %v, %v", live, err)
		}
	})

	t.Run("Cap", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		var ids []string
		for range 3 {
			id := uniq("s")
			ids = append(ids, id)
			must(t, "Create under cap", b.Sessions.Create(ctx, id, nil, time.Minute, 3, cluster.CreateOptions{}))
		}
		wantErr(t, "Create past cap", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 3, cluster.CreateOptions{}), cluster.ErrLimit)
		must(t, "Create without cap", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 0, cluster.CreateOptions{}))
		wantErr(t, "Create past cap", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 4, cluster.CreateOptions{}), cluster.ErrLimit)
		if _, err := b.Sessions.End(ctx, ids[0], cluster.EndOptions{}); err != nil {
			t.Fatal(err)
		}
		must(t, "Create after End", b.Sessions.Create(ctx, uniq("s"), nil, time.Second, 4, cluster.CreateOptions{}))
		wantErr(t, "Create past cap", b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 4, cluster.CreateOptions{}), cluster.ErrLimit)
		// An expired session frees its place.
		waitFor(t, 10*time.Second, "an expired session to free the cap", func() bool {
			return b.Sessions.Create(ctx, uniq("s"), nil, time.Minute, 4, cluster.CreateOptions{}) == nil
		})
		n, err := b.Sessions.Count(ctx)
		if err != nil || n != 4 {
			t.Fatalf("Count: got %d, %v, want 4", n, err)
		}
	})

	t.Run("EndAnnounces", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		topic, got := announcements(t, b)
		id := uniq("s")
		must(t, "Create", b.Sessions.Create(ctx, id, map[string]string{"p": "ada"}, time.Minute, 0, cluster.CreateOptions{}))
		notice := &cluster.Notice{Topic: topic, Msg: []byte("ended " + id)}
		// Not ended (another's, then unknown): nothing is published.
		if live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Match: map[string]string{"p": "eve"}, Announce: notice}); err != nil || live {
			t.Fatalf("End of another's: got %v, %v, want false, nil", live, err)
		}
		if live, err := b.Sessions.End(ctx, uniq("unknown"), cluster.EndOptions{Announce: notice}); err != nil || live {
			t.Fatalf("End of an unknown session: got %v, %v, want false, nil", live, err)
		}
		if live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Match: map[string]string{"p": "ada"}, Announce: notice}); err != nil || !live {
			t.Fatalf("End: got %v, %v, want true, nil", live, err)
		}
		if live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Announce: notice}); err != nil || live {
			t.Fatalf("second End: got %v, %v, want false, nil", live, err)
		}
		wantAnnounced(t, got, string(notice.Msg))
	})

	t.Run("End", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		id, other := uniq("s"), uniq("other")
		must(t, "Create", b.Sessions.Create(ctx, id, map[string]string{"a": "1"}, time.Minute, 0, cluster.CreateOptions{}))
		must(t, "Create", b.Sessions.Create(ctx, other, nil, time.Minute, 0, cluster.CreateOptions{}))
		lim := cluster.Limits{MaxEvents: 10, MaxStreams: 10, TTL: time.Minute}
		streams := []string{uniq("x"), uniq("x")}
		for _, x := range streams {
			must(t, "Open", b.Events.Open(ctx, x, cluster.StreamMeta{Session: id}, lim))
			if _, err := b.Events.Append(ctx, id, x, []byte(`{}`), false, lim); err != nil {
				t.Fatal(err)
			}
		}
		otherStream := uniq("x")
		must(t, "Open", b.Events.Open(ctx, otherStream, cluster.StreamMeta{Session: other}, lim))
		must(t, "Subscribe", b.Sessions.Subscribe(ctx, id, "file:///a"))
		must(t, "Subscribe", b.Sessions.Subscribe(ctx, other, "file:///a"))
		mine, theirs, global := "session:"+id+":get", "session:"+other+":get", uniq("node-claim")
		for _, k := range []string{mine, theirs, global} {
			if _, err := b.Claims.Claim(ctx, k, "conn-1", time.Minute); err != nil {
				t.Fatal(err)
			}
		}

		// A session whose fields differ from match is kept.
		for _, match := range []map[string]string{{"a": "2"}, {"a": "1", "b": "x"}} {
			live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Match: match})
			if err != nil || live {
				t.Fatalf("End matching %v: got %v, %v, want false, nil", match, live, err)
			}
			if _, err := b.Sessions.Load(ctx, id, time.Minute, ""); err != nil {
				t.Fatalf("Load after End matching %v: %v", match, err)
			}
			if _, _, err := b.Events.Read(ctx, id, streams[0], 0); err != nil {
				t.Fatalf("Read after End matching %v: %v", match, err)
			}
		}
		// A missing field matches "".
		live, err := b.Sessions.End(ctx, id, cluster.EndOptions{Match: map[string]string{"a": "1", "b": ""}})
		if err != nil || !live {
			t.Fatalf("End: got %v, %v, want true, nil", live, err)
		}
		_, err = b.Sessions.Load(ctx, id, time.Minute, "")
		wantErr(t, "Load after End", err, cluster.ErrNotFound)
		wantErr(t, "Set after End", setFields(ctx, b, id, map[string]string{"b": "2"}), cluster.ErrNotFound)
		_, err = b.Sessions.Load(ctx, id, time.Minute, "")
		wantErr(t, "Load after Set on ended", err, cluster.ErrNotFound)
		for _, x := range streams {
			_, _, err := b.Events.Read(ctx, id, x, 0)
			wantErr(t, "Read of an ended session's stream", err, cluster.ErrNotFound)
			_, err = b.Events.Append(ctx, id, x, nil, false, lim)
			wantErr(t, "Append to an ended session's stream", err, cluster.ErrNotFound)
		}
		if _, _, err := b.Events.Read(ctx, other, otherStream, 0); err != nil {
			t.Fatalf("Read of another session's stream after End: %v", err)
		}
		subs, err := b.Sessions.Subscribers(ctx, "file:///a")
		must(t, "Subscribers", err)
		if !slices.Equal(subs, []string{other}) {
			t.Fatalf("Subscribers after End: got %v, want [%s]", subs, other)
		}
		for k, want := range map[string]string{mine: "", theirs: "conn-1", global: "conn-1"} {
			got, err := b.Claims.Holder(ctx, k)
			if err != nil || got != want {
				t.Fatalf("Holder(%q) after End: got %q, %v, want %q", k, got, err, want)
			}
		}
		live, err = b.Sessions.End(ctx, id, cluster.EndOptions{})
		if err != nil || live {
			t.Fatalf("second End: got %v, %v, want false, nil", live, err)
		}
		n, err := b.Sessions.Count(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Count: got %d, %v, want 1", n, err)
		}
	})

	t.Run("Subscriptions", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		a, c, short := uniq("a"), uniq("c"), uniq("short")
		must(t, "Create", b.Sessions.Create(ctx, a, nil, time.Minute, 0, cluster.CreateOptions{}))
		must(t, "Create", b.Sessions.Create(ctx, c, nil, time.Minute, 0, cluster.CreateOptions{}))
		must(t, "Create", b.Sessions.Create(ctx, short, nil, time.Second, 0, cluster.CreateOptions{}))
		const u1, u2 = "file:///one", "ui://two?x=1"
		for range 2 { // idempotent
			must(t, "Subscribe", b.Sessions.Subscribe(ctx, a, u1))
		}
		must(t, "Subscribe", b.Sessions.Subscribe(ctx, c, u1))
		must(t, "Subscribe", b.Sessions.Subscribe(ctx, c, u2))
		must(t, "Subscribe", b.Sessions.Subscribe(ctx, short, u2))
		check := func(uri string, want ...string) {
			t.Helper()
			got, err := b.Sessions.Subscribers(ctx, uri)
			must(t, "Subscribers", err)
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("Subscribers(%q): got %v, want %v", uri, got, want)
			}
		}
		check(u1, a, c)
		check(u2, c, short)
		check("file:///none")
		for range 2 {
			must(t, "Unsubscribe", b.Sessions.Unsubscribe(ctx, a, u1))
		}
		must(t, "Unsubscribe of a uri never subscribed", b.Sessions.Unsubscribe(ctx, a, u2))
		check(u1, c)
		waitFor(t, 10*time.Second, "an expired session to leave Subscribers", func() bool {
			got, err := b.Sessions.Subscribers(ctx, u2)
			return err == nil && len(got) == 1 && got[0] == c
		})
	})

	t.Run("ScanCount", func(t *testing.T) {
		t.Parallel()
		b := s.newBackend(t)
		ctx := t.Context()
		want := make(map[string]bool)
		for range 53 {
			id := uniq("s")
			want[id] = true
			must(t, "Create", b.Sessions.Create(ctx, id, nil, time.Minute, 0, cluster.CreateOptions{}))
		}
		n, err := b.Sessions.Count(ctx)
		if err != nil || n != len(want) {
			t.Fatalf("Count: got %d, %v, want %d", n, err, len(want))
		}
		// Churn while scanning: sessions created and ended during the scan
		// may or may not show up; the ones live throughout must.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := uniq("churn")
				if b.Sessions.Create(ctx, id, nil, time.Minute, 0, cluster.CreateOptions{}) == nil {
					_, _ = b.Sessions.End(ctx, id, cluster.EndOptions{})
				}
			}
		})
		seen := make(map[string]bool)
		cursor, pages := "", 0
		for {
			ids, next, err := b.Sessions.Scan(ctx, cursor, 7)
			if err != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("Scan: %v", err)
			}
			for _, id := range ids {
				seen[id] = true
			}
			pages++
			if next == "" || pages > 1000 {
				break
			}
			cursor = next
		}
		close(stop)
		wg.Wait()
		for id := range want {
			if !seen[id] {
				t.Fatalf("Scan missed live session %s (%d pages)", id, pages)
			}
		}
	})
}

// setFields is SessionStore.Set without the holders.
func setFields(ctx context.Context, b *cluster.Backend, id string, fields map[string]string) error {
	_, err := b.Sessions.Set(ctx, id, fields)
	return err
}
