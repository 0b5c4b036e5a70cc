package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this module's path, and root its directory from here.
const (
	module = "github.com/mcpcluster/mcpcluster"
	root   = "../.."
)

// A pattern names packages: "./p" is the module's package p, anything
// else a full import path; a trailing "/..." also matches every package
// below it.

// heavy is what a program that imports only mcp must not link.
var heavy = []string{
	"./internal/cluster/redis",
	"./mcp/redisbackend",
	"github.com/redis/go-redis/...",
	"google.golang.org/grpc/...",
	"go.opentelemetry.io/proto/otlp/...",
	"go.opentelemetry.io/otel/exporters/...",
	"go.opentelemetry.io/otel/sdk/...",
}

// harnesses are the test harnesses: tests import them, programs do not.
var harnesses = []string{
	"./internal/clustertest/...",
	"./internal/redistest",
	"./internal/authtest",
	"./internal/mcptest",
	"./internal/cluster/backendtest",
}

// below are the protocol packages under the node: framing, ids, the
// stdio channel, sealing, the validator and the matcher.
var below = []string{
	"./internal/sse",
	"./internal/jsonrpc",
	"./internal/stdio",
	"./internal/seal",
	"./internal/jsonschema",
	"./internal/uritemplate",
}

// A rule binds the packages matching from (less except): none of them
// may import a package matching deny, directly or through others, and
// when only is set, the module's packages they import directly must
// match it. Test files are not part of the graph.
type rule struct {
	doc    string // the rule, as docs/ARCHITECTURE.md states it
	from   []string
	except []string
	deny   []string
	only   []string
}

// rules are the rules of the house (docs/ARCHITECTURE.md, "Rules of the
// house").
var rules = []rule{{
	doc:    "internal/* never imports mcp; the exceptions use the public API as a user would",
	from:   []string{"./internal/..."},
	except: []string{"./internal/toolpack/...", "./internal/clustertest/inproc"},
	deny:   []string{"./mcp/..."},
}, {
	doc:  "internal/coordinator imports only internal/{callers,cluster,jsonrpc,session,telemetry}",
	from: []string{"./internal/coordinator"},
	only: []string{"./internal/callers", "./internal/cluster", "./internal/jsonrpc", "./internal/session", "./internal/telemetry"},
}, {
	doc:    "a program that imports only mcp links no go-redis, gRPC or OTLP package; mcp/redisbackend is the only mcp package linking go-redis",
	from:   []string{"./mcp/..."},
	except: []string{"./mcp/redisbackend"},
	deny:   heavy,
}, {
	doc:  "the seams and their backends know nothing above them: no session store, node or mcp",
	from: []string{"./internal/cluster/..."},
	deny: []string{"./internal/session", "./internal/coordinator", "./mcp/..."},
}, {
	doc:  "the backends do not import each other",
	from: []string{"./internal/cluster/memory"},
	deny: []string{"./internal/cluster/redis"},
}, {
	doc:  "the backends do not import each other",
	from: []string{"./internal/cluster/redis"},
	deny: []string{"./internal/cluster/memory"},
}, {
	doc:  "the session store is below the node",
	from: []string{"./internal/session"},
	deny: []string{"./internal/coordinator"},
}, {
	doc:  "internal/telemetry holds helpers, no exporter setup",
	from: []string{"./internal/telemetry"},
	deny: heavy,
}, {
	doc:  "the protocol packages below the node import no seam, session or node",
	from: below,
	deny: []string{"./internal/cluster/...", "./internal/session", "./internal/coordinator", "./internal/backendwrap"},
}, {
	doc:  "programs and the layers they link import no test harness",
	from: []string{"./mcp/...", "./internal/coordinator", "./internal/session", "./internal/cluster", "./internal/cluster/memory", "./internal/cluster/redis", "./cmd/server"},
	deny: append(slices.Clone(harnesses), "testing"),
}}

