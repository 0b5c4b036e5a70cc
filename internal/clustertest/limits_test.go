package clustertest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Limits under load, on the real binary: one caller opening sessions
// from several goroutines across every node hits its own limit exactly
// (429, Retry-After, a JSON-RPC error), while another caller still
// works. Callers are client addresses behind a trusted proxy (the test
// client, which sets X-Forwarded-For), or principals with real tokens
// from an OpenID provider; on three nodes on Redis and on one node in
// memory.
func TestCallerLimitsUnderLoad(t *testing.T) {
	t.Parallel()
	const resource = "https://mcp.example.test/mcp"
	p := authtest.Start(t, authtest.Options{
		DefaultResource: resource,
		Clients: []*authtest.Client{
			{ID: "ada", Secret: "ada-secret", Scopes: []string{"mcp"}},
			{ID: "bob", Secret: "bob-secret", Scopes: []string{"mcp"}},
		},
	})
	limits := []string{"--caller-max-sessions", "6", "--trusted-proxies", "127.0.0.1"}
	auth := []string{"--auth-issuer", p.Issuer, "--auth-resource", resource}
	for _, s := range setups {
		for _, mode := range []string{"address", "principal"} {
			t.Run(s.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				opts := s.opts
				opts.Args = append(append([]string(nil), opts.Args...), limits...)
				if mode == "principal" {
					opts.Args = append(opts.Args, auth...)
				}
				c := clustertest.Start(t, opts)
				callers := [2]*mcptest.Client{mcptest.New(t, c.NodeURLs()...), mcptest.New(t, c.NodeURLs()...)}
				for i, who := range []string{"ada", "bob"} {
					if mode == "principal" {
						tok, err := p.ClientCredentials(t.Context(), who, who+"-secret", resource, "mcp")
						if err != nil {
							t.Fatal(err)
						}
						callers[i].Header.Set("Authorization", "Bearer "+tok)
						// The same address: only the principal tells them apart.
						callers[i].Header.Set("X-Forwarded-For", "203.0.113.1")
					} else {
						callers[i].Header.Set("X-Forwarded-For", "203.0.113."+strconv.Itoa(i+1))
					}
				}
				loadSessions(t, callers[0], 6)
				b := callers[1]
				b.URLs = b.URLs[:1]
				b.Initialize(mcp.Version20251125, nil)
				for _, u := range c.NodeURLs() {
					callAt(t, b, u, "ping", nil).Result(t, nil)
				}
			})
		}
	}
}

// loadSessions opens sessions of cl from four goroutines, round robin
// over its nodes, until every goroutine was refused, and checks that
// exactly limit were opened and every refusal is a 429 with Retry-After
// and a JSON-RPC error.
func loadSessions(t *testing.T, cl *mcptest.Client, limit int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "load", "version": "1"},
	}})
	var opened, refused atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 * limit {
				resp, err := cl.PostRaw(context.Background(), cl.URL(), body, nil, nil)
				if err != nil {
					errs <- err.Error()
					return
				}
				if resp.Status == http.StatusOK {
					opened.Add(1)
					continue
				}
				refused.Add(1)
				var m struct {
					Error *struct{ Code int } `json:"error"`
				}
				if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
					json.Unmarshal(resp.Body, &m) != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeUnavailable {
					errs <- "refusal: status " + strconv.Itoa(resp.Status) + " Retry-After " + resp.Header.Get("Retry-After") + " body " + string(resp.Body)
				}
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if opened.Load() != int32(limit) || refused.Load() != 4 {
		t.Fatalf("opened %d sessions with %d refusals, want %d and 4", opened.Load(), refused.Load(), limit)
	}
}

// The request rate holds across three nodes on Redis: a caller sending
// pings round robin over the nodes gets the burst, about one more per
// node before the nodes learn of the debt, then 429s with Retry-After,
// while another caller is served.
func TestCallerRateAcrossNodesOnRedis(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Args: []string{"--caller-rate", "1", "--caller-burst", "10", "--trusted-proxies", "127.0.0.1"}})
	a, b := mcptest.New(t, c.NodeURLs()...), mcptest.New(t, c.NodeURLs()...)
	a.Header.Set("X-Forwarded-For", "203.0.113.1")
	b.Header.Set("X-Forwarded-For", "203.0.113.2")
	a.Initialize(mcp.Version20251125, nil) // two requests of the ten
	admitted, refused := 0, 0
	for range 40 {
		time.Sleep(25 * time.Millisecond)
		resp := callAt(t, a, a.URL(), "ping", nil)
		switch resp.Status {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
			refused++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("ping: got %d (%s)", resp.Status, resp.Body)
		}
	}
	// Eight tokens left after initialize, plus at most a few per node
	// admitted before the shared debt was heard of, plus the refill.
	if admitted < 8 || admitted > 8+3*2+2 {
		t.Fatalf("admitted %d of 40 pings in about 1s at a rate of 1/s and a burst of 10 (8 left), want 8 to 16", admitted)
	}
	b.Initialize(mcp.Version20251125, nil)
	for _, u := range c.NodeURLs() {
		callAt(t, b, u, "ping", nil).Result(t, nil)
	}
}

// On three nodes on Redis, a caller's idle session frees its place when
// it expires, and a DELETE on another node frees it at once.
func TestCallerSessionPlaceFreedOnRedis(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Args: []string{"--caller-max-sessions", "1", "--session-ttl", "1s"}})
	cl := mcptest.New(t, c.NodeURLs()...)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.Version20251125, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "ttl", "version": "1"},
	}})
	initialize := func() *mcptest.Response {
		resp, err := cl.PostRaw(context.Background(), cl.URL(), body, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := initialize()
	if first.Status != http.StatusOK {
		t.Fatalf("first session: got %d", first.Status)
	}
	if resp := initialize(); resp.Status != http.StatusTooManyRequests {
		t.Fatalf("second session: got %d, want 429", resp.Status)
	}
	// DELETE on another node frees the place at once.
	cl.Session = first.Header.Get("Mcp-Session-Id")
	if st := cl.Delete(c.NodeURLs()[2]); st != http.StatusNoContent {
		t.Fatalf("DELETE: got %d", st)
	}
	cl.Session = ""
	if resp := initialize(); resp.Status != http.StatusOK {
		t.Fatalf("after DELETE: got %d, want 200", resp.Status)
	}
	// Left idle, the session expires and its place comes back.
	start := time.Now()
	for {
		resp := initialize()
		if resp.Status == http.StatusOK {
			break
		}
		if time.Since(start) > soon {
			t.Fatalf("the expired session's place was not freed: initialize still gets %d", resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
