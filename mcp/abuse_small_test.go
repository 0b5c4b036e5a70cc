package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// An error about a huge input does not echo it back: a 1 MiB uri or tool
// name gets an error body of a few hundred bytes, on both eras.
func TestAbuseErrorEcho(t *testing.T) {
	n := newNode(t, nil)
	huge := "file:///" + strings.Repeat("x", 1<<20)
	legacy := session(t, n.url, mcp.LatestLegacyVersion, nil)
	cases := []struct {
		name   string
		method string
		params map[string]any
	}{
		{"resources/read", "resources/read", map[string]any{"uri": huge}},
		{"tools/call", "tools/call", map[string]any{"name": huge, "arguments": map[string]any{}}},
		{"prompts/get", "prompts/get", map[string]any{"name": huge}},
	}
	for _, tc := range cases {
		for _, modern := range []bool{false, true} {
			resp := post(t, legacy, n.url, tc.method, tc.params, nil)
			if modern {
				resp = postModern(t, mcptest.New(t, n.url), n.url, tc.method, tc.params, nil)
			}
			f := resp.Final()
			if f == nil || f.Error == nil {
				t.Errorf("%s (modern %v): got %.200s, want an error", tc.name, modern, resp.Body)
				continue
			}
			if len(resp.Body) > 4096 {
				t.Errorf("%s (modern %v): error body of %d bytes echoes the input", tc.name, modern, len(resp.Body))
			}
			t.Logf("%s (modern %v): error body of %d bytes", tc.name, modern, len(resp.Body))
		}
	}
}

// Server→client request ids name the owner node (so a reply on any node
// is routed) but cannot be guessed: no counter, 96 random bits.
func TestAbuseRequestIDsUnguessable(t *testing.T) {
	n := newNode(t, nil)
	c := session(t, n.url, mcp.LatestLegacyVersion, samplingCaps)
	seen := map[string]bool{}
	for range 3 {
		st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("sample", map[string]any{"prompt": "hi"}, false))
		if !st.WaitFor(10*time.Second, hasMethod("sampling/createMessage")) {
			t.Fatal("no sampling request")
		}
		var id string
		for _, m := range st.Messages() {
			if m.Method == "sampling/createMessage" {
				id = m.ID.Str()
			}
		}
		prefix := "c." + n.h.NodeID() + "."
		if !strings.HasPrefix(id, prefix) {
			t.Fatalf("id %q does not name the node (want prefix %q)", id, prefix)
		}
		random := id[strings.LastIndexByte(id, '.')+1:]
		if len(random) < 16 || seen[random] {
			t.Fatalf("id %q: random part %q is short or repeated, want 96 random bits", id, random)
		}
		seen[random] = true
		// The reply still reaches the waiter.
		reply, _ := jsonrpc.Response(jsonrpc.StringID(id), map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "ok"}})
		b, _ := jsonrpc.Encode(reply)
		if resp, err := c.PostRaw(t.Context(), n.url, b, nil, nil); err != nil || resp.Status != 202 {
			t.Fatalf("reply: %v status %v", err, resp)
		}
		if !st.WaitFor(10*time.Second, finalResponse) {
			t.Fatal("the call did not finish after the reply")
		}
	}
}
