package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The edge keeps a client's X-Request-Id of a bounded size, makes one
// otherwise, and hands the same id to the next handler and the client.
func TestRequestIDMiddleware(t *testing.T) {
	long := strings.Repeat("x", maxRequestID+1)
	cases := []struct {
		name, in string
		kept     bool
	}{
		{"kept", "rid-42", true},
		{"longest kept", long[:maxRequestID], true},
		{"missing", "", false},
		{"too long", long, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen string
			h := (&HTTPHandler{}).accessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = requestIDFrom(r.Context())
			}))
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			if tc.in != "" {
				r.Header.Set("X-Request-Id", tc.in)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Header().Get("X-Request-Id")
			if got == "" || got != seen {
				t.Fatalf("got response id %q and handler id %q, want the same non-empty id", got, seen)
			}
			if (got == tc.in) != tc.kept {
				t.Fatalf("got id %q for %q, want kept=%t", got, tc.in, tc.kept)
			}
		})
	}
}

// The access log's writer wrapper keeps http.Flusher and Unwrap, so SSE
// events reach the client, and records the status a flush implies.
func TestStatusRecorderFlushes(t *testing.T) {
	inner := httptest.NewRecorder()
	var w http.ResponseWriter = &statusRecorder{ResponseWriter: inner}
	f, ok := w.(http.Flusher)
	if !ok {
		t.Fatal("the wrapper is not an http.Flusher")
	}
	_, _ = w.Write([]byte("data: x\n\n"))
	f.Flush()
	if !inner.Flushed {
		t.Fatal("Flush did not reach the underlying writer")
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		t.Fatalf("ResponseController through the wrapper: %v", err)
	}
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok || u.Unwrap() != inner {
		t.Fatal("Unwrap does not return the underlying writer")
	}
	if got := w.(*statusRecorder).status; got != http.StatusOK {
		t.Fatalf("got status %d, want 200", got)
	}
}
