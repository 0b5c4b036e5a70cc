package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	"github.com/mcpcluster/mcpcluster/internal/bench"
	"github.com/mcpcluster/mcpcluster/internal/cluster"
	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// Per-caller rate debits across nodes sharing one Redis: the script
// calls per request do not grow with the nodes, and the rate holds for a
// caller spread over them.

// rateNodes starts n nodes on the Redis at url, each with the per-caller
// rate and burst given, their Limiter on the Redis at limURL (so that
// its commands are the limiter's alone).
func rateNodes(t *testing.T, n int, url, limURL string, rate, burst int) []*node {
	t.Helper()
	nodes := make([]*node, n)
	for i := range nodes {
		b := clusterBackend(t, url)
		if limURL != url {
			b.Limiter = clusterBackend(t, limURL).Limiter
		}
		be := backendwrap.Wrap(b).(*mcp.Backend)
		nodes[i] = newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: be, CallerRate: rate, CallerBurst: burst, TrustedProxies: []string{"192.0.2.1"}}})
	}
	return nodes
}

// clusterBackend opens a Redis backend of its own on the Redis at url,
// closed at the end of the test.
func clusterBackend(t *testing.T, url string) *cluster.Backend {
	t.Helper()
	opts, err := clusterredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := clusterredis.New(context.Background(), goredis.NewUniversalClient(opts), clusterredis.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// statelessEcho is a 2026-07-28 tools/call of echo: it needs no
// session, so a node serves it without the store; only its caller's
// rate is debited.
var statelessEcho = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"rate","version":"1"}}}}`)

// echoAs serves a stateless echo from the client at addr (its caller
// key: the nodes trust the recorder's peer as a proxy) on n, in
// process, and returns the status.
func echoAs(n *node, addr string) int {
	bn := &benchNode{h: n.h}
	return bn.post(statelessEcho, map[string]string{"X-Forwarded-For": addr,
		"Mcp-Protocol-Version": mcp.Version20260728, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}).Code
}

// limiterCalls returns the script calls (EVAL, EVALSHA) and bucket
// debits (the HSET each debit runs) the Redis at url has executed.
func limiterCalls(t *testing.T, rdb *goredis.Client) (scripts, debits int64) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	s := bench.ParseCommandStats(bench.ParseInfo(info))
	return s["eval"] + s["evalsha"], s["hset"]
}

// The same requests from the same callers, spread round robin over 1,
// 2, 4 and 8 nodes: the limiter's script calls per request, and its
// bucket debits per request, stay within a quarter of one node's. Each
// node debits a caller once it noted a threshold of it, whatever share
// of the caller's requests it sees, and every caller due in one script.
func TestCallerRateDebitsDoNotGrowWithNodes(t *testing.T) {
	const (
		callers = 8
		rate    = 1 << 20 // far from every caller: the threshold is burst/8
		burst   = 400     // a threshold of 50
	)
	// Whole rounds: every node notes the threshold of every caller the
	// same number of times in the warm-up and in the window measured.
	round := callers * 8 * burst / 8
	warmup, window := 2*round, 6*round
	if raceEnabled {
		window = 3 * round
	}
	srv, lim := redistest.Start(t), redistest.Start(t)
	opts, err := goredis.ParseURL(lim.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	perRequest := map[int][2]float64{}
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(n, "nodes"), func(t *testing.T) {
			nodes := rateNodes(t, n, srv.URL(), lim.URL(), rate, burst)
			send := func(from, to int) {
				for j := from; j < to; j++ {
					// Caller j%callers; each caller's requests go round
					// robin over the nodes. Addresses differ per run: new
					// buckets.
					addr := fmt.Sprintf("198.51.%d.%d", n, j%callers)
					if st := echoAs(nodes[(j/callers)%n], addr); st != http.StatusOK {
						t.Fatalf("echo %d: status %d", j, st)
					}
				}
			}
			send(0, warmup)
			s0, d0 := limiterCalls(t, rdb)
			start := time.Now()
			send(warmup, warmup+window)
			elapsed := time.Since(start)
			s1, d1 := limiterCalls(t, rdb)
			sp, dp := float64(s1-s0)/float64(window), float64(d1-d0)/float64(window)
			perRequest[n] = [2]float64{sp, dp}
			t.Logf("%d nodes: %d requests of %d callers in %v: %d limiter scripts (%.4f a request), %d bucket debits (%.4f a request)",
				n, window, callers, elapsed.Round(time.Millisecond), s1-s0, sp, d1-d0, dp)
		})
	}
	one := perRequest[1]
	if one[0] == 0 || one[1] == 0 {
		t.Fatalf("one node: %v scripts and debits a request, want some", one)
	}
	for _, n := range []int{2, 4, 8} {
		got := perRequest[n]
		if got[0] > 1.25*one[0] || got[1] > 1.25*one[1] {
			t.Errorf("%d nodes: %.4f scripts and %.4f debits a request, one node %.4f and %.4f: want at most a quarter more",
				n, got[0], got[1], one[0], one[1])
		}
	}
}

// A greedy caller sending as fast as it can through four nodes gets at
// most rate·t + burst + the bound of mcp/http_callers.go: per node, two
// thresholds (each at most burst/8). Meanwhile a caller within its rate,
// spread over the same nodes, is never refused.
func TestCallerRateBoundAcrossNodes(t *testing.T) {
	const (
		nodes = 4
		rate  = 200
		burst = 100
		most  = burst / 8 // the largest threshold
		run   = 2 * time.Second
	)
	srv := redistest.Start(t)
	ns := rateNodes(t, nodes, srv.URL(), srv.URL(), rate, burst)
	var admitted, refused, modestRefused, modestSent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 2 * nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch st := echoAs(ns[i%nodes], "203.0.113.1"); st {
				case http.StatusOK:
					admitted.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("greedy echo: status %d", st)
					return
				}
			}
		}()
	}
	// The modest caller: a quarter of the rate, round robin.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / (rate / 4))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			modestSent.Add(1)
			if st := echoAs(ns[i%nodes], "203.0.113.2"); st != http.StatusOK {
				modestRefused.Add(1)
			}
		}
	}()
	time.Sleep(run)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	bound := rate*elapsed + burst + nodes*2*most
	t.Logf("greedy caller: %d admitted, %d refused in %.2fs through %d nodes (rate %d, burst %d): bound %.0f (rate·t + burst = %.0f); modest caller: %d sent, %d refused",
		admitted.Load(), refused.Load(), elapsed, nodes, rate, burst, bound, rate*elapsed+burst, modestSent.Load(), modestRefused.Load())
	if got := float64(admitted.Load()); got > bound {
		t.Errorf("greedy caller admitted %.0f in %.2fs, want at most %.0f", got, elapsed, bound)
	}
	if got, least := float64(admitted.Load()), rate*elapsed*0.9; got < least {
		t.Errorf("greedy caller admitted %.0f in %.2fs, want at least %.0f: held below its rate", got, elapsed, least)
	}
	if refused.Load() == 0 {
		t.Error("the greedy caller was never refused")
	}
	if modestRefused.Load() != 0 {
		t.Errorf("the caller within its rate was refused %d times of %d", modestRefused.Load(), modestSent.Load())
	}
}

// A caller's burst sent over two nodes faster than a debit's round trip
// is admitted whole: a node past two thresholds of the caller unheard
// of by the store waits for the debit under way rather than refuse.
func TestCallerBurstFasterThanDebitsAdmitted(t *testing.T) {
	const burst = 10 // a threshold of one
	srv := redistest.Start(t)
	ns := rateNodes(t, 2, srv.URL(), srv.URL(), 1, burst)
	for i := range 50 {
		addr := fmt.Sprintf("198.51.100.%d", i)
		for j := range burst {
			if st := echoAs(ns[j%2], addr); st != http.StatusOK {
				t.Fatalf("caller %d, request %d of its burst of %d: status %d, want 200", i, j+1, burst, st)
			}
		}
		// Past it, each node admits at most two thresholds before it
		// hears of the debt.
		past := 0
		for j := 0; j < 5 && echoAs(ns[j%2], addr) == http.StatusOK; j++ {
			past++
		}
		if past > 4 {
			t.Fatalf("caller %d: %d requests past its burst admitted, want at most 4", i, past)
		}
	}
}
