package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// A node reaches a TLS Redis with a private CA as an ACL user whose
// password is in a file, presenting a client certificate, under its own
// key prefix: it serves, and every key it writes is under the prefix.
func TestNodeOnTLSRedisWithCredentialFiles(t *testing.T) {
	ca := redistest.NewCA(t, "private CA")
	srv := redistest.StartWith(t, redistest.Options{TLS: &redistest.TLS{CA: ca}})
	acl := "ACL SETUSER mcp on >file-secret ~team-a:* ~{team-a:nodes}:sharded &team-a:* +@all"
	if r, err := srv.Do(acl); err != nil || r != "+OK" {
		t.Fatalf("%s: %q, %v", acl, r, err)
	}
	dir := t.TempDir()
	cert, key := ca.IssueFiles(t, dir, "node")
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, logs := startNode(t, "--state-key", testKey, "--redis-url", srv.URL(), "--redis-prefix", "team-a",
		"--redis-ca-file", ca.File, "--redis-cert-file", cert, "--redis-key-file", key,
		"--redis-username", "mcp", "--redis-password-file", pw, "--redis-pool-size", "4", "--redis-min-idle-conns", "1")
	if !strings.Contains(out.String(), "backend redis") {
		t.Fatalf("node output: %s", out)
	}
	addr := addrIn(t, out.String(), `listening on http://([0-9.:]+)/`)
	if st, body := get(t, "http://"+addr+"/readyz"); st != http.StatusOK {
		t.Fatalf("/readyz: %d %s\n%s", st, body, logs)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	tlsCfg := ca.ClientConfig(t)
	tlsCfg.ServerName = "127.0.0.1"
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), TLSConfig: tlsCfg, Username: "mcp", Password: "file-secret"})
	defer admin.Close()
	keys, err := admin.Keys(t.Context(), "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS: %v, %v", keys, err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "team-a:") && !strings.HasPrefix(k, "{team-a:") {
			t.Errorf("key %q outside the prefix team-a", k)
		}
	}
}

// runFor runs a node with args for d (it keeps retrying an unreachable
// Redis) and returns everything it wrote.
func runFor(t *testing.T, d time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errOut syncBuffer
	run(ctx, append([]string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--drain-timeout", "1s", "--backend-retry-max", "200ms"}, args...),
		strings.NewReader(""), &out, &errOut)
	return out.String() + errOut.String()
}

// A password, in the URL or in the file, is in no line a node writes:
// not at start-up (a password in the URL keeps working), not when Redis
// refuses it, not when Redis is down, not in a configuration error.
func TestRedisPasswordNeverLogged(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Args: []string{"--requirepass", "the-real-one"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret-in-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, secret string
		args         []string
		serves       bool
	}{
		{"password in the URL", "the-real-one", []string{"--redis-url", "redis://:the-real-one@" + srv.Addr()}, true},
		{"wrong password in the URL", "s3cret-in-url", []string{"--redis-url", "redis://:s3cret-in-url@" + srv.Addr()}, false},
		{"user and password in the URL", "s3cret-in-url", []string{"--redis-url", "redis://app:s3cret-in-url@" + srv.Addr() + "/0?dial_timeout=1s"}, false},
		{"Redis down", "s3cret-in-url", []string{"--redis-url", "redis://app:s3cret-in-url@" + down}, false},
		{"wrong password in the file", "s3cret-in-file", []string{"--redis-url", srv.URL(), "--redis-password-file", pw}, false},
		{"both", "s3cret-in-url", []string{"--redis-url", "redis://:s3cret-in-url@" + srv.Addr(), "--redis-password-file", pw}, false},
		{"bad URL", "s3cret-in-url", []string{"--redis-url", "redis://app:s3cret-in-url@" + srv.Addr() + "?nosuch=1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runFor(t, 800*time.Millisecond, append([]string{"--state-key", testKey}, tc.args...)...)
			if got == "" {
				t.Fatal("the node wrote nothing")
			}
			if strings.Contains(got, tc.secret) {
				t.Fatalf("the password is in the output:\n%s", got)
			}
			if serves := strings.Contains(got, "(backend redis"); serves != tc.serves {
				t.Fatalf("serving: %v, want %v:\n%s", serves, tc.serves, got)
			}
			t.Logf("%s", got)
		})
	}
}

// A taken metrics port ends the node with an error naming the setting
// to change.
func TestMetricsPortTakenNamesTheSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errOut syncBuffer
	code := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--metrics-addr", ln.Addr().String()}, strings.NewReader(""), &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "--metrics-addr (MCP_METRICS_ADDR)") || !strings.Contains(errOut.String(), "address already in use") {
		t.Fatalf("exit %d, log %s; want 1 and an error naming --metrics-addr", code, errOut.String())
	}
}
