package uritemplate

import (
	"errors"
	"strings"
	"testing"
)

// rfcVars are the variables of RFC 6570 section 3.2. Maps expand in
// sorted key order, so the "keys" expectations below list comma, dot,
// semi where the RFC lists semi, dot, comma.
var rfcVars = map[string]any{
	"count":      []string{"one", "two", "three"},
	"dom":        []string{"example", "com"},
	"dub":        "me/too",
	"hello":      "Hello World!",
	"half":       "50%",
	"var":        "value",
	"who":        "fred",
	"base":       "http://example.com/home/",
	"path":       "/foo/bar",
	"list":       []string{"red", "green", "blue"},
	"keys":       map[string]string{"semi": ";", "dot": ".", "comma": ","},
	"v":          "6",
	"x":          "1024",
	"y":          "768",
	"empty":      "",
	"empty_keys": map[string]string{},
	"undef":      nil,
}

func TestExpandRFC6570(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		// 1.2 levels 1-4 (those not repeated below).
		{"{var}", "value"},
		{"{hello}", "Hello%20World%21"},
		{"{+var}", "value"},
		{"{+hello}", "Hello%20World!"},
		{"{+path}/here", "/foo/bar/here"},
		{"here?ref={+path}", "here?ref=/foo/bar"},
		{"X{#var}", "X#value"},
		{"X{#hello}", "X#Hello%20World!"},
		{"map?{x,y}", "map?1024,768"},
		{"{x,hello,y}", "1024,Hello%20World%21,768"},
		{"{+x,hello,y}", "1024,Hello%20World!,768"},
		{"{+path,x}/here", "/foo/bar,1024/here"},
		{"{#x,hello,y}", "#1024,Hello%20World!,768"},
		{"{#path,x}/here", "#/foo/bar,1024/here"},
		{"X{.var}", "X.value"},
		{"X{.x,y}", "X.1024.768"},
		{"{/var}", "/value"},
		{"{/var,x}/here", "/value/1024/here"},
		{"{;x,y}", ";x=1024;y=768"},
		{"{;x,y,empty}", ";x=1024;y=768;empty"},
		{"{?x,y}", "?x=1024&y=768"},
		{"{?x,y,empty}", "?x=1024&y=768&empty="},
		{"?fixed=yes{&x}", "?fixed=yes&x=1024"},
		{"{&x,y,empty}", "&x=1024&y=768&empty="},
		{"{var:3}", "val"},
		{"{var:30}", "value"},
		{"{list}", "red,green,blue"},
		{"{list*}", "red,green,blue"},
		{"{keys}", "comma,%2C,dot,.,semi,%3B"},
		{"{keys*}", "comma=%2C,dot=.,semi=%3B"},
		{"{+path:6}/here", "/foo/b/here"},
		{"{+list}", "red,green,blue"},
		{"{+list*}", "red,green,blue"},
		{"{+keys}", "comma,,,dot,.,semi,;"},
		{"{+keys*}", "comma=,,dot=.,semi=;"},
		{"{#path:6}/here", "#/foo/b/here"},
		{"{#list}", "#red,green,blue"},
		{"{#list*}", "#red,green,blue"},
		{"{#keys}", "#comma,,,dot,.,semi,;"},
		{"{#keys*}", "#comma=,,dot=.,semi=;"},
		{"X{.var:3}", "X.val"},
		{"X{.list}", "X.red,green,blue"},
		{"X{.list*}", "X.red.green.blue"},
		{"X{.keys}", "X.comma,%2C,dot,.,semi,%3B"},
		{"X{.keys*}", "X.comma=%2C.dot=..semi=%3B"},
		{"{/var:1,var}", "/v/value"},
		{"{/list}", "/red,green,blue"},
		{"{/list*}", "/red/green/blue"},
		{"{/list*,path:4}", "/red/green/blue/%2Ffoo"},
		{"{/keys}", "/comma,%2C,dot,.,semi,%3B"},
		{"{/keys*}", "/comma=%2C/dot=./semi=%3B"},
		{"{;hello:5}", ";hello=Hello"},
		{"{;list}", ";list=red,green,blue"},
		{"{;list*}", ";list=red;list=green;list=blue"},
		{"{;keys}", ";keys=comma,%2C,dot,.,semi,%3B"},
		{"{;keys*}", ";comma=%2C;dot=.;semi=%3B"},
		{"{?var:3}", "?var=val"},
		{"{?list}", "?list=red,green,blue"},
		{"{?list*}", "?list=red&list=green&list=blue"},
		{"{?keys}", "?keys=comma,%2C,dot,.,semi,%3B"},
		{"{?keys*}", "?comma=%2C&dot=.&semi=%3B"},
		{"{&var:3}", "&var=val"},
		{"{&list}", "&list=red,green,blue"},
		{"{&list*}", "&list=red&list=green&list=blue"},
		{"{&keys}", "&keys=comma,%2C,dot,.,semi,%3B"},
		{"{&keys*}", "&comma=%2C&dot=.&semi=%3B"},

		// 3.2.1 variable expansion.
		{"{count}", "one,two,three"},
		{"{count*}", "one,two,three"},
		{"{/count}", "/one,two,three"},
		{"{/count*}", "/one/two/three"},
		{"{;count}", ";count=one,two,three"},
		{"{;count*}", ";count=one;count=two;count=three"},
		{"{?count}", "?count=one,two,three"},
		{"{?count*}", "?count=one&count=two&count=three"},
		{"{&count*}", "&count=one&count=two&count=three"},

		// 3.2.2 simple string expansion.
		{"{half}", "50%25"},
		{"O{empty}X", "OX"},
		{"O{undef}X", "OX"},
		{"{x,y}", "1024,768"},
		{"?{x,empty}", "?1024,"},
		{"?{x,undef}", "?1024"},
		{"?{undef,y}", "?768"},

		// 3.2.3 reserved expansion.
		{"{+half}", "50%25"},
		{"{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"},
		{"{+base}index", "http://example.com/home/index"},
		{"O{+empty}X", "OX"},
		{"O{+undef}X", "OX"},
		{"up{+path}{var}/here", "up/foo/barvalue/here"},

		// 3.2.4 fragment expansion.
		{"{#var}", "#value"},
		{"{#hello}", "#Hello%20World!"},
		{"{#half}", "#50%25"},
		{"foo{#empty}", "foo#"},
		{"foo{#undef}", "foo"},

		// 3.2.5 label expansion.
		{"{.who}", ".fred"},
		{"{.who,who}", ".fred.fred"},
		{"{.half,who}", ".50%25.fred"},
		{"www{.dom*}", "www.example.com"},
		{"X{.empty}", "X."},
		{"X{.undef}", "X"},
		{"X{.empty_keys}", "X"},
		{"X{.empty_keys*}", "X"},

		// 3.2.6 path segment expansion.
		{"{/who}", "/fred"},
		{"{/who,who}", "/fred/fred"},
		{"{/half,who}", "/50%25/fred"},
		{"{/who,dub}", "/fred/me%2Ftoo"},
		{"{/var,empty}", "/value/"},
		{"{/var,undef}", "/value"},

		// 3.2.7 path-style parameter expansion.
		{"{;who}", ";who=fred"},
		{"{;half}", ";half=50%25"},
		{"{;empty}", ";empty"},
		{"{;v,empty,who}", ";v=6;empty;who=fred"},
		{"{;v,bar,who}", ";v=6;who=fred"},
		{"{;x,y,undef}", ";x=1024;y=768"},

		// 3.2.8 form-style query expansion.
		{"{?who}", "?who=fred"},
		{"{?half}", "?half=50%25"},
		{"{?x,y,undef}", "?x=1024&y=768"},

		// 3.2.9 form-style query continuation.
		{"{&who}", "&who=fred"},
		{"{&half}", "&half=50%25"},
	}
	for _, tt := range tests {
		tmpl, err := Parse(tt.tmpl)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.tmpl, err)
			continue
		}
		got, err := tmpl.Expand(rfcVars)
		if err != nil {
			t.Errorf("Expand(%q): %v", tt.tmpl, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.tmpl, got, tt.want)
		}
	}
}

