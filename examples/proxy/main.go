// Command proxy is a reference reverse proxy in front of mcpcluster
// nodes, meeting the balancer contract of the README ("Behind a load
// balancer"): responses are never buffered (each SSE event is flushed as
// it comes), reads have no deadline (streams stay open as long as the
// node keeps them), a request a node refused to connect is sent to the
// next node, a request that reached a node is never sent again, and the
// client's address goes in X-Forwarded-For. Nodes are taken round robin,
// and each request is logged with the node it went to:
//
//	go run ./examples/proxy -addr 127.0.0.1:8080 http://127.0.0.1:8081 http://127.0.0.1:8082
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// The JSON-RPC codes of the cluster that the proxy answers with
// (mcp.CodeUnavailable and mcp.CodeNodeLost; the proxy needs nothing of
// the module).
const (
	codeUnavailable = -31000 // no node could be reached: nothing ran, retry
	codeNodeLost    = -31003 // the node went away after it got the request: it may have run
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	rr := &roundRobin{}
	for _, arg := range flag.Args() {
		u, err := url.Parse(arg)
		if err != nil || u.Host == "" {
			log.Fatalf("proxy: node %q: want a URL such as http://127.0.0.1:8081", arg)
		}
		rr.nodes = append(rr.nodes, u)
	}
	if len(rr.nodes) == 0 {
		log.Fatal("usage: proxy [-addr host:port] NODE_URL...")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	rr.next = t
	p := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetXForwarded() },
		Transport:     rr,
		FlushInterval: -1,
		ErrorHandler:  answerError,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("proxy: listening on http://%s", ln.Addr())
	// No ReadTimeout or WriteTimeout: either would cut SSE streams.
	log.Fatal((&http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

// roundRobin sends each request to the next node, and on to the node
// after it when the connection is refused: nothing was sent, so even a
// POST is safe to send again. Any other failure is final.
type roundRobin struct {
	nodes []*url.URL
	n     atomic.Uint64
	next  http.RoundTripper
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	body := req.Body
	if body != nil {
		body = io.NopCloser(body) // the transport closes what it is given: keep the body for the next node
	}
	start, k := rr.n.Add(1), uint64(len(rr.nodes))
	var err error
	for i := range k {
		node := rr.nodes[(start+i)%k]
		out := req.Clone(req.Context())
		out.Body, out.URL.Scheme, out.URL.Host = body, node.Scheme, node.Host
		log.Printf("proxy: %s %s -> %s", req.Method, req.URL.Path, node.Host)
		var resp *http.Response
		if resp, err = rr.next.RoundTrip(out); !refused(err) {
			return resp, err
		}
		log.Printf("proxy: %s refused the connection: %v", node.Host, err)
	}
	return nil, err
}

// refused reports whether err is a failure to connect.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answerError answers a request no node answered with a JSON-RPC error,
// as a node would.
func answerError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := http.StatusBadGateway, codeNodeLost, "the node serving this request went away before answering: the request may or may not have run"
	if refused(err) {
		status, code, msg = http.StatusServiceUnavailable, codeUnavailable, "no node could be reached; retry later"
		w.Header().Set("Retry-After", "1")
	}
	log.Printf("proxy: %s %s: %v", r.Method, r.URL.Path, err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%q}}`, code, msg)
}
