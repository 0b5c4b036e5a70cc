package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// cuttingServer is a fake MCP server whose progress calls always lose
// their stream after two of four steps, as when the node serving them
// dies. With resumable set, GET + Last-Event-ID replays the rest and the
// response; without, the GET finds nothing (404). Its ping answers 404:
// every session counts as lost at the end.
func cuttingServer(t *testing.T, resumable bool) string {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]json.RawMessage{} // event id of the cut → request id
	sse := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	event := func(w http.ResponseWriter, id, data string) {
		fmt.Fprintf(w, "id: %s\ndata: %s\n\n", id, data)
		w.(http.Flusher).Flush()
	}
	progress := func(token json.RawMessage, n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":4}}`, token, n)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			return
		case http.MethodGet:
			last := r.Header.Get("Last-Event-ID")
			mu.Lock()
			rid, ok := calls[last]
			mu.Unlock()
			if !resumable || !ok {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			token, _, _ := strings.Cut(last, "/")
			sse(w)
			event(w, token+"/3", progress(json.RawMessage(strconv.Quote(token)), 3))
			event(w, token+"/4", progress(json.RawMessage(strconv.Quote(token)), 4))
			event(w, token+"/5", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"done after 4 steps"}]}}`, rid))
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch req.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{},"serverInfo":{"name":"cut","version":"1"}}}`, req.ID, rev20251125)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/call":
			var token string
			_ = json.Unmarshal(req.Params.Meta.Token, &token)
			sse(w)
			event(w, token+"/1", progress(req.Params.Meta.Token, 1))
			event(w, token+"/2", progress(req.Params.Meta.Token, 2))
			mu.Lock()
			calls[token+"/2"] = req.ID
			mu.Unlock()
			panic(http.ErrAbortHandler) // the connection drops
		default:
			http.Error(w, "session not found", http.StatusNotFound)
		}
	})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL + "/mcp"
}

// --resume-cut resumes cut streams (or counts them lost, class
// stream_lost), and --check-sessions counts the sessions the server no
// longer knows.
func TestResumeCutAndCheckSessions(t *testing.T) {
	for _, resumable := range []bool{true, false} {
		t.Run(fmt.Sprintf("resumable=%v", resumable), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			args := []string{"--url", cuttingServer(t, resumable), "--scenario", "progress", "--steps", "4",
				"-c", "2", "--warmup", "0s", "--count", "6", "-d", "20s", "--timeout", "2s",
				"--resume-cut", "--check-sessions", "-q", "--json", out}
			rep, stdout, _ := runReport(t, args, out)
			c := rep.Counters
			if c["streams_cut"] == 0 || c["sessions_lost"] != 2 {
				t.Fatalf("counters %v\n%s", c, stdout.String())
			}
			if resumable {
				if rep.Errors != 0 || rep.Ops == 0 || c["streams_resumed"] != c["streams_cut"] || c["streams_lost"] != 0 {
					t.Fatalf("ops %d, errors %v, counters %v", rep.Ops, rep.ErrorKinds, c)
				}
				return
			}
			if rep.Ops != 0 || rep.Errors == 0 || rep.ErrorClasses["stream_lost"] != rep.Errors || c["streams_lost"] != c["streams_cut"] {
				t.Fatalf("ops %d, errors %d, classes %v, counters %v", rep.Ops, rep.Errors, rep.ErrorClasses, c)
			}
			if !strings.Contains(stdout.String(), "errors by cause:        stream_lost") {
				t.Fatalf("the text report does not show the cause:\n%s", stdout.String())
			}
		})
	}
}