// TestImports checks every rule against the import graph of the module's
// packages and prints, for a broken one, the chain of imports that
// breaks it.
func TestImports(t *testing.T) {
	graph := map[string][]string{}
	for _, p := range goList(t, "-e", "-deps", "-json=ImportPath,Imports,Error", "./...") {
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		graph[p.ImportPath] = p.Imports
	}
	paths := make([]string, 0, len(graph))
	for p := range graph {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, r := range rules {
		// A pattern that matches nothing checks nothing: it is misspelt,
		// or its package moved.
		for _, pat := range slices.Concat(r.from, r.except, r.deny, r.only) {
			if !slices.ContainsFunc(paths, func(p string) bool { return match(pat, p) }) {
				t.Errorf("rule %q: %s matches no package", r.doc, pat)
			}
		}
		for _, p := range paths {
			if !matchAny(r.from, p) || matchAny(r.except, p) {
				continue
			}
			if r.only != nil {
				for _, q := range graph[p] {
					if q != p && inModule(q) && !matchAny(r.only, q) {
						t.Errorf("%s imports %s\n\trule: %s", short(p), short(q), r.doc)
					}
				}
			}
			if r.deny != nil {
				for _, chain := range reach(graph, p, r.deny) {
					t.Errorf("%s\n\trule: %s", strings.Join(chain, " → "), r.doc)
				}
			}
		}
	}
}

// reach returns, for each package matching deny that from imports
// directly or through others, the shortest chain of imports to it (the
// search does not go past a denied package).
func reach(graph map[string][]string, from string, deny []string) [][]string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	var hits []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range graph[p] {
			if _, seen := prev[q]; seen {
				continue
			}
			prev[q] = p
			if matchAny(deny, q) {
				hits = append(hits, q)
				continue
			}
			queue = append(queue, q)
		}
	}
	slices.Sort(hits)
	var chains [][]string
	for _, h := range hits {
		var chain []string
		for p := h; p != ""; p = prev[p] {
			chain = append(chain, short(p))
		}
		slices.Reverse(chain)
		chains = append(chains, chain)
	}
	return chains
}

func match(pattern, path string) bool {
	if rest, ok := strings.CutPrefix(pattern, "./"); ok {
		pattern = module + "/" + rest
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, path) })
}

func inModule(path string) bool { return match("./...", path) }

// short names a package of the module by its path in the module.
func short(path string) string {
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// listed is what go list -json reports of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Export     string
	Error      *struct{ Err string }
}

// goList runs go list with args in the module's directory.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is needed to read the import graph:", err)
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
}

// maxLines bounds a non-test Go file of the module.
const maxLines = 600

// TestFileSize checks that no non-test Go file of the module is over
// maxLines lines (the other modules of the repository, testdata and
// hidden directories aside).
func TestFileSize(t *testing.T) {
	type file struct {
		path  string
		lines int
	}
	var files []file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root {
				if name == "testdata" || name == "node_modules" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, file{filepath.ToSlash(rel), bytes.Count(b, []byte("\n"))})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go file found: the check does not see them")
	}
	slices.SortFunc(files, func(a, b file) int { return b.lines - a.lines })
	for _, f := range files[:min(5, len(files))] {
		t.Logf("%5d %s", f.lines, f.path)
	}
	for _, f := range files {
		if f.lines > maxLines {
			t.Errorf("%s has %d lines, over %d: split it by what its parts serve", f.path, f.lines, maxLines)
		}
	}
}

