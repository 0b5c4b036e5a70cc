package libcompare

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	gjs "github.com/google/jsonschema-go/jsonschema"
	yuri "github.com/yosida95/uritemplate/v3"

	ours "github.com/mcpcluster/mcpcluster/internal/jsonschema"
	ourt "github.com/mcpcluster/mcpcluster/internal/uritemplate"
)

type Address struct {
	Street string `json:"street" jsonschema:"street and number"`
	Zip    string `json:"zip" jsonschema:"postal code"`
}

type SearchIn struct {
	Query   string            `json:"query" jsonschema:"what to search for"`
	Limit   int               `json:"limit,omitempty" jsonschema:"at most this many results"`
	Tags    []string          `json:"tags,omitempty"`
	Since   *time.Time        `json:"since,omitempty"`
	Address Address           `json:"address"`
	Extra   map[string]string `json:"extra,omitempty"`
	Score   float64           `json:"score"`
}

type AddIn struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

var sink any

func BenchmarkInfer(b *testing.B) {
	for _, tc := range []struct {
		name string
		t    reflect.Type
	}{{"add", reflect.TypeFor[AddIn]()}, {"search", reflect.TypeFor[SearchIn]()}} {
		b.Run("case="+tc.name+"/impl=ours", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := ours.For(tc.t)
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := json.Marshal(m)
				s, err := ours.Compile(raw)
				if err != nil {
					b.Fatal(err)
				}
				sink = s
			}
		})
		b.Run("case="+tc.name+"/impl=lib", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := gjs.ForType(tc.t, nil)
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := json.Marshal(s)
				sink = raw
				r, err := s.Resolve(nil)
				if err != nil {
					b.Fatal(err)
				}
				sink = r
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	m, _ := ours.For(reflect.TypeFor[SearchIn]())
	raw, _ := json.Marshal(m)
	o, err := ours.Compile(raw)
	if err != nil {
		b.Fatal(err)
	}
	var ls gjs.Schema
	if err := json.Unmarshal(raw, &ls); err != nil {
		b.Fatal(err)
	}
	lr, err := ls.Resolve(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, args string }{
		{"valid", `{"query":"cluster mode","limit":10,"tags":["a","b","c"],"address":{"street":"12 St James's Square","zip":"12345"},"extra":{"k":"v"},"score":0.5}`},
		{"invalid", `{"query":1,"limit":"x","address":{"zip":"1"},"bogus":true}`},
	} {
		args := []byte(tc.args)
		b.Run("case="+tc.name+"/impl=ours", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = o.ValidateJSON(args)
			}
		})
		b.Run("case="+tc.name+"/impl=lib", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(args, &v); err != nil {
					b.Fatal(err)
				}
				sink = lr.Validate(v)
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, tc := range []struct{ name, tmpl, uri string }{
		{"simple", "test://template/{id}/data", "test://template/12345/data"},
		{"simple-nomatch", "test://template/{id}/data", "test://other/12345/data"},
		{"path", "file:///{+path}", "file:///home/user/projects/mcpcluster/internal/uritemplate/match.go"},
		{"query", "search://{index}{?q,lang,page}", "search://docs?q=cluster%20mode&lang=en&page=2"},
		{"path-8KiB", "file:///{+path}", "file:///" + strings.Repeat("a/", 4000)},
	} {
		ot := ourt.MustParse(tc.tmpl)
		yt := yuri.MustNew(tc.tmpl)
		if _, ok := ot.Match(tc.uri); !ok && !strings.Contains(tc.name, "nomatch") {
			b.Fatal("ours: no match")
		}
		b.Run("case="+tc.name+"/impl=ours", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = ot.Match(tc.uri)
			}
		})
		b.Run("case="+tc.name+"/impl=lib", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := yt.Match(tc.uri)
				// what the server needs: a map of names to strings
				m := make(map[string]string, len(v))
				for k, x := range v {
					m[k] = x.String()
				}
				sink = m
			}
		})
	}
}