func TestExpandMore(t *testing.T) {
	tests := []struct {
		name, tmpl string
		vars       map[string]any
		want       string
	}{
		{"mcp template", "test://template/{id}/data", map[string]any{"id": "a b/c"}, "test://template/a%20b%2Fc/data"},
		{"file path", "file:///{+path}", map[string]any{"path": "home/me/notes.txt"}, "file:///home/me/notes.txt"},
		{"unicode value", "{x}", map[string]any{"x": "é€"}, "%C3%A9%E2%82%AC"},
		{"unicode prefix counts characters", "{x:2}", map[string]any{"x": "é€z"}, "%C3%A9%E2%82%AC"},
		{"reserved keeps triplets", "{+x}", map[string]any{"x": "a%20b%zz%"}, "a%20b%25zz%25"},
		{"simple encodes percent", "{x}", map[string]any{"x": "a%20b"}, "a%2520b"},
		{"literal encoding", "a b<{x}>é", map[string]any{"x": "1"}, "a%20b%3C1%3E%C3%A9"},
		{"literal triplet kept", "a%2Fb{x}", map[string]any{"x": "1"}, "a%2Fb1"},
		{"list with empty item", "{;l*}", map[string]any{"l": []string{"a", ""}}, ";l=a;l"},
		{"query list with empty item", "{?l*}", map[string]any{"l": []string{"", "b"}}, "?l=&l=b"},
		{"map with empty value", "{;m*}", map[string]any{"m": map[string]string{"k": ""}}, ";k"},
		{"query map with empty value", "{?m*}", map[string]any{"m": map[string]string{"k": ""}}, "?k="},
		{"empty list undefined", "X{/l}Y", map[string]any{"l": []string{}}, "XY"},
		{"nil vars", "a{x}b{?y}", nil, "ab"},
		{"dotted name", "{a.b}", map[string]any{"a.b": "v"}, "v"},
		{"pct name", "{?a%20b}", map[string]any{"a%20b": "v"}, "?a%20b=v"},
		{"no expressions", "http://example.com/", nil, "http://example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MustParse(tt.tmpl).Expand(tt.vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct {
		tmpl string
		vars map[string]any
	}{
		{"{x:1}", map[string]any{"x": []string{"a"}}},
		{"{x:1}", map[string]any{"x": map[string]string{"a": "b"}}},
		{"{x}", map[string]any{"x": 1}},
		{"{x}", map[string]any{"x": []any{"a"}}},
	}
	for _, tt := range tests {
		if got, err := MustParse(tt.tmpl).Expand(tt.vars); err == nil {
			t.Errorf("Expand(%q, %v) = %q, want error", tt.tmpl, tt.vars, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		tmpl   string
		offset int
	}{
		{"{", 0},
		{"a{b", 1},
		{"a}b", 1},
		{"{}", 0},
		{"{a{b}}", 2},
		{"{=a}", 1},
		{"{,a}", 1},
		{"{!a}", 1},
		{"{@a}", 1},
		{"{|a}", 1},
		{"{+}", 2},
		{"{a,}", 3},
		{"{a,,b}", 3},
		{"{a b}", 2},
		{"{a-b}", 2},
		{"{.a.}", 3},
		{"{a..b}", 3},
		{"{.}", 2},
		{"{a:}", 2},
		{"{a:0}", 2},
		{"{a:01}", 2},
		{"{a:10000}", 2},
		{"{a:1x}", 4},
		{"{a*:1}", 3},
		{"{a**}", 3},
		{"{a%2}", 2},
		{"{a%zz}", 2},
		{"a%2", 1},
		{"a%g0", 1},
		{"a\nb", 1},
		{"a\x7fb", 1},
		{"ab\xff", 2},
		{"{é}", 1},
	}
	for _, tt := range tests {
		_, err := Parse(tt.tmpl)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error = %v, want *SyntaxError", tt.tmpl, err)
			continue
		}
		if se.Offset != tt.offset {
			t.Errorf("Parse(%q) offset = %d, want %d (%v)", tt.tmpl, se.Offset, tt.offset, err)
		}
		if !strings.HasPrefix(err.Error(), "uritemplate: ") {
			t.Errorf("Parse(%q) error %q lacks the package prefix", tt.tmpl, err)
		}
	}
}

func TestStringAndVars(t *testing.T) {
	tests := []struct {
		tmpl string
		vars []string
	}{
		{"", nil},
		{"test://static", nil},
		{"test://template/{id}/data", []string{"id"}},
		{"{a}{+b}{#c}{.d}{/e}{;f}{?g}{&h}", []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{"{x,y}{/x}{?y,z*,w:3}", []string{"x", "y", "z", "w"}},
	}
	for _, tt := range tests {
		tmpl := MustParse(tt.tmpl)
		if got := tmpl.String(); got != tt.tmpl {
			t.Errorf("String() = %q, want %q", got, tt.tmpl)
		}
		got := tmpl.Vars()
		if strings.Join(got, ",") != strings.Join(tt.vars, ",") {
			t.Errorf("Vars(%q) = %q, want %q", tt.tmpl, got, tt.vars)
		}
		if len(got) > 0 {
			got[0] = "mutated"
			if tmpl.Vars()[0] == "mutated" {
				t.Errorf("Vars(%q) exposes internal state", tt.tmpl)
			}
		}
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a malformed template did not panic")
		}
	}()
	MustParse("{")
}
