package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader on two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func noEnv(string) string { return "" }

func TestBooleanSettingsWorkBareWithValueAndFromEnv(t *testing.T) {
	var bools []setting
	for _, s := range settings() {
		if s.boolean() {
			bools = append(bools, s)
		}
	}
	if len(bools) == 0 {
		t.Fatal("no boolean setting in the table")
	}
	// The value a boolean setting has in a Config, found by the flag.
	value := func(c *Config, name string) bool {
		switch name {
		case "stdio":
			return c.Stdio
		case "access-log":
			return c.AccessLog
		case "caller-limits-off":
			return c.CallerLimitsOff
		case "pprof":
			return c.Pprof
		}
		t.Fatalf("test does not know the field of --%s: add it here", name)
		return false
	}
	for _, s := range bools {
		cases := []struct {
			args []string
			env  map[string]string
			want bool
		}{
			{[]string{"--" + s.flag}, nil, true},
			{[]string{"-" + s.flag}, nil, true},
			{[]string{"--" + s.flag, "--tools", "conformance"}, nil, true},
			{[]string{"--" + s.flag + "=true"}, nil, true},
			{[]string{"--" + s.flag + "=false"}, map[string]string{s.env: "true"}, false},
			{nil, map[string]string{s.env: "true"}, true},
			{nil, map[string]string{s.env: "1"}, true},
			{nil, map[string]string{s.env: "false"}, false},
		}
		for _, tc := range cases {
			c, err := loadConfig(tc.args, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
			if err != nil {
				t.Errorf("%v %v: %v", tc.args, tc.env, err)
				continue
			}
			if got := value(c, s.flag); got != tc.want {
				t.Errorf("%v %v: --%s is %v, want %v", tc.args, tc.env, s.flag, got, tc.want)
			}
		}
		if _, err := loadConfig(nil, func(k string) string { return map[string]string{s.env: "maybe"}[k] }, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), s.env) {
			t.Errorf("%s=maybe: got %v, want an error naming %s", s.env, err, s.env)
		}
	}
}

func TestHelpShowsBooleansAsBooleansAndTheOtherModes(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--help exits %d", code)
	}
	help := out.String()
	for _, s := range settings() {
		if s.boolean() {
			if !strings.Contains(help, "--"+s.flag+"\n") || strings.Contains(help, "--"+s.flag+" value") {
				t.Errorf("--help does not show --%s as a boolean:\n%s", s.flag, help)
			}
		} else if !strings.Contains(help, "--"+s.flag+" value\n") {
			t.Errorf("--help does not show --%s with its value", s.flag)
		}
	}
	for _, want := range []string{"--healthcheck URL", "--version"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %s:\n%s", want, help)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("%v exits %d: %s", args, code, errOut.String())
		}
		if !strings.HasPrefix(out.String(), "mcpcluster server "+release) || !strings.Contains(out.String(), "go1.") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
	old := version
	version = "v9.8.7"
	defer func() { version = old }()
	if v := buildVersion(); !strings.HasPrefix(v, "v9.8.7") {
		t.Errorf("buildVersion with -X main.version=v9.8.7 is %q", v)
	}
}

func TestModeArgs(t *testing.T) {
	cases := []struct {
		args       []string
		mode, arg  string
		recognised bool
	}{
		{[]string{"--healthcheck", "http://h/readyz"}, "healthcheck", "http://h/readyz", true},
		{[]string{"--healthcheck=http://h/readyz"}, "healthcheck", "http://h/readyz", true},
		{[]string{"-healthcheck", "http://h/readyz"}, "healthcheck", "http://h/readyz", true},
		{[]string{"--version"}, "version", "", true},
		{[]string{"--version", "--stdio"}, "", "", false},
		{[]string{"--healthcheck"}, "", "", false},
		{[]string{"version"}, "", "", false},
		{[]string{"--stdio"}, "", "", false},
	}
	for _, tc := range cases {
		mode, arg, ok := modeArgs(tc.args)
		if mode != tc.mode || arg != tc.arg || ok != tc.recognised {
			t.Errorf("%v: got %q %q %v", tc.args, mode, arg, ok)
		}
	}
}

