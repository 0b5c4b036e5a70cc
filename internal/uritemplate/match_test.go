package uritemplate

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMatch(t *testing.T) {
	type vars = map[string]string
	tests := []struct {
		tmpl, uri string
		want      vars // nil: no match
	}{
		// MCP resource templates.
		{"test://template/{id}/data", "test://template/123/data", vars{"id": "123"}},
		{"test://template/{id}/data", "test://template/a%20b%2Fc/data", vars{"id": "a b/c"}},
		{"test://template/{id}/data", "test://template/a/b/data", nil},
		{"test://template/{id}/data", "test://template/123/data/", nil},
		{"test://template/{id}/data", "xtest://template/123/data", nil},
		{"test://template/{id}/data", "test://template/123", nil},
		{"test://template/{id}/data", "test://template//data", vars{"id": ""}},
		{"file:///{+path}", "file:///home/me/notes.txt", vars{"path": "home/me/notes.txt"}},
		{"file:///{+path}", "file:///a%20b/c?d#e", vars{"path": "a b/c?d#e"}},
		{"file:///{+path}", "file:///", vars{"path": ""}},
		{"file:///{+path}", "file://x", nil},
		{"users://{user}/profile", "users://alice/profile", vars{"user": "alice"}},

		// Simple expansion, several variables.
		{"{x,y}", "1024,768", vars{"x": "1024", "y": "768"}},
		{"{x,y}", "1024", vars{"x": "1024"}},
		{"{x,y}", "", vars{"x": ""}},
		{"?{x,y}", "?", vars{"x": ""}},
		{"{a}-{b}", "x-y-z", vars{"a": "x-y", "b": "z"}},
		{"{id}.json", "a.b.json", vars{"id": "a.b"}},
		{"{x}", "a/b", nil},
		{"{x}", "a?b", nil},
		{"{x}", "a#b", nil},
		{"{x}", "a%2", nil},
		{"{x}", "a%zzb", nil},
		{"{x}", "%e2%82%ac", vars{"x": "€"}},

		// Reserved and fragment.
		{"{+path}/here", "/foo/bar/here", vars{"path": "/foo/bar"}},
		{"here?ref={+path}", "here?ref=/foo/bar", vars{"path": "/foo/bar"}},
		{"{+x,y}", "a/b,c", vars{"x": "a/b", "y": "c"}},
		{"X{#var}", "X#value", vars{"var": "value"}},
		{"X{#var}", "X", vars{}},
		{"X{#var}", "X#", vars{"var": ""}},
		{"{#path,x}/here", "#/foo/bar,1024/here", vars{"path": "/foo/bar", "x": "1024"}},

		// Label and path segments.
		{"X{.var}", "X.value", vars{"var": "value"}},
		{"X{.var}", "X", vars{}},
		{"X{.x,y}", "X.1024.768", vars{"x": "1024", "y": "768"}},
		{"/file{.ext}", "/file.tar.gz", vars{"ext": "tar.gz"}},
		{"{/var,x}/here", "/value/1024/here", vars{"var": "value", "x": "1024"}},
		{"{/var,x}/here", "/value/here", vars{"var": "value"}},
		{"{/var,x}/here", "/here", vars{}},
		{"repo{/owner,name}", "repo/a/b/c", nil},
		{"{/x}", "/a%2Fb", vars{"x": "a/b"}},

		// Path-style parameters.
		{"{;x,y}", ";x=1024;y=768", vars{"x": "1024", "y": "768"}},
		{"{;x,y,empty}", ";x=1024;y=768;empty", vars{"x": "1024", "y": "768", "empty": ""}},
		{"{;v,empty,who}", ";v=6;who=fred", vars{"v": "6", "who": "fred"}},
		{"{;x}", ";xy=1", nil},

		// Form-style query and continuation.
		{"search{?q,lang}", "search?q=cat&lang=en", vars{"q": "cat", "lang": "en"}},
		{"search{?q,lang}", "search?lang=en", vars{"lang": "en"}},
		{"search{?q,lang}", "search", vars{}},
		{"search{?q,lang}", "search?q=", vars{"q": ""}},
		{"search{?q,lang}", "search?q=a%26b", vars{"q": "a&b"}},
		{"search{?q,lang}", "search?lang=en&q=cat", nil}, // order is the template's
		{"search{?q,lang}", "search?q=cat&page=2", nil},
		{"search{?q,lang}", "search?qq=cat", nil},
		{"search{?q,lang}", "search&q=cat", nil},
		{"search{?q,lang}", "search?q=cat?lang=en", nil},
		{"{?q}{?lang}", "?q=cat?lang=en", vars{"q": "cat", "lang": "en"}},
		{"?fixed=yes{&x}", "?fixed=yes&x=1024", vars{"x": "1024"}},
		{"?fixed=yes{&x}", "?fixed=yes", vars{}},
		{"{?who}{&x}", "?who=fred&x=1", vars{"who": "fred", "x": "1"}},

		// Prefix variables yield the prefix.
		{"{var:3}", "val", vars{"var": "val"}},

		// Repeated variables must agree.
		{"{x}/{x}", "a/a", vars{"x": "a"}},
		{"{x}/{x}", "a/b", nil},
		{"{x}{x}", "aa", nil}, // documented limitation

		// Lenient: unencoded reserved characters clients often send.
		{"users://{email}/profile", "users://a@b.com/profile", vars{"email": "a@b.com"}},
		{"t://{id}", "t://a:b", vars{"id": "a:b"}},
		{"t://{id}", "t://a,b", nil},
		{"t://{id}", "t://é", vars{"id": "é"}},
		{"t://{id}", "t://%c3%a9", vars{"id": "é"}},
		{"t://{id}", "t://a b", nil},
		{"search{?q}", "search?q=/a/b?c", vars{"q": "/a/b?c"}},
		{"search{?q}", "search?q=a&b=c", nil},
		{"search{?q}", "search?q", vars{"q": ""}},
		{"{;x}", ";x=", vars{"x": ""}},

		// Literals are compared in their encoded form.
		{"a b/{x}", "a%20b/1", vars{"x": "1"}},
		{"static://x", "static://x", vars{}},
		{"static://x", "static://y", nil},

		// Exploded variables are not supported by Match.
		{"{/list*}", "/a/b", nil},

		// Invalid UTF-8 never matches.
		{"{+x}", "\xff", nil},
	}
	for _, tt := range tests {
		got, ok := MustParse(tt.tmpl).Match(tt.uri)
		if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
			t.Errorf("Match(%q, %q) = %q, %v, want %q", tt.tmpl, tt.uri, got, ok, tt.want)
		}
	}
}

