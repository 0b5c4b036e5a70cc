package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// wantCode checks that resp ends with a JSON-RPC error of code.
func wantCode(t *testing.T, what string, resp *mcptest.Response, code int64) *jsonrpc.Error {
	t.Helper()
	f := resp.Final()
	if f == nil || f.Error == nil || f.Error.Code != code {
		t.Errorf("%s: got status %d body %.200s, want error %d", what, resp.Status, resp.Body, code)
		return &jsonrpc.Error{}
	}
	return f.Error
}

// What a session stores is bounded, on Redis: initialize refuses a huge
// clientInfo or capabilities (and stores nothing), resources/subscribe
// refuses a huge uri and more than the session's share of
// subscriptions, every key left in Redis is small and expires, and an
// error about a huge input does not echo it back.
func TestAbuseStoredSizes(t *testing.T) {
	const maxSubs = 5
	nodes, rs := redisNodes(t, 1, nodeOptions{}, &redisbackend.Options{MaxSubscriptions: maxSubs})
	n := nodes[0]
	rdb := goredis.NewClient(&goredis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	huge := strings.Repeat("x", 2<<20)

	for name, params := range map[string]map[string]any{
		"clientInfo.name": {"protocolVersion": mcp.LatestLegacyVersion, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": huge, "version": "1"}},
		"capabilities": {"protocolVersion": mcp.LatestLegacyVersion, "clientInfo": map[string]any{"name": "c", "version": "1"},
			"capabilities": map[string]any{"experimental": map[string]any{"x": huge[:1<<20]}}},
	} {
		resp := mcptest.New(t, n.url).Call("initialize", params, nil)
		e := wantCode(t, "initialize with a huge "+name, resp, jsonrpc.CodeInvalidParams)
		if len(resp.Body) > 4096 {
			t.Errorf("initialize with a huge %s: error body of %d bytes (%q)", name, len(resp.Body), e.Message)
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			t.Errorf("initialize with a huge %s: got session %q, want none", name, sid)
		}
	}
	if got := rdb.ZCard(ctx, "mcp:sessions").Val(); got != 0 {
		t.Errorf("refused initializes left %d sessions", got)
	}

	c := session(t, n.url, mcp.LatestLegacyVersion, nil)
	resp := post(t, c, n.url, "resources/subscribe", map[string]any{"uri": "file:///" + huge[:1<<20]}, nil)
	wantCode(t, "subscribe to a 1 MiB uri", resp, jsonrpc.CodeInvalidParams)
	if len(resp.Body) > 4096 {
		t.Errorf("subscribe to a 1 MiB uri: error body of %d bytes", len(resp.Body))
	}
	for i := range maxSubs + 3 {
		resp := post(t, c, n.url, "resources/subscribe", map[string]any{"uri": fmt.Sprintf("file:///r%d", i)}, nil)
		if i < maxSubs {
			resp.Result(t, nil)
		} else if i == maxSubs {
			wantCode(t, fmt.Sprintf("subscription %d", i+1), resp, jsonrpc.CodeInvalidParams)
		}
	}

	// An error about a huge uri does not echo it back.
	read := post(t, c, n.url, "resources/read", map[string]any{"uri": "file:///" + huge[:1<<20]}, nil)
	if f := read.Final(); f == nil || f.Error == nil {
		t.Errorf("read of an unknown 1 MiB uri: got %.200s, want an error", read.Body)
	}
	if len(read.Body) > 4096 {
		t.Errorf("read of an unknown 1 MiB uri: error body of %d bytes", len(read.Body))
	}

	keys, err := rdb.Keys(ctx, "mcp:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if len(k) > 256 {
			t.Errorf("key %.80q… is %d bytes long", k, len(k))
		}
		if mem := rdb.MemoryUsage(ctx, k).Val(); mem > 64<<10 {
			t.Errorf("key %q holds %d bytes", k, mem)
		}
		// PTTL answers -1 for a key without a time to live and -2 for
		// one gone since KEYS listed it (a rate bucket expires within
		// its window): only the first is wrong.
		if pttl := rdb.PTTL(ctx, k).Val(); pttl == -1 {
			t.Errorf("key %q does not expire (PTTL %v)", k, pttl)
		}
	}
}

// Over stdio too, a session's subscriptions are bounded (1024), and a
// huge uri is refused.
func TestAbuseStdioSubscriptions(t *testing.T) {
	srv := mcp.NewServer(mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddResource(mcp.Resource{URI: "file:///a"}, func(context.Context, *mcp.Request, string, map[string]string) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	c := startStdio(t, srv, nil)
	c.send(stdioInit, stdioInitialized)
	c.next("initialize")
	sub := func(id int, uri string) stdioLine {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%q}}`, id, uri))
		return c.next("subscribe")
	}
	if l := sub(2, "file:///"+strings.Repeat("x", 1<<20)); l.Error == nil || l.Error.Code != jsonrpc.CodeInvalidParams || len(l.raw) > 4096 {
		t.Fatalf("1 MiB uri: got %.200s (%d bytes), want a short -32602", l.raw, len(l.raw))
	}
	for i := range 1024 {
		if l := sub(10+i, fmt.Sprintf("file:///r%d", i)); l.Error != nil {
			t.Fatalf("subscription %d: got %s", i+1, l.raw)
		}
	}
	if l := sub(5000, "file:///one-more"); l.Error == nil || l.Error.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("subscription 1025: got %s, want -32602", l.raw)
	}
}
