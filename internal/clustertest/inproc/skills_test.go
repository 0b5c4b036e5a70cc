package inproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest/inproc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/toolpack/demo"
	"github.com/mcpcluster/mcpcluster/mcp"
)

const resourcesChanged = "notifications/resources/list_changed"

// modernAt sends a 2026-07-28 request to node url and returns its final
// message.
func modernAt(t *testing.T, url, method string, params map[string]any) *mcptest.Response {
	t.Helper()
	cl := mcptest.New(t)
	p := map[string]any{"_meta": mcptest.ModernMeta()}
	for k, v := range params {
		p[k] = v
	}
	_, body := mcptest.Request(t, cl, method, p)
	ctx, cancel := context.WithTimeout(context.Background(), soon)
	defer cancel()
	resp, err := cl.PostRaw(ctx, url, body, mcptest.ModernHeaders(method, ""), nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	if resp.Final() == nil {
		t.Fatalf("%s at %s: no response (status %d, %q)", method, url, resp.Status, resp.Body)
	}
	return resp
}

// pages follows a list method's cursors, each page from the next node,
// and returns the URIs it listed under key.
func pages(t *testing.T, c *inproc.Cluster, method, key string, params map[string]any) []string {
	t.Helper()
	var out []string
	cursor := ""
	for i := range 50 {
		p := map[string]any{}
		for k, v := range params {
			p[k] = v
		}
		if cursor != "" {
			p["cursor"] = cursor
		}
		f := modernAt(t, c.Nodes[i%len(c.Nodes)].URL, method, p).Final()
		if f.Error != nil {
			t.Fatalf("%s page %d: %d %s", method, i+1, f.Error.Code, f.Error.Message)
		}
		var page map[string]json.RawMessage
		_ = json.Unmarshal(f.Result, &page)
		var items []struct {
			URI string `json:"uri"`
		}
		if err := json.Unmarshal(page[key], &items); err != nil {
			t.Fatalf("%s: %s", method, f.Result)
		}
		for _, it := range items {
			out = append(out, it.URI)
		}
		cursor = ""
		_ = json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			return out
		}
	}
	t.Fatalf("%s: more than 50 pages", method)
	return nil
}

// Every node serves the same skills: skills/list and a folder's children
// page across the nodes (one item a page, each page from the next node),
// and a skill disabled on one node is gone on every node, with exactly
// one resources list_changed on every session's GET stream and every
// listen stream, whichever node holds it.
func TestSkillsAcrossNodes(t *testing.T) {
	onBackends(t, func(t *testing.T, opts inproc.Options) {
		opts.Server.PageSize = 1
		opts.Setup = func(_ int, s *mcp.Server) {
			demo.Register(s)
			for _, p := range []string{"alpha", "team/beta", "team/gamma"} {
				name := path.Base(p)
				md := fmt.Sprintf("---\nname: %s\ndescription: The %s skill.\n---\n", name, name)
				if err := s.AddSkill(mcp.Skill{Path: p, Files: map[string][]byte{"SKILL.md": []byte(md), "ref/one.md": []byte("1"), "ref/two.md": []byte("2")}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		c := inproc.New(t, opts)
		var streams []*mcptest.Stream
		for i, n := range c.Nodes {
			cl := mcptest.New(t, c.Nodes[(i+1)%len(c.Nodes)].URL)
			cl.Initialize(mcp.Version20251125, nil)
			streams = append(streams, mcptest.OpenGet(t, cl, n.URL, ""))
			lc := mcptest.New(t)
			params := map[string]any{"notifications": map[string]any{"resourcesListChanged": true}, "_meta": mcptest.ModernMeta()}
			_, body := mcptest.Request(t, lc, "subscriptions/listen", params)
			st, err := lc.OpenPost(n.URL, body, mcptest.ModernHeaders("subscriptions/listen", ""))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			mustWait(t, st, "acknowledgement", mcptest.Has("notifications/subscriptions/acknowledged", 1))
			streams = append(streams, st)
		}

		all := []string{"skill://alpha/SKILL.md", "skill://demo-tour/SKILL.md", "skill://team/beta/SKILL.md", "skill://team/gamma/SKILL.md"}
		if got := pages(t, c, "skills/list", "skills", nil); !slices.Equal(got, all) {
			t.Fatalf("skills/list across nodes: %v, want %v", got, all)
		}
		want := []string{"skill://team/beta/SKILL.md", "skill://team/beta/ref"}
		if got := pages(t, c, "resources/directory/read", "resources", map[string]any{"uri": "skill://team/beta"}); !slices.Equal(got, want) {
			t.Fatalf("a folder across nodes: %v, want %v", got, want)
		}

		beta := "skill://team/beta/SKILL.md"
		if err := c.Nodes[0].Server.SetEnabled(t.Context(), mcp.KindSkill, beta, false); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			mcptest.Eventually(t, soon, n.ID+" to see beta disabled", func() bool { return !n.Server.Enabled(mcp.KindSkill, beta) })
			f := modernAt(t, n.URL, "skills/get", map[string]any{"uri": beta}).Final()
			if f.Error == nil || f.Error.Code != -32602 {
				t.Errorf("%s: skills/get of the disabled skill: %+v, want -32602", n.ID, f)
			}
		}
		if got := pages(t, c, "skills/list", "skills", nil); slices.Contains(got, beta) {
			t.Errorf("skills/list after disabling beta: %v", got)
		}
		if got := pages(t, c, "resources/directory/read", "resources", map[string]any{"uri": "skill://team"}); !slices.Equal(got, []string{"skill://team/gamma"}) {
			t.Errorf("skill://team after disabling beta: %v", got)
		}
		for i, st := range streams {
			mustWait(t, st, fmt.Sprintf("list_changed on stream %d", i), mcptest.Has(resourcesChanged, 1))
		}
		time.Sleep(settle)
		for i, st := range streams {
			if got := st.Count(resourcesChanged); got != 1 {
				t.Errorf("stream %d: %d resources list_changed, want 1", i, got)
			}
		}
	})
}
