package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// The Skills extension (io.modelcontextprotocol/skills, SEP-2640): a
// skill is a folder of files, at least a SKILL.md whose YAML frontmatter
// names and describes it, served as resources under skill://<path>/...,
// enumerated by skills/list, described by skills/get (its frontmatter and
// a manifest of its files with their SHA-256 digests), and browsed with
// resources/directory/read. The extension is specified against the
// 2026-07-28 revision, where servers declare extensions: a server with
// skills declares it there (with directoryRead), and on the session
// revisions a skill's files are ordinary resources. A skill's file
// answers resources/read before a resource or template registered at the
// same URI.

// ExtensionSkills names the skills extension.
const ExtensionSkills = "io.modelcontextprotocol/skills"

// KindSkill is the kind of a skill for SetEnabled, RequireScopes and
// ServerOptions.FeatureFilter; its name is the skill's URI
// (skill://<path>/SKILL.md).
const KindSkill = "skill"

// The bounds of one skill that the extension fixes: every host accepts a
// skill within them, and a server serves none past them. A file is also
// bounded by ServerOptions.MaxSkillFileBytes.
const (
	SkillMaxFiles = 512
	SkillMaxBytes = 16 << 20
)

// ErrInvalidSkill is wrapped by every error of a skill registration: a
// bad path, frontmatter or file, or a skill past a bound.
var ErrInvalidSkill = errors.New("mcp: invalid skill")

// Skill is a skill to serve: its files, SKILL.md among them.
type Skill struct {
	// Path locates the skill in the server's skill namespace: one or more
	// "/"-separated segments of letters, digits and ".", "_", "~", "-",
	// the last one the name in the frontmatter ("git-workflow",
	// "acme/billing/refunds"). The skill's URI is skill://<Path>/SKILL.md.
	Path string
	// Files are the skill's files by their "/"-separated path from the
	// skill's folder ("SKILL.md", "references/FORMS.md"). SKILL.md must
	// begin with YAML frontmatter holding at least name and description.
	Files map[string][]byte
	// RequiredScopes are the OAuth scopes a caller's token must carry to
	// see the skill and read its files (see ServerOptions.FeatureFilter).
	RequiredScopes []string
}

// maxSkillURIBytes bounds the URI of a skill's file: longer URIs are
// never a skill's, and are looked up no further.
const maxSkillURIBytes = 4096

// skillPathRE is one segment of a skill's path: URI-safe (the first is
// the URI's authority).
var skillPathRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

// skillFile is one file of a registered skill, its digest computed once.
type skillFile struct {
	uri, name, mime string
	data            []byte
	digest          string // sha256:<hex>
	text            bool   // UTF-8: served as text, else as a blob
}

// skillEntry is a registered skill. It is replaced, never changed.
type skillEntry struct {
	uri, root   string // skill://<path>/SKILL.md and skill://<path>
	path        string
	fm          frontmatter
	files       map[string]*skillFile // by URI
	dirs        map[string][]Resource // children of each directory, root included, by URI
	entry       json.RawMessage       // the Skill entry of skills/list and skills/get
	scopes      []string
	skillMDSize int64
}

// AddSkill registers a skill, replacing one at the same path, after
// checking it: its path, frontmatter (name equal to the path's last
// segment), files and bounds. The digests of its files are computed
// here, once. Clients see it as any registration (a resources
// list_changed). Like other registrations it stays on this node: every
// node of a cluster registers the same skills, and SetEnabled(KindSkill,
// uri, ...) switches one on or off for the whole cluster.
func (s *Server) AddSkill(sk Skill) error {
	files := make(map[string][]byte, len(sk.Files))
	for p, data := range sk.Files {
		files[p] = bytes.Clone(data) // the digests hold for what is served
	}
	sk.Files = files
	return s.addSkill(sk)
}

func (s *Server) addSkill(sk Skill) error {
	e, err := s.newSkillEntry(sk)
	if err != nil {
		return err
	}
	return s.putSkills([]*skillEntry{e})
}

// AddSkillFS registers the skill in the folder fsys (its SKILL.md at the
// root) under path, as AddSkill does. Every file below the folder is the
// skill's, nested skills' files included; names starting with "." are
// left out, and symbolic links are followed.
func (s *Server) AddSkillFS(path string, fsys fs.FS) error {
	files, err := readSkillFS(fsys, s.opts.maxSkillFileBytes())
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidSkill, path, err)
	}
	return s.addSkill(Skill{Path: path, Files: files})
}

