package mcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// validHeaderValue reports whether net/http would send v.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// FuzzPostBody sends arbitrary bodies and headers to the POST endpoint of
// a real server: every answer has a status below 500, an answer >= 400
// carries a JSON-RPC error body, and no goroutine is left afterwards.
// mode selects the session header: none, a 2025-03-26 session, a
// 2025-11-25 session with sampling, or an unknown one.
func FuzzPostBody(f *testing.F) {
	n := newNode(f, &nodeOptions{
		HTTP:   mcp.HTTPOptions{MaxBodyBytes: 64 << 10, ResumeGrace: 100 * time.Millisecond},
		Server: mcp.ServerOptions{RequestTimeout: 300 * time.Millisecond},
	})
	s1 := session(f, n.url, mcp.Version20250326, nil)
	s2 := session(f, n.url, mcp.Version20251125, samplingCaps)
	sessions := []string{"", s1.Session, s2.Session, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	client := &http.Client{Transport: &http.Transport{}}
	f.Cleanup(client.CloseIdleConnections)

	const both = "application/json, text/event-stream"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	seeds := []struct {
		body                         string
		mode                         uint8
		ct, accept, version, mm, mnm string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`, 0, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1, "application/json", both, "2025-03-26", "", ""},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, 2, "application/json", both, "2025-11-25", "", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":1}}}`, 2, "application/json", "application/json", "", "", ""},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"q"}}}`, 2, "application/json", both, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},7,{"jsonrpc":"2.0","method":"notifications/x"}]`, 1, "application/json", both, "", "", ""},
		{`[]`, 1, "application/json", both, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 2, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"m"},` + meta + `}}`, 0, "application/json", both, "2026-07-28", "tools/call", "echo"},
		{`{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{` + meta + `}}`, 0, "application/json", both, "2026-07-28", "server/discover", ""},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, 0, "application/json", both, "", "tools/call", "=?base64?ZWNobw==?="},
		{`{"jsonrpc":"2.0","id":7,"method":"nope","params":{` + meta + `}}`, 3, "application/json", both, "2026-07-28", "nope", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, 1, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":"c.x.1","result":{}}`, 2, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, 1, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 3, "application/json", both, "2025-06-18", "", ""},
		{`{"jsonrpc":"2.0","id":1,`, 1, "application/json", both, "", "", ""},
		{`null`, 0, "application/json", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1, "text/plain", both, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1, "application/json", "text/html", "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1, "application/json", both, "9999-99-99", "", ""},
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, 1, "application/json", both, "", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.mode, s.ct, s.accept, s.version, s.mm, s.mnm)
	}
	f.Fuzz(func(t *testing.T, body []byte, mode uint8, ct, accept, version, mcpMethod, mcpName string) {
		for _, v := range []string{ct, accept, version, mcpMethod, mcpName} {
			if !validHeaderValue(v) {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		set := func(k, v string) {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		set("Content-Type", ct)
		set("Accept", accept)
		set("Mcp-Protocol-Version", version)
		set("Mcp-Method", mcpMethod)
		set("Mcp-Name", mcpName)
		set("Mcp-Session-Id", sessions[int(mode)%len(sessions)])
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return // a slow tool; the server finishes it in the background
			}
			t.Fatalf("POST failed (did the handler panic?): %v", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("reading the answer: %v", err)
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			del, _ := http.NewRequest(http.MethodDelete, n.url, nil)
			del.Header.Set("Mcp-Session-Id", sid)
			if r, err := client.Do(del); err == nil {
				r.Body.Close()
			}
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d for body %q: %s", resp.StatusCode, body, b)
		}
		if resp.StatusCode >= 400 {
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("status %d with Content-Type %q", resp.StatusCode, ct)
			}
			msg, err := jsonrpc.Decode(b)
			if err != nil || msg.Kind() != jsonrpc.KindResponse || msg.Error == nil {
				t.Fatalf("status %d with body %q, want a JSON-RPC error", resp.StatusCode, b)
			}
		}
	})
}
