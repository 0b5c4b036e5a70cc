package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"sort"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Serving skills: skills/list, skills/get and resources/directory/read
// (2026-07-28, where the extension is declared), and on every revision
// the skills' SKILL.md in resources/list and their files through
// resources/read. A skill the caller may not see (disabled, refused by
// the FeatureFilter, or needing scopes and no principal to have them)
// answers exactly as one that does not exist, everywhere: lists, get,
// reads and directories; an authenticated caller lacking its scopes gets
// an InsufficientScopeError, as for other features.

// skillsMethods are the extension's methods: 2026-07-28 only, where
// extensions are declared.
var skillsMethods = map[string]bool{"skills/list": true, "skills/get": true, "resources/directory/read": true}

// skillsMethod answers the methods of the extension; without skills the
// extension is not declared and they are unknown methods.
func (s *Server) skillsMethod(ctx context.Context, req *Request) (any, error) {
	s.mu.RLock()
	n := len(s.skills)
	s.mu.RUnlock()
	if n == 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
	}
	switch req.Method {
	case "skills/list":
		return s.listSkills(ctx, req)
	case "skills/get":
		return s.getSkill(ctx, req)
	}
	return s.readDirectory(ctx, req)
}

// visiblePage returns the indexes of the page of keys (sorted) that
// cursor starts, keeping those visible, and the cursor of the page after
// it. The cursor names the next visible key, so pages are the same on
// every node with the same registrations and filter.
func (s *Server) visiblePage(cursor string, keys []string, visible func(i int) bool) ([]int, string, error) {
	start, err := cursorStart(keys, cursor)
	if err != nil {
		return nil, "", err
	}
	size := s.opts.pageSize()
	var out []int
	for i := start; i < len(keys); i++ {
		if !visible(i) {
			continue
		}
		if len(out) == size {
			return out, encodeCursor(keys[i]), nil
		}
		out = append(out, i)
	}
	return out, "", nil
}

// enabledSkills returns the enabled skills by URI order.
func (s *Server) enabledSkills() []*skillEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := s.enabledKeys(KindSkill, sortedKeys(s.skills))
	out := make([]*skillEntry, len(keys))
	for i, k := range keys {
		out[i] = s.skills[k]
	}
	return out
}

func (s *Server) listSkills(ctx context.Context, req *Request) (any, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	skills := s.enabledSkills()
	keys := make([]string, len(skills))
	for i, e := range skills {
		keys[i] = e.uri
	}
	page, next, err := s.visiblePage(p.Cursor, keys, func(i int) bool {
		return s.listable(ctx, req, KindSkill, keys[i], skills[i].scopes)
	})
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(page))
	for i, j := range page {
		out[i] = skills[j].entry
	}
	return listResult("skills", out, next), nil
}

// visibleSkill returns the skill at uri the caller of req may see: nil
// when there is none, or an InsufficientScopeError.
func (s *Server) visibleSkill(ctx context.Context, req *Request, uri string) (*skillEntry, error) {
	return visibleEntry(ctx, s, req, KindSkill, uri, s.skills, func(e *skillEntry) []string { return e.scopes })
}

func (s *Server) getSkill(ctx context.Context, req *Request) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if p.URI == "" {
		return nil, invalidParam("uri", "is required")
	}
	e, err := s.visibleSkill(ctx, req, p.URI)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "no skill is served at "+p.URI, map[string]any{"uri": p.URI})
	}
	return map[string]any{"skill": e.entry}, nil
}

// skillContents is one file as resources/read returns it: text (empty
// text included) or a base64 blob.
type skillContents struct {
	URI      string  `json:"uri"`
	MimeType string  `json:"mimeType"`
	Text     *string `json:"text,omitempty"`
	Blob     *string `json:"blob,omitempty"`
}

// readSkillFile answers resources/read of a skill's file: ok reports
// that a skill the caller may see has it (res), or err is the
// InsufficientScopeError of one the caller lacks the scopes of.
func (s *Server) readSkillFile(ctx context.Context, req *Request, uri string) (res any, ok bool, err error) {
	if !strings.HasPrefix(uri, "skill://") || len(uri) > maxSkillURIBytes {
		return nil, false, nil
	}
	// The skills that may hold uri: those at each folder above it.
	var holders []*skillEntry
	s.mu.RLock()
	for dir := uri; ; {
		i := strings.LastIndexByte(dir, '/')
		if i <= len("skill://") {
			break
		}
		dir = dir[:i]
		key := dir + "/SKILL.md"
		if e := s.skills[key]; e != nil && e.files[uri] != nil && s.enabledLocked(featureKey(KindSkill, key)) {
			holders = append(holders, e)
		}
	}
	s.mu.RUnlock()
	var stepUp error
	for _, e := range holders {
		switch err := s.access(ctx, req, KindSkill, e.uri, e.scopes); {
		case err == nil:
			f := e.files[uri]
			c := skillContents{URI: uri, MimeType: f.mime}
			if f.text {
				t := string(f.data)
				c.Text = &t
			} else {
				b := base64.StdEncoding.EncodeToString(f.data)
				c.Blob = &b
			}
			return map[string]any{"contents": []skillContents{c}}, true, nil
		case !errors.Is(err, errHidden):
			stepUp = err
		}
	}
	return nil, false, stepUp
}