// AddSkillsFS registers a skill for every folder of fsys holding a
// SKILL.md, at the folder's path (a skill nested in another one is
// registered too, and its files are also the enclosing skill's), and
// returns their URIs. Either every skill is registered, or none is and
// the error names what is wrong.
func (s *Server) AddSkillsFS(fsys fs.FS) ([]string, error) {
	roots, err := findSkillRoots(fsys)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSkill, err)
	}
	var entries []*skillEntry
	var errs []error
	for _, root := range roots {
		sub, err := fs.Sub(fsys, root)
		if err == nil {
			var files map[string][]byte
			if files, err = readSkillFS(sub, s.opts.maxSkillFileBytes()); err == nil {
				var e *skillEntry
				if e, err = s.newSkillEntry(Skill{Path: root, Files: files}); err == nil {
					entries = append(entries, e)
					continue
				}
			}
		}
		if !errors.Is(err, ErrInvalidSkill) {
			err = fmt.Errorf("%w %q: %w", ErrInvalidSkill, root, err)
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := s.putSkills(entries); err != nil {
		return nil, err
	}
	uris := make([]string, len(entries))
	for i, e := range entries {
		uris[i] = e.uri
	}
	return uris, nil
}

// RemoveSkills removes skills by URI and notifies clients if any existed.
func (s *Server) RemoveSkills(uris ...string) {
	removeEntries(s, s.skills, uris, "notifications/resources/list_changed")
}

// SkillURIs returns the URIs of the registered skills, sorted.
func (s *Server) SkillURIs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sortedKeys(s.skills)
}

// SkillURI is the URI of the skill at path.
func SkillURI(path string) string { return "skill://" + path + "/SKILL.md" }

// putSkills registers checked skills at once, refusing any whose files
// would answer a URI another skill serves with other bytes; the
// subscribers of a replaced skill's changed files are told.
func (s *Server) putSkills(entries []*skillEntry) error {
	s.mu.Lock()
	// The skills once these are in: a nested skill shares files with the
	// skills around it, which must be the same bytes.
	after := maps.Clone(s.skills)
	for _, e := range entries {
		after[e.uri] = e
	}
	for _, e := range entries {
		if err := skillConflict(e, after); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	var changed []string
	for _, e := range entries {
		if old := s.skills[e.uri]; old != nil {
			for uri, f := range old.files {
				if g := e.files[uri]; g == nil || g.digest != f.digest {
					changed = append(changed, uri)
				}
			}
		}
		s.skills[e.uri] = e
	}
	s.mu.Unlock()
	s.notifyListChanged("notifications/resources/list_changed")
	for _, uri := range changed {
		s.ResourceUpdated(context.Background(), uri)
	}
	return nil
}

// skillConflict reports a file of e that another skill of all serves
// with other bytes.
func skillConflict(e *skillEntry, all map[string]*skillEntry) error {
	for _, o := range all {
		if o == e || !strings.HasPrefix(o.root+"/", e.root+"/") && !strings.HasPrefix(e.root+"/", o.root+"/") {
			continue
		}
		for uri, f := range e.files {
			if g := o.files[uri]; g != nil && g.digest != f.digest {
				return fmt.Errorf("%w %q: %s differs from the same file of the skill %s", ErrInvalidSkill, e.path, uri, o.uri)
			}
		}
	}
	return nil
}

// newSkillEntry checks a skill and computes what serving it needs.
func (s *Server) newSkillEntry(sk Skill) (*skillEntry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidSkill, sk.Path, fmt.Sprintf(format, args...))
	}
	segs := strings.Split(sk.Path, "/")
	for _, seg := range segs {
		if !skillPathRE.MatchString(seg) || seg == "." || seg == ".." {
			return nil, bad("the path needs one or more segments of letters, digits and '.', '_', '~', '-' (not . or ..), separated by '/'")
		}
	}
	if err := validScopes(sk.RequiredScopes); err != nil {
		return nil, bad("%v", err)
	}
	md, ok := sk.Files["SKILL.md"]
	if !ok {
		return nil, bad("has no SKILL.md")
	}
	if len(sk.Files) > SkillMaxFiles {
		return nil, bad("has %d files, over the extension's bound of %d", len(sk.Files), SkillMaxFiles)
	}
	limit, total := s.opts.maxSkillFileBytes(), 0
	for _, p := range sortedKeys(sk.Files) { // the first problem, always the same
		data := sk.Files[p]
		if !fs.ValidPath(p) || p == "." {
			return nil, bad("%q is not a file path relative to the skill's folder", p)
		}
		if len(data) > limit {
			return nil, bad("%s has %d bytes, over the bound of %d on a skill file (ServerOptions.MaxSkillFileBytes, --max-skill-file-bytes)", p, len(data), limit)
		}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, clash := sk.Files[dir]; clash {
				return nil, bad("%s is a file and a folder", dir)
			}
		}
		total += len(data)
	}
	if total > SkillMaxBytes {
		return nil, bad("has %d bytes in its files, over the extension's bound of %d", total, SkillMaxBytes)
	}
	fm, err := parseFrontmatter(md)
	if err != nil {
		return nil, bad("SKILL.md %v", err)
	}
	if name := segs[len(segs)-1]; fm.name != name {
		return nil, bad("SKILL.md names the skill %q, but the last segment of its path is %q: they must be equal", fm.name, name)
	}
	e := &skillEntry{
		path: sk.Path, root: "skill://" + sk.Path, uri: SkillURI(sk.Path), fm: fm,
		files: make(map[string]*skillFile, len(sk.Files)), dirs: map[string][]Resource{},
		scopes: slices.Clone(sk.RequiredScopes), skillMDSize: int64(len(md)),
	}
	for p, data := range sk.Files {
		segs := strings.Split(p, "/")
		for i := range segs {
			segs[i] = url.PathEscape(segs[i])
		}
		sum := sha256.Sum256(data)
		f := &skillFile{uri: e.root + "/" + strings.Join(segs, "/"), name: path.Base(p), data: data,
			digest: "sha256:" + hex.EncodeToString(sum[:]), text: utf8.Valid(data)}
		if len(f.uri) > maxSkillURIBytes {
			return nil, bad("the URI of %s is longer than %d bytes", p, maxSkillURIBytes)
		}
		f.mime = skillMime(p, f.text)
		e.files[f.uri] = f
		e.addToDirs(f)
	}
	for _, list := range e.dirs {
		sort.Slice(list, func(i, j int) bool { return list[i].URI < list[j].URI })
	}
	if e.entry, err = e.encode(); err != nil {
		return nil, bad("%v", err)
	}
	return e, nil
}

