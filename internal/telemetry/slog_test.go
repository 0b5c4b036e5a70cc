package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A zerolog line reaches a slog handler as one record: its level, its
// message, and its fields in order as attributes; a level the handler
// does not want is dropped.
func TestFromSlog(t *testing.T) {
	var buf bytes.Buffer
	l := FromSlog(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l.Debug().Str("x", "dropped").Msg("quiet")
	l.Warn().Str("node", "n1").Int("n", 3).Float64("ms", 1.5).Err(errors.New("boom")).
		Dict("sub", zerolog.Dict().Str("k", "v")).Msg("careful")
	line := strings.TrimSpace(buf.String())
	if strings.Contains(line, "dropped") || strings.Count(line, "\n") != 0 {
		t.Fatalf("want one line, got:\n%s", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "WARN", "msg": "careful", "node": "n1", "n": float64(3), "ms": 1.5, "error": "boom", "sub": map[string]any{"k": "v"}}
	for k, v := range want {
		if got, _ := json.Marshal(m[k]); string(got) != mustJSON(v) {
			t.Errorf("%s = %s, want %s (line %s)", k, got, mustJSON(v), line)
		}
	}
	if i, j := strings.Index(line, `"node"`), strings.Index(line, `"n":`); i < 0 || j < i {
		t.Errorf("fields out of order: %s", line)
	}
}

// A slog record reaches zerolog with its attributes, groups as dotted
// keys, and its level.
func TestToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := ToSlog(zerolog.New(&buf).Level(zerolog.InfoLevel))
	l.Debug("quiet")
	l.With("node", "n1").WithGroup("req").Error("failed", "id", 7, "err", errors.New("boom"))
	line := strings.TrimSpace(buf.String())
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil || strings.Contains(line, "quiet") {
		t.Fatalf("%s (%v)", buf.String(), err)
	}
	if m["level"] != "error" || m["message"] != "failed" || m["node"] != "n1" || m["req.id"] != float64(7) || m["req.err"] != "boom" {
		t.Fatalf("line %s", line)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
