package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDrainDelayServesWhileNotReady: after SIGTERM (here: the run
// context ending) a node with --drain-delay fails /readyz at once but
// still takes new work until the delay has passed; then it refuses new
// connections (a balancer retries those elsewhere, POSTs included)
// instead of answering 503, and exits.
func TestDrainDelayServesWhileNotReady(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const delay = 1500 * time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"--addr", addr, "--metrics-addr", "", "--drain-delay", delay.String(), "--drain-timeout", "2s", "--log-level", "error"},
			strings.NewReader(""), io.Discard, io.Discard)
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status := func(method, path, body string) (int, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := status("GET", "/readyz", ""); code == http.StatusOK {
			break
		}
		select {
		case rc := <-exited:
			t.Fatalf("the node exited at start with status %d", rc)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the node was not ready within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	stop()
	stopped := time.Now()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	time.Sleep(100 * time.Millisecond)
	if code, err := status("GET", "/readyz", ""); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during the delay: %d, %v; want 503", code, err)
	}
	for time.Since(stopped) < delay-300*time.Millisecond {
		if code, err := status("POST", "/mcp", initialize); err != nil || code != http.StatusOK {
			t.Fatalf("initialize %v after SIGTERM, within the delay: %d, %v; want 200", time.Since(stopped).Round(time.Millisecond), code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(delay - time.Since(stopped) + 300*time.Millisecond)
	_, err = status("POST", "/mcp", initialize)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("initialize after the delay: %v; want a refused connection", err)
	}
	select {
	case rc := <-exited:
		if rc != 0 {
			t.Fatalf("exit status %d", rc)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not exit within 5s of its delay")
	}
}
