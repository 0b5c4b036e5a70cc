package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"status", &StatusError{Code: 503}, "http_503"},
		{"wrapped status", fmt.Errorf("call: %w", &StatusError{Code: 404}), "http_404"},
		{"rpc", &RPCError{Code: -32603, Message: "boom"}, "rpc_-32603"},
		{"kind", Errorf("missing_progress", "got %d of %d", 3, 10), "missing_progress"},
		{"kind wrapping a timeout keeps its kind", &KindError{Kind: "fanout_timeout", Err: context.DeadlineExceeded}, "fanout_timeout"},
		{"context deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), "timeout"},
		{"canceled", context.Canceled, "canceled"},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "conn_refused"},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, "conn_reset"},
		{"pipe", &net.OpError{Op: "write", Err: syscall.EPIPE}, "broken_pipe"},
		{"ports", &net.OpError{Op: "dial", Err: syscall.EADDRNOTAVAIL}, "addr_not_avail"},
		{"fds", &net.OpError{Op: "dial", Err: syscall.EMFILE}, "too_many_files"},
		{"eof", io.ErrUnexpectedEOF, "eof"},
		{"other", errors.New("something"), "other"},
	}
	for _, tt := range tests {
		if got := Kind(tt.err); got != tt.want {
			t.Errorf("%s: Kind(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}

// A real client timeout is classified as a timeout.
func TestKindHTTPClientTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			time.Sleep(500 * time.Millisecond)
			c.Close()
		}
	}()
	cl := &http.Client{Timeout: 50 * time.Millisecond}
	_, err = cl.Get("http://" + ln.Addr().String())
	if got := Kind(err); got != "timeout" {
		t.Fatalf("Kind(%v) = %q, want timeout", err, got)
	}
}

func TestErrorsCounting(t *testing.T) {
	var e Errors
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				e.Add(&StatusError{Code: 503, Body: "busy"})
				if j%10 == 0 {
					e.Add(Errorf("bad_result", "got %q", strings.Repeat("x", 1000)))
				}
			}
		}()
	}
	wg.Wait()
	e.Add(nil)
	if got := e.Total(); got != 880 {
		t.Fatalf("Total = %d, want 880", got)
	}
	snap := e.Snapshot()
	if snap["http_503"].Count != 800 || snap["bad_result"].Count != 80 {
		t.Fatalf("counts = %+v, want http_503 800 and bad_result 80", snap)
	}
	if ex := snap["http_503"].Example; ex != "HTTP 503: busy" {
		t.Fatalf("example = %q", ex)
	}
	if ex := snap["bad_result"].Example; len(ex) > maxExample+len("…") {
		t.Fatalf("example not truncated: %d bytes", len(ex))
	}
	if got := SortedKinds(snap); len(got) != 2 || got[0] != "http_503" {
		t.Fatalf("SortedKinds = %v, want http_503 first", got)
	}
	e.Reset()
	if e.Total() != 0 || len(e.Snapshot()) != 0 {
		t.Fatalf("Reset left counts behind")
	}
}

func TestClass(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"404", fmt.Errorf("call: %w", &StatusError{Code: 404, Body: "session not found"}), "session_not_found"},
		{"400", &StatusError{Code: 400}, "bad_request"},
		{"proxy without a node", &StatusError{Code: 502}, "node_lost"},
		{"other status", &StatusError{Code: 503}, "http_error"},
		{"node died", &RPCError{Code: -31003, Message: "the node went away"}, "node_lost"},
		{"rpc", &RPCError{Code: -32603}, "rpc_error"},
		{"cut", io.ErrUnexpectedEOF, "node_lost"},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, "node_lost"},
		{"timeout", context.DeadlineExceeded, "timeout"},
		{"kind", Errorf("missing_progress", "got 3"), "missing_progress"},
		{"marked", fmt.Errorf("op: %w", &ClassError{Class: "reply_not_delivered", Err: &StatusError{Code: 404}}), "reply_not_delivered"},
	}
	for _, tt := range tests {
		if got := Class(tt.err); got != tt.want {
			t.Errorf("%s: Class(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
	// A class does not change the kind.
	if got := Kind(&ClassError{Class: "reply_not_delivered", Err: &StatusError{Code: 404}}); got != "http_404" {
		t.Errorf("Kind of a marked 404 = %q", got)
	}
	var e Errors
	e.Add(&StatusError{Code: 404})
	e.Add(&StatusError{Code: 404})
	e.Add(context.DeadlineExceeded)
	if got := e.Classes(); got["session_not_found"] != 2 || got["timeout"] != 1 || len(got) != 2 {
		t.Errorf("Classes() = %v", got)
	}
	e.Reset()
	if got := e.Classes(); len(got) != 0 {
		t.Errorf("after Reset, Classes() = %v", got)
	}
}
