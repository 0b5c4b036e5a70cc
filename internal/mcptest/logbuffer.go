package mcptest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// LogBuffer collects what a logger or a process writes, safe for
// concurrent writers and readers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// JSONLines decodes every non-empty line written so far; a line that is
// not a JSON object fails the test.
func (l *LogBuffer) JSONLines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not a JSON object: %q", line)
			continue
		}
		out = append(out, m)
	}
	return out
}