// readDirectory answers resources/directory/read: the direct children
// of a folder of the skills the caller may see (a skill's folder, one of
// its subfolders, or a folder of the path above skills), a page at a time.
func (s *Server) readDirectory(ctx context.Context, req *Request) (any, error) {
	var p struct {
		URI    string `json:"uri"`
		Cursor string `json:"cursor"`
	}
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if p.URI == "" {
		return nil, invalidParam("uri", "is required")
	}
	children, err := s.directoryChildren(ctx, req, p.URI)
	if err != nil {
		return nil, err
	}
	if children == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, p.URI+" is not a directory resource this server serves", map[string]any{"uri": p.URI})
	}
	keys := make([]string, len(children))
	for i, c := range children {
		keys[i] = c.URI
	}
	page, next, err := s.visiblePage(p.Cursor, keys, func(int) bool { return true })
	if err != nil {
		return nil, err
	}
	out := make([]Resource, len(page))
	for i, j := range page {
		out[i] = children[j]
	}
	return listResult("resources", out, next), nil
}

// directoryChildren returns the children of the folder dir (sorted by
// URI; nil when no skill the caller may see has such a folder), or the
// InsufficientScopeError of a skill the caller lacks the scopes of.
func (s *Server) directoryChildren(ctx context.Context, req *Request, dir string) ([]Resource, error) {
	if !strings.HasPrefix(dir, "skill://") || strings.HasSuffix(dir, "/") || len(dir) == len("skill://") || len(dir) > maxSkillURIBytes {
		return nil, nil
	}
	merged := map[string]Resource{}
	found := false
	var stepUp error
	for _, e := range s.enabledSkills() {
		var kids []Resource
		switch {
		case e.root == dir || strings.HasPrefix(dir, e.root+"/"):
			kids = e.dirs[dir]
		case strings.HasPrefix(e.root, dir+"/"):
			seg, _, _ := strings.Cut(e.root[len(dir)+1:], "/")
			name, _ := url.PathUnescape(seg)
			kids = []Resource{{URI: dir + "/" + seg, Name: name, MimeType: mimeDirectory}}
		}
		if kids == nil {
			continue
		}
		if err := s.access(ctx, req, KindSkill, e.uri, e.scopes); errors.Is(err, errHidden) {
			continue
		} else if err != nil {
			stepUp = err
			continue
		}
		found = true
		for _, k := range kids {
			if old, ok := merged[k.URI]; !ok || old.MimeType != mimeDirectory {
				merged[k.URI] = k
			}
		}
	}
	if !found {
		return nil, stepUp
	}
	out := make([]Resource, 0, len(merged))
	for _, k := range merged {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URI < out[j].URI })
	return out, nil
}

// resourcePage is the caller's page of resources/list: the static
// resources and the skills' SKILL.md files, by URI.
func (s *Server) resourcePage(ctx context.Context, req *Request) ([]Resource, string, error) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		return nil, "", err
	}
	type item struct {
		kind, key string
		res       Resource
	}
	skills := s.enabledSkills()
	s.mu.RLock()
	keys := s.enabledKeys(KindResource, sortedKeys(s.resources))
	items := make([]item, 0, len(keys)+len(skills))
	for _, k := range keys {
		if s.skills[k] == nil || !s.enabledLocked(featureKey(KindSkill, k)) { // else read as the skill's
			items = append(items, item{KindResource, k, s.resources[k].res})
		}
	}
	s.mu.RUnlock()
	for _, e := range skills {
		items = append(items, item{KindSkill, e.uri, e.resource()})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	keys = make([]string, len(items))
	for i, it := range items {
		keys[i] = it.key
	}
	page, next, err := s.visiblePage(p.Cursor, keys, func(i int) bool {
		return s.listable(ctx, req, items[i].kind, items[i].key, items[i].res.RequiredScopes)
	})
	if err != nil {
		return nil, "", err
	}
	out := make([]Resource, len(page))
	for i, j := range page {
		out[i] = resourceFor(items[j].res, req.version)
	}
	return out, next, nil
}

// skillsExtension is the extension's declaration.
func skillsExtension() map[string]any { return map[string]any{"directoryRead": true} }
