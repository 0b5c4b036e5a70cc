package redis

import (
	stdflag "flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

var updateScripts = stdflag.Bool("update-scripts", false, "rewrite testdata/scripts.sha1 from the scripts of this package")

// scriptsGolden pins the SHA1 of every script: the name Redis knows a
// script by (EVALSHA), the same on every node that runs the same text.
const scriptsGolden = "testdata/scripts.sha1"

// allScripts lists every Lua script of the package by its variable's
// name. TestScriptsListed keeps it complete.
var allScripts = map[string]*goredis.Script{
	"createScript":          createScript,
	"capScript":             capScript,
	"loadScript":            loadScript,
	"touchManyScript":       touchManyScript,
	"extendScript":          extendScript,
	"setScript":             setScript,
	"endScript":             endScript,
	"subscribeScript":       subscribeScript,
	"unsubscribeScript":     unsubscribeScript,
	"subscribersScript":     subscribersScript,
	"scanScript":            scanScript,
	"countScript":           countScript,
	"ownerScript":           ownerScript,
	"slideStreamsScript":    slideStreamsScript,
	"openScript":            openScript,
	"appendBatchScript":     appendBatchScript,
	"readScript":            readScript,
	"onceScript":            onceScript,
	"heartbeatScript":       heartbeatScript,
	"aliveScript":           aliveScript,
	"membersScript":         membersScript,
	"registrySwapScript":    registrySwapScript,
	"registryToggleScript":  registryToggleScript,
	"claimScript":           claimScript,
	"claimIfScript":         claimIfScript,
	"renewScript":           renewScript,
	"renewManyScript":       renewManyScript,
	"releaseScript":         releaseScript,
	"takeScript":            takeScript,
	"acquireScript":         acquireScript,
	"renewLeaseScript":      renewLeaseScript,
	"readerHeartbeatScript": readerHeartbeatScript,
	"modeScript":            modeScript,
	"taskIndexScript":       taskIndexScript,
	"taskUnindexScript":     taskUnindexScript,
	"taskCreateScript":      taskCreateScript,
	"taskUpdateScript":      taskUpdateScript,
}

// TestScriptHashes compares the SHA1 of every script with
// testdata/scripts.sha1. A script whose text changed gets another SHA1:
// nodes of different releases then run different scripts on the same
// keys during a rolling upgrade, so a change must keep reading and
// writing what the previous release's script reads and writes. Moving a
// script between files, or rewording its Go comment, changes nothing.
// After a deliberate change: go test -run TestScriptHashes -update-scripts.
func TestScriptHashes(t *testing.T) {
	names := make([]string, 0, len(allScripts))
	for name := range allScripts {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("# The SHA1 (EVALSHA) of every Lua script of internal/cluster/redis, by\n")
	b.WriteString("# variable; checked by TestScriptHashes (rewrite: go test -run TestScriptHashes -update-scripts).\n")
	for _, name := range names {
		fmt.Fprintf(&b, "%s %s\n", name, allScripts[name].Hash())
	}
	got := b.String()
	if *updateScripts {
		if err := os.MkdirAll(filepath.Dir(scriptsGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(scriptsGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(scriptsGolden)
	if err != nil {
		t.Fatalf("%v (write it with -update-scripts)", err)
	}
	wantSHA := hashLines(string(want))
	gotSHA := hashLines(got)
	for _, name := range names {
		switch w, ok := wantSHA[name]; {
		case !ok:
			t.Errorf("%s (sha1 %s) is not pinned in %s", name, gotSHA[name], scriptsGolden)
		case w != gotSHA[name]:
			t.Errorf("%s changed: sha1 %s, pinned %s (a node of the previous release runs the pinned text)", name, gotSHA[name], w)
		}
	}
	for name := range wantSHA {
		if _, ok := gotSHA[name]; !ok {
			t.Errorf("%s is pinned in %s but no longer exists", name, scriptsGolden)
		}
	}
}

// hashLines reads "name sha1" lines, skipping comments.
func hashLines(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// TestScriptsListed checks that allScripts lists every package-level
// variable of the package built by script (or goredis.NewScript).
func TestScriptsListed(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if makesScript(v) {
						found[vs.Names[i].Name] = name
					}
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("no script found: the check does not see them")
	}
	for name, file := range found {
		if _, ok := allScripts[name]; !ok {
			t.Errorf("%s (%s) is missing from allScripts", name, file)
		}
	}
	for name := range allScripts {
		if _, ok := found[name]; !ok {
			t.Errorf("allScripts lists %s, which no file declares with script()", name)
		}
	}
}

// makesScript reports whether e is a call of script or goredis.NewScript.
func makesScript(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := c.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "script"
	case *ast.SelectorExpr:
		return fn.Sel.Name == "NewScript"
	}
	return false
}