// TestMatchRoundTrip expands templates with assorted values and checks
// that Match recovers variables that expand to the same URI.
func TestMatchRoundTrip(t *testing.T) {
	templates := []string{
		"test://template/{id}/data",
		"file:///{+path}",
		"{x,y}",
		"{+x,y}",
		"{#x,y}",
		"X{.x,y}",
		"{/x,y}/here",
		"{;x,y}",
		"{?x,y}",
		"?a=1{&x,y}",
		"api{/x}{?y}{#z}",
		"{x}{+y}",
		"{;x}{+y}",
		"{x:2}/{y}",
	}
	values := []string{"", "a", "value", "Hello World!", "50%", "/foo/bar", "a,b", "a&b=c", "é€", ":@;", ".", "x=y", "%41"}
	for _, src := range templates {
		tmpl := MustParse(src)
		for _, x := range values {
			for _, y := range []string{"", "1", "a/b", "?q"} {
				in := map[string]any{"x": x, "y": y, "id": x, "path": strings.TrimPrefix(y+x, "/"), "z": y}
				uri, err := tmpl.Expand(in)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := tmpl.Match(uri)
				if !ok {
					t.Errorf("Match(%q, %q) failed (vars %q)", src, uri, in)
					continue
				}
				again, err := tmpl.Expand(anyMap(got))
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRoundTrip(tmpl, uri, again, strings.Contains(x, "%")); err != "" {
					t.Errorf("template %q: %q matched %q, which expands to %q: %s", src, uri, got, again, err)
				}
			}
		}
	}
}

// checkRoundTrip checks the guarantee Match documents for an exact
// expansion uri that re-expands to again, returning a complaint or "".
// Without "+" and "#" expressions the two must be equal; with them, and
// values free of "%" (whose triplets "+" passes through), equal up to
// percent-encoding.
func checkRoundTrip(t *Template, uri, again string, valuesHavePct bool) string {
	reserved := false
	for _, p := range t.parts {
		reserved = reserved || p.expr != nil && p.expr.op.reserved
	}
	switch {
	case !reserved && again != uri:
		return "not equal"
	case reserved && !valuesHavePct && pctDecode(again) != pctDecode(uri):
		return "not equal up to percent-encoding"
	}
	return ""
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// longPrefixBeforeExpr reports whether a variable with a prefix longer
// than the pattern bounds is followed by anything, the shape where Match
// may miss a match (see Match).
func longPrefixBeforeExpr(t *Template) bool {
	for i, p := range t.parts {
		if p.expr == nil {
			continue
		}
		for j, v := range p.expr.vars {
			if v.prefix > maxRepeat && (j < len(p.expr.vars)-1 || i < len(t.parts)-1) {
				return true
			}
		}
	}
	return false
}

// repeatsVar reports whether a variable occurs more than once in t.
func repeatsVar(t *Template) bool {
	n := 0
	for _, p := range t.parts {
		if p.expr != nil {
			n += len(p.expr.vars)
		}
	}
	return n != len(t.vars)
}

func TestMatchConcurrent(t *testing.T) {
	tmpl := MustParse("test://template/{id}/data")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := strings.Repeat("x", i+1)
			got, ok := tmpl.Match("test://template/" + id + "/data")
			if !ok || got["id"] != id {
				t.Errorf("Match = %q, %v", got, ok)
			}
		})
	}
	wg.Wait()
}

