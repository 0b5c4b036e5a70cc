package telemetry

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Durations in logs have one unit: no code of the module logs one with
// zerolog's Dur (whose unit is a process-wide setting) or as a
// time.Duration string; they go through Ms into a *_ms field.
func TestLogDurationsInMilliseconds(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bad := regexp.MustCompile(`\.(Dur|Stringer)\("[a-z_]*(duration|timeout|grace|elapsed|took|latency|wait)[a-z_]*"`)
	msField := regexp.MustCompile(`\.Float64\("([a-z_]*)", Ms\(|\.Float64\("([a-z_]*)", telemetry\.Ms\(`)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		src := string(b)
		if strings.Contains(src, `.Dur("`) {
			t.Errorf("%s logs a duration with zerolog's Dur: use Float64(\"<name>_ms\", telemetry.Ms(d))", path)
		}
		if m := bad.FindString(src); m != "" {
			t.Errorf("%s logs a duration without its unit: %s", path, m)
		}
		for _, m := range msField.FindAllStringSubmatch(src, -1) {
			if name := m[1] + m[2]; !strings.HasSuffix(name, "_ms") {
				t.Errorf("%s logs milliseconds in field %q, whose name does not end in _ms", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d Go files checked under %s", checked, root)
	}
	if Ms(1500*time.Microsecond) != 1.5 {
		t.Fatalf("Ms(1.5ms) = %v", Ms(1500*time.Microsecond))
	}
}

// A session tag tells sessions apart without containing the id.
func TestSessionTag(t *testing.T) {
	a, b := SessionTag("session-a"), SessionTag("session-b")
	if len(a) != 12 || a == b || strings.Contains(a, "session") || SessionTag("session-a") != a || SessionTag("") != "" {
		t.Fatalf("tags %q and %q", a, b)
	}
}
