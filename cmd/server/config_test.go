package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CONFIGURATION.md")

// configurationDoc renders the settings table.
func configurationDoc() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Every setting of `cmd/server` is a flag and an environment variable; a flag wins over\n")
	b.WriteString("the environment. This table is generated from the settings table in\n")
	b.WriteString("`cmd/server/config.go` (`go test ./cmd/server -update`). Library users set the same\n")
	b.WriteString("bounds through `mcp.ServerOptions`, `mcp.HTTPOptions` and `mcp.StdioOptions`: a zero field\n")
	b.WriteString("means its default, which `mcp.DefaultServerOptions`, `mcp.DefaultHTTPOptions` and\n")
	b.WriteString("`mcp.DefaultStdioOptions` return, and the defaults here are taken from those. A negative\n")
	b.WriteString("number or duration is an error, here and in the options. The Redis connection's pool and\n")
	b.WriteString("timeouts (`--redis-pool-size` … `--redis-write-timeout`) default to go-redis's own, with which\n")
	b.WriteString("`make bench` measures (`internal/cluster/redis.DefaultConnOptions`); its TLS and password\n")
	b.WriteString("files are read again when they change, so rotated secrets need no restart.\n\n")
	b.WriteString("| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range settings() {
		def := s.def
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s |\n", s.flag, s.env, def, strings.ReplaceAll(s.help, "|", `\|`))
	}
	b.WriteString(redisNeedsDoc)
	return b.String()
}

func TestConfigurationDocIsCurrent(t *testing.T) {
	const path = "../../docs/CONFIGURATION.md"
	want := configurationDoc()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./cmd/server -update)", path, err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./cmd/server -update", path)
	}
}

func TestConfigPrecedence(t *testing.T) {
	envs := map[string]string{"MCP_ADDR": "127.0.0.1:9000", "MCP_SESSION_TTL": "1m", "MCP_TOOLS": "conformance"}
	getenv := func(k string) string { return envs[k] }
	c, err := loadConfig([]string{"--session-ttl", "2m"}, getenv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9000" {
		t.Errorf("addr: got %q, want the environment's", c.Addr)
	}
	if c.SessionTTL.String() != "2m0s" {
		t.Errorf("session-ttl: got %v, want the flag's 2m", c.SessionTTL)
	}
	if c.Tools != "conformance" || c.MaxEvents != 1000 {
		t.Errorf("got tools %q max-events %d, want conformance and the default 1000", c.Tools, c.MaxEvents)
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--tools", "nope"}, nil, "--tools"},
		{[]string{"--session-ttl", "-1s"}, nil, "--session-ttl"},
		{[]string{"--max-events", "0"}, nil, "--max-events"},
		{[]string{"--path", "mcp"}, nil, "--path"},
		{nil, map[string]string{"MCP_KEEPALIVE": "soon"}, "MCP_KEEPALIVE"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{nil, map[string]string{"MCP_REDIS_SHARDED_PUBSUB": "always"}, "MCP_REDIS_SHARDED_PUBSUB"},
		{[]string{"--redis-prefix", "a:b"}, nil, "--redis-prefix"},
		{[]string{"--redis-prefix", "{a}"}, nil, "--redis-prefix"},
		{[]string{"--redis-ca-file", "ca.pem"}, nil, "--redis-ca-file (MCP_REDIS_CA_FILE): needs --redis-url"},
		{[]string{"--redis-ca-file", "ca.pem", "--redis-url", "redis://127.0.0.1:1", "--state-key", testKey}, nil, "--redis-ca-file (MCP_REDIS_CA_FILE): needs a TLS URL"},
		{[]string{"--redis-cert-file", "c.pem", "--redis-url", "rediss://127.0.0.1:1", "--state-key", testKey}, nil, "--redis-key-file"},
		{[]string{"--redis-password-file", "/nonexistent", "--redis-url", "redis://127.0.0.1:1", "--state-key", testKey}, nil, "--redis-password-file"},
		{[]string{"--redis-username", "u", "--redis-url", "redis://v@127.0.0.1:1", "--state-key", testKey}, nil, "--redis-username"},
		{[]string{"--redis-pool-size", "2", "--redis-min-idle-conns", "3", "--redis-url", "redis://127.0.0.1:1", "--state-key", testKey}, nil, "--redis-min-idle-conns"},
		{[]string{"--redis-read-timeout", "0s"}, nil, "--redis-read-timeout"},
	}
	for _, tc := range cases {
		_, err := loadConfig(tc.args, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want an error naming %s", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := loadConfig([]string{"--help"}, func(string) string { return "" }, &out)
	if err != flag.ErrHelp {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	for _, s := range settings() {
		if !strings.Contains(out.String(), "-"+s.flag) || !strings.Contains(out.String(), s.env) {
			t.Errorf("--help does not show --%s / %s", s.flag, s.env)
		}
	}
}