// TestAdapterReach measures how far package mcp (its non-test files)
// reaches into the node and the seams, prints the figures with -v, and
// fails past the targets (the node owns each stream's life, the adapter
// keeps the edge; docs/ARCHITECTURE.md):
//   - coordinator identifiers: distinct package-level names of
//     internal/coordinator (types, functions, variables, constants);
//   - node methods: distinct methods called (or taken as values) on a
//     coordinator.Node, and the Node fields reached through;
//   - cluster identifiers: distinct package-level names of
//     internal/cluster outside mcp/backend.go, and the files naming them.
func TestAdapterReach(t *testing.T) {
	const (
		coordPath   = module + "/internal/coordinator"
		clusterPath = module + "/internal/cluster"
	)
	pkgs := goList(t, "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export", "./mcp")
	exports := map[string]string{}
	var self listed
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
		if p.ImportPath == module+"/mcp" {
			self = p
		}
	}
	if self.Dir == "" {
		t.Fatal("go list did not report package mcp")
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(self.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if f := exports[path]; f != "" {
			return os.Open(f)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	if _, err := conf.Check(self.ImportPath, fset, files, info); err != nil {
		t.Fatal("type-checking mcp:", err)
	}

	coordIDs, clusterIDs := set{}, set{}
	clusterFiles := set{}
	for id, obj := range info.Uses {
		if obj.Pkg() == nil || obj.Pkg().Scope().Lookup(obj.Name()) != obj {
			continue // not package-level
		}
		file := filepath.Base(fset.Position(id.Pos()).Filename)
		switch obj.Pkg().Path() {
		case coordPath:
			coordIDs.add(obj.Name())
		case clusterPath:
			if file != "backend.go" {
				clusterIDs.add(obj.Name())
				clusterFiles.add(file)
			}
		}
	}
	nodeMethods, nodeFields := set{}, set{}
	for _, sel := range info.Selections {
		if !isNode(sel.Recv(), coordPath) {
			continue
		}
		switch sel.Kind() {
		case types.MethodVal, types.MethodExpr:
			nodeMethods.add(sel.Obj().Name())
		case types.FieldVal:
			nodeFields.add(sel.Obj().Name())
		}
	}

	getLines := 0
	if b, err := os.ReadFile(filepath.Join(self.Dir, "http_get.go")); err == nil {
		getLines = bytes.Count(b, []byte("\n"))
	}
	t.Logf("package mcp, non-test files:")
	t.Logf("  %3d distinct coordinator identifiers (target: at most 15): %s", len(coordIDs), coordIDs)
	t.Logf("  %3d distinct coordinator.Node methods (target: at most 15): %s", len(nodeMethods), nodeMethods)
	t.Logf("      through the Node fields: %s", nodeFields)
	t.Logf("  %3d distinct internal/cluster identifiers outside backend.go, in %d files (target: none): %s", len(clusterIDs), len(clusterFiles), clusterIDs)
	t.Logf("      in: %s", clusterFiles)
	t.Logf("  %3d lines in mcp/http_get.go (target: under 250)", getLines)
	if len(coordIDs) > 15 {
		t.Errorf("mcp names %d coordinator identifiers, over 15: reach the node through fewer", len(coordIDs))
	}
	if len(nodeMethods) > 15 {
		t.Errorf("mcp calls %d node methods, over 15: let the node do more per call", len(nodeMethods))
	}
	if len(clusterIDs) > 0 {
		t.Errorf("mcp names internal/cluster outside backend.go (%s, in %s): go through the node or backend.go", clusterIDs, clusterFiles)
	}
	if getLines >= 250 {
		t.Errorf("mcp/http_get.go has %d lines: the node serves streams, the adapter keeps the edge", getLines)
	}
}

// isNode reports whether typ is coordinator.Node or a pointer to it.
func isNode(typ types.Type, coordPath string) bool {
	if p, ok := typ.(*types.Pointer); ok {
		typ = p.Elem()
	}
	n, ok := types.Unalias(typ).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == coordPath && n.Obj().Name() == "Node"
}

// set is a set of names, printed sorted.
type set map[string]struct{}

func (s set) add(name string) { s[name] = struct{}{} }

func (s set) String() string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestReach checks the chain search on a graph of its own: the shortest
// chain to each denied package, and none past a denied one.
func TestReach(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	graph := map[string][]string{
		m("a"):      {m("b"), m("c")},
		m("b"):      {m("d")},
		m("c"):      {m("b"), "x.org/y/z"},
		m("d"):      {"x.org/y/z"},
		"x.org/y/z": {"x.org/y/w"},
	}
	got := reach(graph, m("a"), []string{"x.org/y/..."})
	want := [][]string{{"a", "c", "x.org/y/z"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reach = %v, want %v", got, want)
	}
	if got := reach(graph, m("d"), []string{"./a"}); len(got) != 0 {
		t.Errorf("reach upwards = %v, want none", got)
	}
}
