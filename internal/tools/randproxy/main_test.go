package main

import (
	"bufio"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseBackends(t *testing.T) {
	got, err := parseBackends(" 127.0.0.1:1, http://127.0.0.1:2 ,,https://h:3/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "https://h:3/"}
	if len(got) != len(want) {
		t.Fatalf("got %d backends, want %d", len(got), len(want))
	}
	for i, u := range got {
		if u.String() != want[i] {
			t.Errorf("backend %d = %q, want %q", i, u, want[i])
		}
	}
	for _, bad := range []string{"", " , ", "ftp://x:1", "http://"} {
		if _, err := parseBackends(bad); err == nil {
			t.Errorf("parseBackends(%q): want error", bad)
		}
	}
}

func TestRandomSpreadAndHostPreserved(t *testing.T) {
	const n = 3
	hits := make(chan int, 1000)
	var targets []*url.URL
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != "client.example:1234" {
				t.Errorf("backend saw Host %q, want the client's", r.Host)
			}
			hits <- i
			_, _ = io.WriteString(w, r.Method)
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		targets = append(targets, u)
	}
	proxy := httptest.NewServer(newProxy(targets, log.New(io.Discard, "", 0), false))
	defer proxy.Close()

	const reqs = 150
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete}
	for i := range reqs {
		req, _ := http.NewRequest(methods[i%3], proxy.URL+"/mcp", strings.NewReader("{}"))
		req.Host = "client.example:1234"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != methods[i%3] {
			t.Fatalf("body %q, want %q", body, methods[i%3])
		}
	}
	close(hits)
	count := make([]int, n)
	for i := range hits {
		count[i]++
	}
	for i, c := range count {
		// Expected 50 each; 15 is far outside any plausible random deviation.
		if c < 15 {
			t.Errorf("backend %d got %d of %d requests: not spread uniformly (%v)", i, c, reqs, count)
		}
	}
}

func TestSSEIsNotBuffered(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "id: 1\ndata: first\n\n")
		w.(http.Flusher).Flush()
		<-release // hold the stream open until the client saw the first event
		_, _ = io.WriteString(w, "id: 2\ndata: second\n\n")
	}))
	defer backend.Close()
	defer close(release)
	u, _ := url.Parse(backend.URL)
	proxy := httptest.NewServer(newProxy([]*url.URL{u}, log.New(io.Discard, "", 0), false))
	defer proxy.Close()

	resp, err := http.Get(proxy.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l := <-lines:
			if l == "data: first" {
				return
			}
		case <-deadline:
			t.Fatal("first SSE event did not arrive while the stream stayed open: proxy buffers")
		}
	}
}

func TestBackendDownIs502(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	proxy := httptest.NewServer(newProxy([]*url.URL{u}, log.New(io.Discard, "", 0), false))
	defer proxy.Close()
	resp, err := http.Post(proxy.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
}
