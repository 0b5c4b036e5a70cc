package mcp_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		opts interface{ Validate() error }
		want []string // the fields named, in order; none: valid
	}{
		{"zero HTTP", &mcp.HTTPOptions{}, nil},
		{"nil HTTP", (*mcp.HTTPOptions)(nil), nil},
		{"default HTTP", ptr(mcp.DefaultHTTPOptions()), nil},
		{"negative body", &mcp.HTTPOptions{MaxBodyBytes: -1}, []string{"mcp: HTTPOptions.MaxBodyBytes: must not be negative"}},
		{"negative duration", &mcp.HTTPOptions{SessionTTL: -time.Second}, []string{"mcp: HTTPOptions.SessionTTL: must not be negative, not -1s"}},
		{"negative cache TTL", &mcp.HTTPOptions{SessionCacheTTL: -time.Second}, []string{"HTTPOptions.SessionCacheTTL"}},
		{"two bad", &mcp.HTTPOptions{MaxEvents: -1, StreamWriteTimeout: -1}, []string{"HTTPOptions.MaxEvents", "HTTPOptions.StreamWriteTimeout"}},
		{"zero server", &mcp.ServerOptions{}, nil},
		{"default server", ptr(mcp.DefaultServerOptions()), nil},
		{"negative page", &mcp.ServerOptions{PageSize: -5}, []string{"mcp: ServerOptions.PageSize: must not be negative, not -5"}},
		{"negative list TTL", &mcp.ServerOptions{ListTTL: -time.Minute}, []string{"ServerOptions.ListTTL"}},
		{"zero stdio", &mcp.StdioOptions{}, nil},
		{"negative line", &mcp.StdioOptions{MaxLineBytes: -1}, []string{"mcp: StdioOptions.MaxLineBytes"}},
		{"negative drain", &mcp.StdioOptions{DrainTimeout: -1}, []string{"StdioOptions.DrainTimeout"}},
		{"negative subscriptions", &mcp.MemoryOptions{MaxSubscriptions: -1}, []string{"mcp: MemoryOptions.MaxSubscriptions"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want errors naming %v", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %q, want %d errors", err, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d: got %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestConstructorsRejectNegativeOptions(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	if h, err := srv.NewHTTPHandler(&mcp.HTTPOptions{MaxBodyBytes: -1}); err == nil || !strings.Contains(err.Error(), "HTTPOptions.MaxBodyBytes") {
		if h != nil {
			h.Close()
		}
		t.Errorf("NewHTTPHandler: got %v, want an error naming HTTPOptions.MaxBodyBytes", err)
	}
	bad := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{RequestTimeout: -1})
	if h, err := bad.NewHTTPHandler(nil); err == nil || !strings.Contains(err.Error(), "ServerOptions.RequestTimeout") {
		if h != nil {
			h.Close()
		}
		t.Errorf("NewHTTPHandler of a server with bad options: got %v, want an error naming ServerOptions.RequestTimeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.ServeStdio(ctx, strings.NewReader(""), &strings.Builder{}, &mcp.StdioOptions{DrainTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "StdioOptions.DrainTimeout") {
		t.Errorf("ServeStdio: got %v, want an error naming StdioOptions.DrainTimeout", err)
	}
	err = bad.ServeStdio(ctx, strings.NewReader(""), &strings.Builder{}, nil)
	if err == nil || !strings.Contains(err.Error(), "ServerOptions.RequestTimeout") {
		t.Errorf("ServeStdio of a server with bad options: got %v, want an error naming ServerOptions.RequestTimeout", err)
	}
	func() {
		defer func() {
			r := recover()
			if e, ok := r.(error); !ok || !strings.Contains(e.Error(), "MemoryOptions.MaxSubscriptions") {
				t.Errorf("NewMemoryBackendWith: recovered %v, want a panic naming MemoryOptions.MaxSubscriptions", r)
			}
		}()
		mcp.NewMemoryBackendWith(mcp.MemoryOptions{MaxSubscriptions: -1})
	}()
}

// The "(default X)" of each option's doc comment is the value the
// Default*Options function gives it, and every option with a default
// documents it.
func TestOptionDocsStateTheDefaults(t *testing.T) {
	docs := fieldDocs(t)
	for name, v := range map[string]any{
		"HTTPOptions":   mcp.DefaultHTTPOptions(),
		"ServerOptions": mcp.DefaultServerOptions(),
		"StdioOptions":  mcp.DefaultStdioOptions(),
	} {
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumField(); i++ {
			field, f := rv.Type().Field(i).Name, rv.Field(i)
			if f.Kind() != reflect.Int && f.Kind() != reflect.Int64 {
				continue
			}
			doc, ok := docs[name+"."+field]
			if !ok {
				t.Fatalf("no doc comment found for %s.%s", name, field)
			}
			m := defaultRE.FindStringSubmatch(doc)
			if f.Int() == 0 {
				if m != nil && m[1] != "0" {
					t.Errorf("%s.%s documents default %q but has none", name, field, m[1])
				}
				continue
			}
			if m == nil {
				t.Errorf("%s.%s has default %v but its doc states none", name, field, f.Interface())
				continue
			}
			got, ok := parseDefault(m[1])
			if !ok {
				t.Errorf("%s.%s: cannot read documented default %q", name, field, m[1])
			} else if got != f.Int() {
				t.Errorf("%s.%s documents default %s, but its default is %v", name, field, m[1], f.Interface())
			}
		}
	}
}

var defaultRE = regexp.MustCompile(`\(default ([^,;:)]+)`)

func parseDefault(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, " MiB"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		return v << 20, err == nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return int64(d), true
	}
	return 0, false
}

// fieldDocs reads the doc comments of the fields of the package's
// struct types, keyed "Type.Field", from the package's source.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fl := range st.Fields.List {
				for _, id := range fl.Names {
					out[ts.Name.Name+"."+id.Name] = strings.Join(strings.Fields(fl.Doc.Text()), " ")
				}
			}
			return false
		})
	}
	return out
}
