package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// skillAccessServer serves a public skill and one needing the scope
// docs:secret; with hidden, also acme/audit, which the filter shows to
// ada alone. Without hidden, acme/audit is not registered: the server a
// caller who may not see it must be unable to tell apart.
func skillAccessServer(t *testing.T, hidden bool) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "access", Version: "1.0.0"}, &mcp.ServerOptions{
		FeatureFilter: func(_ context.Context, req *mcp.Request, kind, name string) bool {
			return kind != mcp.KindSkill || !strings.HasPrefix(name, "skill://acme/") || req.Principal().Subject == "ada"
		},
	})
	skills := []mcp.Skill{
		{Path: "public", Files: map[string][]byte{"SKILL.md": skillMD("public")}},
		{Path: "secret", Files: map[string][]byte{"SKILL.md": skillMD("secret"), "data/key.md": []byte("k")}, RequiredScopes: []string{"docs:secret"}},
	}
	if hidden {
		skills = append(skills, mcp.Skill{Path: "acme/audit", Files: map[string][]byte{"SKILL.md": skillMD("audit"), "steps/one.md": []byte("1")}})
	}
	for _, sk := range skills {
		if err := s.AddSkill(sk); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A skill the filter hides answers every probe (skills/get, the reads of
// its files, the directory reads of its folders and of the path above
// it) exactly as on a server without it, and is in no list; the one who
// may see it uses it.
func TestHiddenSkillAnswersAsUnknown(t *testing.T) {
	with, without := serveWithAuth(t, skillAccessServer(t, true)), serveWithAuth(t, skillAccessServer(t, false))
	probes := []struct {
		method string
		params map[string]any
		modern bool // a method of the extension: 2026-07-28 only
	}{
		{"skills/get", map[string]any{"uri": "skill://acme/audit/SKILL.md"}, true},
		{"resources/directory/read", map[string]any{"uri": "skill://acme/audit"}, true},
		{"resources/directory/read", map[string]any{"uri": "skill://acme/audit/steps"}, true},
		{"resources/directory/read", map[string]any{"uri": "skill://acme"}, true},
		{"resources/read", map[string]any{"uri": "skill://acme/audit/SKILL.md"}, false},
		{"resources/read", map[string]any{"uri": "skill://acme/audit/steps/one.md"}, false},
	}
	for _, e := range eras {
		a, b := newCaller(t, with, e, "bob-token"), newCaller(t, without, e, "bob-token")
		for _, p := range probes {
			if p.modern && !e.modern {
				continue
			}
			ra, rb := a.call(p.method, p.params), b.call(p.method, p.params)
			if ra.Status != rb.Status || !bytes.Equal(ra.Body, rb.Body) || ra.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%s %s %v: hidden answered %d %q, absent %d %q", e.name, p.method, p.params, ra.Status, ra.Body, rb.Status, rb.Body)
			}
			if f := ra.Final(); f == nil || f.Error == nil {
				t.Errorf("%s %s: the hidden skill answered %q, want an error", e.name, p.method, ra.Body)
			}
		}
		lists := [][2]string{{"resources/list", "resources"}}
		if e.modern {
			lists = append(lists, [2]string{"skills/list", "skills"})
		}
		for _, l := range lists {
			ga, _ := a.names(l[0], l[1])
			gb, _ := b.names(l[0], l[1])
			if !slices.Equal(ga, gb) {
				t.Errorf("%s %s: bob sees %v, on the server without the skill %v", e.name, l[0], ga, gb)
			}
		}
		ada := newCaller(t, with, e, "ada-token")
		for _, p := range probes {
			if p.modern && !e.modern {
				continue
			}
			ada.call(p.method, p.params).Result(t, nil)
		}
	}
}

// A skill whose scopes an authenticated caller lacks is not listed, and
// getting it, reading its files or its folder is answered 403 with the
// insufficient_scope challenge naming the scope (step-up).
func TestSkillScopeStepUp(t *testing.T) {
	url := serveWithAuth(t, skillAccessServer(t, false))
	for _, e := range eras {
		bob, ada := newCaller(t, url, e, "bob-token"), newCaller(t, url, e, "ada-token")
		if got, _ := bob.names("resources/list", "resources"); !slices.Equal(got, []string{"skill://public/SKILL.md"}) {
			t.Errorf("%s: bob lists %v", e.name, got)
		}
		probes := []struct {
			method string
			params map[string]any
		}{
			{"resources/read", map[string]any{"uri": "skill://secret/data/key.md"}},
			{"skills/get", map[string]any{"uri": "skill://secret/SKILL.md"}},
			{"resources/directory/read", map[string]any{"uri": "skill://secret/data"}},
		}
		for _, p := range probes {
			if !e.modern && p.method != "resources/read" {
				continue
			}
			resp := bob.call(p.method, p.params)
			wantRPCError(t, resp, http.StatusForbidden, mcp.CodeInsufficientScope)
			want := fmt.Sprintf(`Bearer error="insufficient_scope", scope="mcp docs:secret", resource_metadata=%q`, accessMetadataURL)
			if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, want) {
				t.Errorf("%s %s: WWW-Authenticate %q, want it to start with %q", e.name, p.method, got, want)
			}
			ada.call(p.method, p.params).Result(t, nil)
		}
		if e.modern {
			if got, _ := ada.names("skills/list", "skills"); !slices.Equal(got, []string{"skill://public/SKILL.md", "skill://secret/SKILL.md"}) {
				t.Errorf("ada lists %v", got)
			}
		}
	}
}