// addToDirs lists f, and the folders leading to it, in their folders.
func (e *skillEntry) addToDirs(f *skillFile) {
	size := int64(len(f.data))
	child := Resource{URI: f.uri, Name: f.name, MimeType: f.mime, Size: &size}
	for {
		dir := child.URI[:strings.LastIndexByte(child.URI, '/')]
		if slices.ContainsFunc(e.dirs[dir], func(r Resource) bool { return r.URI == child.URI }) {
			return
		}
		e.dirs[dir] = append(e.dirs[dir], child)
		if dir == e.root {
			return
		}
		name, _ := url.PathUnescape(dir[strings.LastIndexByte(dir, '/')+1:])
		child = Resource{URI: dir, Name: name, MimeType: mimeDirectory}
	}
}

// encode writes the skill's entry: its URI, frontmatter and manifest
// (SKILL.md first, then by URI).
func (e *skillEntry) encode() (json.RawMessage, error) {
	type file struct {
		URI    string `json:"uri"`
		Digest string `json:"digest"`
		Size   int    `json:"size"`
	}
	uris := sortedKeys(e.files)
	sort.SliceStable(uris, func(i, j int) bool { return uris[i] == e.uri && uris[j] != e.uri })
	manifest := make([]file, len(uris))
	for i, u := range uris {
		f := e.files[u]
		manifest[i] = file{URI: u, Digest: f.digest, Size: len(f.data)}
	}
	return json.Marshal(struct {
		URI         string          `json:"uri"`
		Frontmatter json.RawMessage `json:"frontmatter"`
		Resources   []file          `json:"resources"`
	}{e.uri, e.fm.json, manifest})
}

// resource is the SKILL.md as resources/list lists it.
func (e *skillEntry) resource() Resource {
	size := e.skillMDSize
	return Resource{URI: e.uri, Name: e.fm.name, Description: e.fm.description, MimeType: "text/markdown", Size: &size, RequiredScopes: e.scopes}
}

// mimeDirectory is the MIME type of a directory resource.
const mimeDirectory = "inode/directory"

// skillMimes are the MIME types of a skill's files by extension: one
// table, so that every node answers alike (the system's tables vary).
var skillMimes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain",
	".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".xml": "application/xml", ".csv": "text/csv",
	".html": "text/html", ".htm": "text/html", ".css": "text/css",
	".js": "text/javascript", ".mjs": "text/javascript", ".ts": "text/x-typescript",
	".py": "text/x-python", ".sh": "text/x-shellscript", ".go": "text/x-go",
	".rb": "text/x-ruby", ".sql": "application/sql", ".svg": "image/svg+xml",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".pdf": "application/pdf", ".zip": "application/zip",
}

func skillMime(p string, text bool) string {
	if m, ok := skillMimes[strings.ToLower(path.Ext(p))]; ok {
		return m
	}
	if text {
		return "text/plain"
	}
	return "application/octet-stream"
}

// validScopes is checkScopes as an error.
func validScopes(scopes []string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	checkScopes("RequiredScopes", scopes)
	return nil
}

// maxSkillFileBytes bounds one file of a skill.
func (o *ServerOptions) maxSkillFileBytes() int {
	return orDefault(o.MaxSkillFileBytes, DefaultServerOptions().MaxSkillFileBytes)
}