// The README's desktop-client configuration launches the binary with
// "args": ["--stdio"] and pipes one request into it.
func TestStdioFlagAnswersAPipedRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n")
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"--stdio"}, in, &out, &errOut); code != 0 {
		t.Fatalf("server --stdio exits %d: %s", code, errOut.String())
	}
	var resp struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil || resp.ID != 1 || !strings.Contains(string(resp.Result), "hi") {
		t.Fatalf("server --stdio printed %q (%v), want the echo result", out.String(), err)
	}
	if strings.Contains(errOut.String(), `"level":"warn"`) {
		t.Errorf("a stdio node warned: %s", errOut.String())
	}
}

// printf '%s\n' initialize initialized tools/list | server --stdio, run
// back to back: every run answers both requests, in order.
func TestStdioHandshakePipedBackToBack(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"--stdio"}, strings.NewReader(in), &out, &errOut)
		cancel()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","id":1,"result"`) || !strings.HasPrefix(lines[1], `{"jsonrpc":"2.0","id":2,"result":{"tools"`) {
			t.Fatalf("run %d: exit %d, output:\n%s\nstderr:\n%s", i, code, out.String(), errOut.String())
		}
	}
}

func TestRedisURLNeedsAStateKey(t *testing.T) {
	const url = "redis://127.0.0.1:6379"
	_, err := loadConfig([]string{"--redis-url", url}, noEnv, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--state-key") || !strings.Contains(err.Error(), "MCP_STATE_KEY") {
		t.Fatalf("--redis-url without a key: got %v, want a refusal naming the key's settings", err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--redis-url", url}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("run with --redis-url and no key exits %d, want 2: %s", code, errOut.String())
	}

	c, err := loadConfig([]string{"--redis-url", url}, func(k string) string { return map[string]string{"MCP_STATE_KEY": testKey}[k] }, &bytes.Buffer{})
	if err != nil || len(c.stateKeys) != 1 {
		t.Fatalf("MCP_STATE_KEY: got %v, %d keys", err, len(c.stateKeys))
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	other := strings.Repeat("ab", 32)
	if err := os.WriteFile(file, []byte(testKey+"\n"+other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = loadConfig([]string{"--redis-url", url, "--state-key-file", file}, noEnv, &bytes.Buffer{})
	if err != nil || len(c.stateKeys) != 2 || c.stateKeys[0][1] != 1 {
		t.Fatalf("--state-key-file: got %v, %d keys", err, len(c.stateKeys))
	}
	c, err = loadConfig([]string{"--redis-url", url}, func(k string) string { return map[string]string{"MCP_STATE_KEY_FILE": file}[k] }, &bytes.Buffer{})
	if err != nil || len(c.stateKeys) != 2 {
		t.Fatalf("MCP_STATE_KEY_FILE: got %v", err)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not-a-key-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-key-file", bad}, "--state-key-file"},
		{[]string{"--state-key-file", filepath.Join(dir, "missing")}, "--state-key-file"},
		{[]string{"--state-key-file", file, "--state-key", testKey}, "not both"},
		{[]string{"--state-key", "short"}, "--state-key"},
	} {
		_, err := loadConfig(tc.args, noEnv, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		} else if strings.Contains(err.Error(), "not-a-key-secret") {
			t.Errorf("%v: the error echoes the key: %v", tc.args, err)
		}
	}
}

// startNode runs an HTTP node (its MCP and metrics listeners on free
// loopback ports) until the test ends and returns its stdout and stderr.
func startNode(t *testing.T, args ...string) (stdout, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--drain-timeout", "1s"}, args...), strings.NewReader(""), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("node did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "listening on") {
		select {
		case code := <-done:
			t.Fatalf("node exited %d: %s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node did not listen: %s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &out, &errOut
}

func TestSingleMemoryNodeDoesNotWarn(t *testing.T) {
	_, logs := startNode(t)
	if strings.Contains(logs.String(), `"level":"warn"`) {
		t.Fatalf("a single node on the in-memory backend warned:\n%s", logs)
	}
}

func TestHTTPHandlerErrorIsReported(t *testing.T) {
	old := newHTTPHandler
	newHTTPHandler = func(*mcp.Server, *mcp.HTTPOptions) (*mcp.HTTPHandler, error) {
		return nil, errors.New("endpoint refused")
	}
	defer func() { newHTTPHandler = old }()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, strings.NewReader(""), &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "endpoint refused") {
		t.Errorf("the error is not logged: %s", errOut.String())
	}
}
