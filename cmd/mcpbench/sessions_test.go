package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// sessionWatch serves the demo pack and watches what the clients do
// with their sessions: initialize and DELETE requests, request ids per
// session (repeated ones), and requests in flight per session.
type sessionWatch struct {
	mu         sync.Mutex
	inits      int
	deletes    int
	ids        map[string]map[string]bool // session → request ids seen
	dups       []string
	inFlight   map[string]int
	maxFlight  int
	sessionIDs map[string]bool
}

func startWatchedNode(t *testing.T) (string, *sessionWatch) {
	t.Helper()
	sw := &sessionWatch{ids: map[string]map[string]bool{}, inFlight: map[string]int{}, sessionIDs: map[string]bool{}}
	url := startNodeWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sid := r.Header.Get("Mcp-Session-Id")
			switch r.Method {
			case http.MethodDelete:
				sw.mu.Lock()
				sw.deletes++
				sw.mu.Unlock()
			case http.MethodPost:
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				msg, err := jsonrpc.Decode(body)
				if err == nil && msg.Kind() == jsonrpc.KindRequest {
					sw.mu.Lock()
					if msg.Method == "initialize" {
						sw.inits++
					} else {
						sw.sessionIDs[sid] = true
						id := msg.ID.Key()
						if sw.ids[sid] == nil {
							sw.ids[sid] = map[string]bool{}
						}
						if sw.ids[sid][id] {
							sw.dups = append(sw.dups, sid+"/"+id)
						}
						sw.ids[sid][id] = true
						sw.inFlight[sid]++
						sw.maxFlight = max(sw.maxFlight, sw.inFlight[sid])
					}
					sw.mu.Unlock()
					if msg.Method != "initialize" {
						defer func() {
							sw.mu.Lock()
							sw.inFlight[sid]--
							sw.mu.Unlock()
						}()
					}
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	return url, sw
}

// With --sessions the workers share that many sessions: only those are
// opened and ended, every call goes on one of them, request ids stay
// unique within each, and calls overlap on a session.
func TestSharedSessions(t *testing.T) {
	for _, tc := range []struct {
		scenario       string
		sessions, c    int
		count          int
		wantOverlapped bool
	}{
		{"echo", 1, 8, 40, false},
		// 25 ms calls, three per session at a time: they overlap.
		{"progress", 2, 6, 12, true},
		{"sampling", 1, 4, 12, false},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			url, sw := startWatchedNode(t)
			out := filepath.Join(t.TempDir(), "report.json")
			args := []string{"--url", url, "--scenario", tc.scenario, "--sessions", fmt.Sprint(tc.sessions), "-c", fmt.Sprint(tc.c),
				"--warmup", "0", "--count", fmt.Sprint(tc.count), "-d", "30s", "--steps", "5", "--delay-ms", "5", "--settle", "10ms", "-q", "--json", out}
			rep, stdout, _ := runReport(t, args, out)
			if rep.Ops != int64(tc.count) || rep.Errors != 0 || len(rep.SetupErrors) != 0 {
				t.Fatalf("%d ops, errors %v, setup errors %v\n%s", rep.Ops, rep.ErrorKinds, rep.SetupErrors, stdout.String())
			}
			if got := rep.Settings["sessions"]; got != float64(tc.sessions) {
				t.Errorf("report settings: sessions %v, want %d", got, tc.sessions)
			}
			if !strings.Contains(stdout.String(), fmt.Sprintf("sharing %d session(s)", tc.sessions)) {
				t.Errorf("the text report does not say the sessions are shared:\n%s", stdout.String())
			}
			if n := rep.Counters["sampling_unrouted"]; n != 0 {
				t.Errorf("%d sampling requests reached no operation", n)
			}
			sw.mu.Lock()
			defer sw.mu.Unlock()
			if sw.inits != tc.sessions || sw.deletes != tc.sessions || len(sw.sessionIDs) != tc.sessions {
				t.Errorf("%d initialize, %d DELETE, requests on %d sessions; want %d of each", sw.inits, sw.deletes, len(sw.sessionIDs), tc.sessions)
			}
			if len(sw.dups) > 0 {
				t.Errorf("request ids repeated within a session: %v", sw.dups)
			}
			if tc.wantOverlapped && sw.maxFlight < 2 {
				t.Errorf("at most %d request(s) in flight on a session, want several", sw.maxFlight)
			}
		})
	}
}

func TestSessionsFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string // substring of the error; "" for none
	}{
		{[]string{"--sessions", "1", "-c", "32"}, ""},
		{[]string{"--sessions", "4", "-c", "32", "--scenario", "sampling", "--revision", rev20250326}, ""},
		{[]string{"--sessions", "1", "--scenario", "progress", "--revision", rev20250618}, ""},
		{[]string{"--sessions", "1", "--revision", rev20260728}, "has no sessions"},
		{[]string{"--sessions", "1", "--scenario", "sampling", "--revision", rev20260728}, "has no sessions"},
		{[]string{"--sessions", "1", "--scenario", "churn"}, "not churn"},
		{[]string{"--sessions", "1", "--scenario", "fanout"}, "not fanout"},
		{[]string{"--sessions", "1", "--scenario", "resume"}, "not resume"},
		{[]string{"--sessions", "1", "--scenario", "idle"}, "not idle"},
		{[]string{"--sessions", "1", "--scenario", "tasks"}, "not tasks"},
		{[]string{"--sessions", "-1"}, "--sessions"},
		{[]string{"--sessions", "33", "-c", "32"}, "at most one per worker"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--sessions")):
			t.Errorf("%v: got error %v, want one about --sessions mentioning %q", tt.args, err, tt.want)
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"-sessions", "--sessions 1 -c 32"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// On a shared session a server request reaches the operation its tag
// names, whichever stream it came on; one for no waiting operation is
// not delivered, and the end of the GET stream closes the waiting
// operations' channels.
func TestSharedSessionRouting(t *testing.T) {
	req := func(prompt string) incoming {
		m, err := jsonrpc.Request(jsonrpc.IntID(1), "sampling/createMessage", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": prompt}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return incoming{msg: m}
	}
	if got := opTag(req("What is the answer? " + tagPrefix + "17]").msg.Params); got != "17" {
		t.Fatalf("opTag: %q, want 17", got)
	}
	if got := opTag(req("What is the answer?").msg.Params); got != "" {
		t.Fatalf("opTag of an untagged prompt: %q", got)
	}
	sh := &sharedSession{}
	a, b := sh.register("1"), sh.register("2")
	if !sh.route(req("x " + tagPrefix + "2]")) {
		t.Fatal("a request for a waiting operation was not routed")
	}
	select {
	case <-b:
	default:
		t.Fatal("operation 2 did not get its request")
	}
	if len(a) != 0 {
		t.Fatal("operation 1 got another's request")
	}
	if sh.route(req("x " + tagPrefix + "3]")) {
		t.Fatal("a request for no operation was routed")
	}
	sh.unregister("2")
	if sh.route(req("x " + tagPrefix + "2]")) {
		t.Fatal("a request for a finished operation was routed")
	}
	sh.endGet()
	if _, ok := <-a; ok {
		t.Fatal("the end of the GET stream did not close the waiting operation's channel")
	}
	if _, ok := <-sh.register("4"); ok {
		t.Fatal("registering after the end of the GET stream gives an open channel")
	}
}
