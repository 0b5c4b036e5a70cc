// Command abuse drives the exhaustion attempts of docs/RELIABILITY.md
// ("Abuse cases") against one running node on loopback and prints what
// the node held to: statuses, goroutines and resident memory read from
// its /metrics before, during and after each attempt.
//
//	go build -o /tmp/mcpnode ./cmd/server
//	/tmp/mcpnode --addr 127.0.0.1:18080 --metrics-addr 127.0.0.1:18081 --body-read-timeout 2s --max-open-streams 100 &
//	cd bench && go run ./cmd/abuse --url http://127.0.0.1:18080/mcp --metrics http://127.0.0.1:18081/metrics
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	target := flag.String("url", "http://127.0.0.1:18080/mcp", "MCP endpoint of the node (loopback only)")
	metrics := flag.String("metrics", "", "its /metrics on the node's --metrics-addr (default: /metrics on the host of --url)")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || !isLoopback(u.Hostname()) {
		fmt.Fprintln(os.Stderr, "abuse: --url must be a loopback address")
		os.Exit(2)
	}
	if *metrics == "" {
		*metrics = u.Scheme + "://" + u.Host + "/metrics"
	}
	a := &abuser{url: *target, host: u.Host, metrics: *metrics, hc: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 512}}}
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"batch of 30000 slow calls, then the socket closed", a.bigBatch},
		{"300 slow calls on 10 sessions, then their connections closed", a.disconnects},
		{"40 concurrent 3.9 MB calls", a.largeBodies},
		{"150 bodies that stall after their headers", a.stalledBodies},
		{"300 GET streams never read", a.openStreams},
	} {
		fmt.Printf("\n## %s\n", c.name)
		c.run()
	}
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

type abuser struct {
	url, host, metrics string
	hc                 *http.Client
}

// gauge reads one metric of the node.
func (a *abuser) gauge(name string) float64 {
	resp, err := a.hc.Get(a.metrics)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return -1
}

func (a *abuser) state() string {
	return fmt.Sprintf("%.0f goroutines, RSS %.0f MB", a.gauge("go_goroutines"), a.gauge("process_resident_memory_bytes")/1e6)
}

// settle closes the client's idle keep-alive connections and waits
// until the node's goroutines are at most base+5.
func (a *abuser) settle(base float64, within time.Duration) time.Duration {
	a.hc.CloseIdleConnections()
	start := time.Now()
	for time.Since(start) < within {
		if g := a.gauge("go_goroutines"); g >= 0 && g <= base+5 {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

func (a *abuser) post(ctx context.Context, session string, body []byte) (int, http.Header, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, nil
}

func (a *abuser) session(version string) string {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"abuse","version":"1"}}}`, version)
	req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := a.hc.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abuse: initialize:", err)
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	n, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	n.Header.Set("Content-Type", "application/json")
	n.Header.Set("Accept", "application/json, text/event-stream")
	n.Header.Set("Mcp-Session-Id", sid)
	if resp, err := a.hc.Do(n); err == nil {
		resp.Body.Close()
	}
	return sid
}

// slowCall is a tools/call that takes 10 s (the demo pack's progress
// tool, one step), padded to about pad bytes.
func slowCall(id, pad int) []byte {
	meta := ""
	if pad > 0 {
		meta = fmt.Sprintf(`,"_meta":{"pad":%q}`, strings.Repeat("p", pad))
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1,"delayMs":10000}%s}}`, id, meta))
}

func describe(status int, h http.Header, b []byte) string {
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &m)
	s := strconv.Itoa(status)
	if ra := h.Get("Retry-After"); ra != "" {
		s += " Retry-After " + ra
	}
	if m.Error != nil {
		s += fmt.Sprintf(" %d %q", m.Error.Code, m.Error.Message)
	}
	return s
}

func (a *abuser) bigBatch() {
	sid := a.session("2025-03-26")
	base := a.gauge("go_goroutines")
	fmt.Println("before:", a.state())
	parts := make([][]byte, 30000)
	for i := range parts {
		parts[i] = slowCall(i+1, 0)
	}
	body := append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']')
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	st, h, b, err := a.post(ctx, sid, body)
	cancel()
	fmt.Printf("batch of %d members, %.1f MB: %s %v\n", len(parts), float64(len(body))/1e6, describe(st, h, b), err)
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _, _ = a.post(ctx, sid, append(append([]byte("["), bytes.Join(parts[:64], []byte(","))...), ']'))
	}()
	time.Sleep(500 * time.Millisecond)
	fmt.Println("a batch of 64 running:", a.state())
	cancel()
	<-done
	fmt.Printf("its socket closed: back to baseline in %v; %s\n", a.settle(base, 10*time.Second), a.state())
}

func (a *abuser) disconnects() {
	// Ten sessions, so that all 300 run (a session's share is 64).
	var sids []string
	for range 10 {
		sids = append(sids, a.session("2025-06-18"))
	}
	base := a.gauge("go_goroutines")
	fmt.Println("before:", a.state())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, _, _ := a.post(ctx, sids[i%len(sids)], slowCall(i+1, 0))
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	time.Sleep(time.Second)
	fmt.Println("running:", a.state())
	cancel()
	wg.Wait()
	fmt.Printf("statuses %v (0: cut by the client); back to baseline in %v; %s\n", statuses, a.settle(base, 10*time.Second), a.state())
}

func (a *abuser) largeBodies() {
	fmt.Println("before:", a.state())
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	peak := 0.0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if r := a.gauge("process_resident_memory_bytes"); r > peak {
					peak = r
				}
			}
		}
	}()
	for i := range 40 {
		sid := a.session("2025-06-18")
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, h, b, _ := a.post(context.Background(), sid, slowCall(i+1, 3900000))
			d := describe(st, h, b)
			if st == http.StatusOK {
				d = "200"
			}
			mu.Lock()
			statuses[d]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	for d, n := range statuses {
		fmt.Printf("%d × %s\n", n, d)
	}
	a.hc.CloseIdleConnections()
	fmt.Printf("peak RSS %.0f MB; after: %s\n", peak/1e6, a.state())
}

func (a *abuser) stalledBodies() {
	sid := a.session("2025-06-18")
	base := a.gauge("go_goroutines")
	fmt.Println("before:", a.state())
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", a.host)
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", a.host, sid)
			_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			st := 0
			if err == nil {
				st = resp.StatusCode
			}
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Println("stalled:", a.state())
	wg.Wait()
	fmt.Printf("statuses %v (0: no answer in 60 s) after %v; back to baseline in %v; %s\n", statuses, time.Since(start).Round(time.Millisecond), a.settle(base, 10*time.Second), a.state())
}

func (a *abuser) openStreams() {
	base := a.gauge("go_goroutines")
	fmt.Println("before:", a.state())
	var conns []net.Conn
	statuses := map[int]int{}
	for range 300 {
		sid := a.session("2025-06-18")
		conn, err := net.Dial("tcp", a.host)
		if err != nil {
			break
		}
		conns = append(conns, conn)
		fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n", a.host, sid)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			statuses[resp.StatusCode]++
		}
	}
	fmt.Printf("statuses %v; open: %s (%.0f over baseline)\n", statuses, a.state(), a.gauge("go_goroutines")-base)
	for _, c := range conns {
		c.Close()
	}
	fmt.Printf("closed: back to baseline in %v; %s\n", a.settle(base, 10*time.Second), a.state())
}
