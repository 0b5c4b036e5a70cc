package bench

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

func TestParseCommandStats(t *testing.T) {
	info := ParseInfo("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=75,usec_per_call=6.25,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_INFO:calls=3,usec=74\r\n\r\n")
	got := ParseCommandStats(info)
	want := map[string]int64{"evalsha": 12, "client|setinfo": 2, "info": 3}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	d := CommandDelta(map[string]int64{"evalsha": 2, "get": 5, "info": 1}, got)
	if d["evalsha"] != 10 || d["client|setinfo"] != 2 || len(d) != 2 {
		t.Fatalf("delta = %v, want evalsha 10 and client|setinfo 2 (info dropped, get unchanged)", d)
	}
	per, sum := PerOp(d, 4)
	if per["evalsha"] != 2.5 || sum != 3 {
		t.Fatalf("per op = %v (sum %v), want evalsha 2.5, sum 3", per, sum)
	}
}

func TestParseMonitorLine(t *testing.T) {
	tests := []struct {
		line, client, cmd string
		ok                bool
	}{
		{`+1700000000.123456 [0 127.0.0.1:53422] "EVALSHA" "abc" "1"`, "127.0.0.1:53422", "evalsha", true},
		{`1700000000.123457 [0 lua] "hset" "k" "f" "v"`, "lua", "hset", true},
		{`+1700000000.123458 [3 unix:/tmp/r.sock] "publish" "c" "m"`, "unix:/tmp/r.sock", "publish", true},
		{`+OK`, "", "", false},
		{`+1700000000.1 [0 1.2.3.4:5]`, "", "", false},
	}
	for _, tt := range tests {
		client, cmd, ok := ParseMonitorLine(tt.line)
		if client != tt.client || cmd != tt.cmd || ok != tt.ok {
			t.Errorf("ParseMonitorLine(%q) = %q, %q, %v; want %q, %q, %v", tt.line, client, cmd, ok, tt.client, tt.cmd, tt.ok)
		}
	}
}

// rawCommand sends one command on a fresh connection and reads its reply.
func rawCommand(t *testing.T, addr string, args ...string) any {
	t.Helper()
	p, err := DialRedis(t.Context(), "redis://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Do(t.Context(), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

func TestRedisProbeAgainstRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	p, err := DialRedis(ctx, "redis://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	before, err := p.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mon, err := StartMonitor(ctx, "redis://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	mon.Begin()
	rawCommand(t, srv.Addr(), "SET", "a", "1")
	if got := rawCommand(t, srv.Addr(), "GET", "a"); got != "1" {
		t.Fatalf("GET a = %v, want 1", got)
	}
	// One round trip that runs three commands on the server.
	rawCommand(t, srv.Addr(), "EVAL", "redis.call('SET','b','2'); redis.call('GET','b'); return redis.call('INCR','c')", "0")
	client, script, err := mon.End(200 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if client["set"] != 1 || client["get"] != 1 || client["eval"] != 1 {
		t.Fatalf("client commands = %v, want set, get and eval once each", client)
	}
	if script["set"] != 1 || script["get"] != 1 || script["incr"] != 1 {
		t.Fatalf("script commands = %v, want set, get and incr once each", script)
	}

	after, err := p.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := CommandDelta(before, after)
	// commandstats counts the commands a script ran too.
	if d["set"] != 2 || d["get"] != 2 || d["eval"] != 1 || d["incr"] != 1 {
		t.Fatalf("commandstats delta = %v, want set 2, get 2, eval 1, incr 1", d)
	}
	n, err := p.ConnectedClients(ctx)
	if err != nil || n < 2 {
		t.Fatalf("ConnectedClients = %d, %v; want ≥ 2 (probe and monitor)", n, err)
	}
	if _, err := p.Do(ctx, "NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: got %v, want an error reply", err)
	}
	// The connection is still usable after an error reply.
	if r, err := p.Do(ctx, "PING"); err != nil || r != "PONG" {
		t.Fatalf("PING = %v, %v", r, err)
	}
}

func TestReadReplyShapes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	p := &RedisProbe{conn: a, rd: bufio.NewReader(a)}
	go func() {
		buf := make([]byte, 1024)
		_, _ = b.Read(buf)
		_, _ = b.Write([]byte("*4\r\n:42\r\n$-1\r\n$5\r\nhello\r\n*1\r\n+OK\r\n"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := p.Do(ctx, "X")
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := r.([]any)
	if !ok || len(arr) != 4 || arr[0] != int64(42) || arr[1] != nil || arr[2] != "hello" {
		t.Fatalf("got %#v", r)
	}
	if inner, ok := arr[3].([]any); !ok || len(inner) != 1 || inner[0] != "OK" {
		t.Fatalf("nested array: got %#v", arr[3])
	}
}