func TestMatchLimits(t *testing.T) {
	names := make([]string, MaxMatchVars+1)
	for i := range names {
		names[i] = "v" + strings.Repeat("x", i)
	}
	if _, ok := MustParse("{?" + strings.Join(names, ",") + "}").Match("?v=1"); ok {
		t.Error("template with more than MaxMatchVars variables matched")
	}
	if got, ok := MustParse("{?" + strings.Join(names[:MaxMatchVars], ",") + "}").Match("?v=1&vx=2"); !ok || got["v"] != "1" || got["vx"] != "2" {
		t.Errorf("Match with MaxMatchVars variables = %q, %v", got, ok)
	}
	tmpl := MustParse("file:///{+path}")
	long := "file:///" + strings.Repeat("a", MaxMatchLen-len("file:///"))
	if _, ok := tmpl.Match(long); !ok {
		t.Error("URI of MaxMatchLen bytes did not match")
	}
	if _, ok := tmpl.Match(long + "a"); ok {
		t.Error("URI longer than MaxMatchLen matched")
	}
}

var sinkVars map[string]string

// BenchmarkMatch measures typical templates and the worst case the limits
// allow.
func BenchmarkMatch(b *testing.B) {
	names := make([]string, MaxMatchVars)
	for i := range names {
		names[i] = "v" + strings.Repeat("x", i)
	}
	long := strings.Repeat("a", MaxMatchLen-1)
	tests := []struct{ name, tmpl, uri string }{
		{"simple", "test://template/{id}/data", "test://template/12345/data"},
		{"simple/nomatch", "test://template/{id}/data", "test://other/12345/data"},
		{"path", "file:///{+path}", "file:///home/user/projects/mcpcluster/internal/uritemplate/match.go"},
		{"query", "search://{index}{?q,lang,page}", "search://docs?q=cluster%20mode&lang=en&page=2"},
		{"worst/adjacent", strings.Repeat("{+x}", MaxMatchVars), long + "/"},
		{"worst/list", "{+" + strings.Join(names, ",") + "}", long + "/"},
		{"worst/query", "{?" + strings.Join(names, ",") + "}", "?" + long},
	}
	for _, tt := range tests {
		tmpl := MustParse(tt.tmpl)
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkVars, _ = tmpl.Match(tt.uri)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"test://template/{id}/data", "file:///{+path}", "{var:3}", "{/list*,path:4}",
		"{?x,y,empty}", "{;v,empty,who}", "X{.keys*}", "{#a,b}", "{&x}", "a%20b{x}",
		"{a.b%20c}", "{x:9999}", "{", "}", "{=x}", "é{x}", "{x}{x}",
	} {
		f.Add(s)
	}
	vars := map[string]any{
		"x": "Hello World/é%", "y": "", "id": "a:b", "path": "/a/b", "a": "1",
		"list": []string{"a", "", "b,c"}, "keys": map[string]string{"k": "v", "e": ""},
		"empty": []string{}, "none": nil,
	}
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := Parse(s)
		if err != nil {
			return
		}
		if tmpl.String() != s {
			t.Fatalf("String() = %q, want %q", tmpl.String(), s)
		}
		_, err = tmpl.Expand(vars)
		if err != nil {
			if !strings.Contains(err.Error(), "prefix modifier") {
				t.Fatalf("Expand(%q): unexpected error %v", s, err)
			}
			return
		}
		// Expansion of a template with only string values must be matched
		// back, except when exploded variables make Match decline.
		strs := map[string]any{}
		for _, v := range tmpl.Vars() {
			strs[v] = "v" + v + ":/é"
		}
		uri, err := tmpl.Expand(strs)
		if err != nil {
			t.Fatalf("Expand(%q) with strings: %v", s, err)
		}
		if strings.Contains(s, "*") || repeatsVar(tmpl) || longPrefixBeforeExpr(tmpl) {
			return
		}
		got, ok := tmpl.Match(uri)
		if !ok {
			if len(tmpl.Vars()) > MaxMatchVars || len(uri) > MaxMatchLen {
				return
			}
			t.Fatalf("Match(%q, %q) failed", s, uri)
		}
		again, err := tmpl.Expand(anyMap(got))
		if err != nil {
			t.Fatal(err)
		}
		// The generated values hold their variable's name, which may
		// itself contain percent-triplets.
		namesHavePct := slices.ContainsFunc(tmpl.Vars(), func(v string) bool { return strings.Contains(v, "%") })
		if err := checkRoundTrip(tmpl, uri, again, namesHavePct); err != "" {
			t.Fatalf("template %q: %q matched %q, which expands to %q: %s", s, uri, got, again, err)
		}
	})
}
