package examples_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// The cluster's JSON-RPC codes the proxy answers with.
const (
	codeUnavailable = mcp.CodeUnavailable
	codeNodeLost    = mcp.CodeNodeLost
)

// TestProxyContract holds examples/proxy to the balancer contract of the
// README against stand-in nodes: a refused connection is retried on the
// next node with the POST body intact; a request that reached a node and
// got no answer is never sent again (the client gets 502 with -31003);
// with no node reachable the client gets 503 with -31000; and an SSE
// event reaches the client while the node still holds its stream open.
func TestProxyContract(t *testing.T) {
	t.Run("refused connection retried on the next node", func(t *testing.T) {
		var seen atomic.Int32
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Add(1)
			_, _ = io.Copy(w, r.Body)
		}))
		t.Cleanup(ok.Close)
		proxy, url := startProxy(t, "http://"+refusingAddr(t), ok.URL)
		const n = 4
		for i := range n {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
			st, got := post(t, url, body)
			if st != http.StatusOK || got != body {
				t.Fatalf("POST %d through the proxy: %d %q, want 200 with the body echoed", i, st, got)
			}
		}
		if got := seen.Load(); got != n {
			t.Fatalf("the live node got %d requests, want %d", got, n)
		}
		if !strings.Contains(proxy.out.String(), "refused the connection") {
			t.Fatalf("no request met the refusing node:\n%s", proxy.out.String())
		}
	})

	t.Run("a request sent is never sent again", func(t *testing.T) {
		var seen atomic.Int32
		hangUp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			seen.Add(1)
			c, _, err := w.(http.Hijacker).Hijack() // the node dies before answering
			if err == nil {
				_ = c.Close()
			}
		})
		a, b := httptest.NewServer(hangUp), httptest.NewServer(hangUp)
		t.Cleanup(a.Close)
		t.Cleanup(b.Close)
		_, url := startProxy(t, a.URL, b.URL)
		st, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay"}}`)
		if st != http.StatusBadGateway || rpcCode(t, body) != codeNodeLost {
			t.Fatalf("POST to a node that hung up: %d %s, want 502 with %d", st, body, codeNodeLost)
		}
		if got := seen.Load(); got != 1 {
			t.Fatalf("the nodes got the POST %d times, want once", got)
		}
	})

	t.Run("no node reachable", func(t *testing.T) {
		_, url := startProxy(t, "http://"+refusingAddr(t), "http://"+refusingAddr(t))
		st, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if st != http.StatusServiceUnavailable || rpcCode(t, body) != codeUnavailable {
			t.Fatalf("POST with every node refusing: %d %s, want 503 with %d", st, body, codeUnavailable)
		}
	})

	t.Run("events are not buffered", func(t *testing.T) {
		release := make(chan struct{})
		sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: s_1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
			w.(http.Flusher).Flush()
			select { // the stream stays open until the client has the first event
			case <-release:
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}))
		t.Cleanup(sse.Close)
		_, url := startProxy(t, sse.URL)
		resp, err := http.Get(url + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			first <- line
		}()
		select {
		case line := <-first:
			if line != "id: s_1\n" {
				t.Fatalf("first line through the proxy: %q", line)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the first event did not pass the proxy while the stream was open: the response is buffered")
		}
		close(release)
	})
}

// post POSTs body to url's /mcp and returns the status and body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post(url+"/mcp", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST through the proxy: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// rpcCode returns the code of a JSON-RPC error response.
func rpcCode(t *testing.T, body string) int {
	t.Helper()
	var r struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %q", body)
	}
	return r.Error.Code
}
