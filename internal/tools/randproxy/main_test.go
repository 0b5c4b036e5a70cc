package main

import (
	"bufio"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// sseBackend answers a POST like a subscriptions/listen stream: an
// acknowledgement at once, then, once it has read the request body, an
// event carrying the body's length, and the end of the stream. With
// readFirst it reads the body before it answers (as mcpcluster does).
func sseBackend(t *testing.T, readFirst bool) *url.URL {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		var body []byte
		var err error
		if readFirst {
			body, err = io.ReadAll(r.Body)
		} else if err = rc.EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: acknowledged\n\n")
		_ = rc.Flush()
		if !readFirst {
			body, err = io.ReadAll(r.Body)
		}
		if err != nil {
			_, _ = io.WriteString(w, "data: body error "+err.Error()+"\n\n")
			return
		}
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "data: body "+strconv.Itoa(len(body))+"\n\n")
	}))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	return u
}

// readEvents returns the data lines of an SSE body until it ends.
func readEvents(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out, sc.Err()
}

// The proxy must not cut a stream whose answer starts before the proxy
// has finished forwarding the request body: the request body is still
// readable after the response headers went out (full duplex). The
// client here sends the second half of its body only once the answer
// has begun, which makes the order certain.
func TestStreamOutlivesRequestBody(t *testing.T) {
	proxy := httptest.NewServer(newProxy([]*url.URL{sseBackend(t, false)}, log.New(io.Discard, "", 0), false))
	defer proxy.Close()

	const half = `{"jsonrpc":"2.0","id":1,`
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A client blocked writing its body notices the deadline only when
	// the body ends.
	context.AfterFunc(ctx, func() { _ = pw.CloseWithError(ctx.Err()) })
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL+"/mcp", pr)
	req.ContentLength = int64(2 * len(half))
	go func() { _, _ = io.WriteString(pw, half) }()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer while the request body was still on its way: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.WriteString(pw, half)
	_ = pw.Close()
	events, err := readEvents(resp.Body)
	want := []string{"acknowledged", "body " + strconv.Itoa(2*len(half))}
	if err != nil || !slices.Equal(events, want) {
		t.Fatalf("stream events %q (read error %v), want %q", events, err, want)
	}
}

// The race as a client meets it: many streams, each answered as soon as
// the backend has read the request; none may end before the backend ends
// it.
func TestStreamsAreNotCut(t *testing.T) {
	proxy := httptest.NewServer(newProxy([]*url.URL{sseBackend(t, true)}, log.New(io.Discard, "", 0), false))
	defer proxy.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`
	want := []string{"acknowledged", "body " + strconv.Itoa(len(body))}
	const streams = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	cut := 0
	sem := make(chan struct{}, 10)
	for range streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := http.Post(proxy.URL+"/mcp", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			events, err := readEvents(resp.Body)
			if err != nil || !slices.Equal(events, want) {
				mu.Lock()
				cut++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if cut > 0 {
		t.Fatalf("%d of %d streams were cut short", cut, streams)
	}
}
