package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// b64 is the 2026-07-28 header encoding of s.
func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// An invalid or unsupported MCP-Protocol-Version is refused with 400
// and a JSON-RPC error on every method of a session.
func TestVersionHeaderInvalid(t *testing.T) {
	n := newNode(t, nil)
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			c := session(t, n.url, v, nil)
			for _, bad := range []string{"2024-11-05", "2099-01-01", "garbage", "2025-06-18,2025-11-25"} {
				for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
					var body []byte
					if method == http.MethodPost {
						body = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
					}
					resp, err := c.Raw(context.Background(), method, n.url, body, header("Mcp-Protocol-Version", bad))
					if err != nil {
						t.Fatal(err)
					}
					t.Run(method+"/"+bad, func(t *testing.T) {
						e := wantRPCError(t, resp, http.StatusBadRequest, 0)
						if e.Code != jsonrpc.CodeUnsupportedProtocolVersion && e.Code != jsonrpc.CodeInvalidRequest {
							t.Fatalf("got code %d, want -32022 or -32600", e.Code)
						}
					})
				}
			}
			// The session survived the refused DELETEs.
			post(t, c, n.url, "ping", nil, nil).Result(t, nil)
		})
	}
}

// A request without MCP-Protocol-Version is accepted (the session's
// version, or 2025-03-26, is assumed), and any supported legacy version
// is accepted on a session whatever version it negotiated.
func TestVersionHeaderAbsentOrOther(t *testing.T) {
	n := newNode(t, nil)
	for _, v := range mcp.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			c := session(t, n.url, v, nil)
			resp := post(t, c, n.url, "tools/call", toolCall("echo", map[string]any{"text": "x"}, false), header("Mcp-Protocol-Version", ""))
			if got := resultText(t, resp); got != "x" {
				t.Fatalf("without the header: got %q", got)
			}
			st, err := c.GetWith(n.url, "", header("Mcp-Protocol-Version", ""))
			if err != nil {
				t.Fatalf("GET without the header: %v", err)
			}
			st.Close()
			for _, h := range mcp.LegacyVersions {
				resp := post(t, c, n.url, "tools/call", toolCall("echo", map[string]any{"text": h}, false), header("Mcp-Protocol-Version", h))
				if got := resultText(t, resp); got != h {
					t.Fatalf("header %s: got %q", h, got)
				}
			}
		})
	}
}

// 2026-07-28 requests carry Mcp-Method, Mcp-Name and MCP-Protocol-Version
// headers that must be present and match the body (after decoding the
// base64 form); otherwise 400 with -32020 naming the header.
func TestModernHeaderValidation(t *testing.T) {
	n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) {
		s.AddResource(mcp.Resource{URI: "demo://café", Name: "cafe"}, func(_ context.Context, _ *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, Text: "espresso"}}}, nil
		})
	}})
	echo := toolCall("echo", map[string]any{"text": "hi"}, false)
	cases := []struct {
		name    string
		method  string
		params  map[string]any
		mod     func(*http.Request)
		bad     string // header named in the error; "" means success
		wantOut string
	}{
		{"ok", "tools/call", echo, nil, "", "hi"},
		{"no version", "tools/call", echo, header("Mcp-Protocol-Version", ""), "Mcp-Protocol-Version", ""},
		{"version mismatch", "tools/call", echo, header("Mcp-Protocol-Version", mcp.Version20251125), "Mcp-Protocol-Version", ""},
		{"no method", "tools/call", echo, header("Mcp-Method", ""), "Mcp-Method", ""},
		{"method mismatch", "tools/call", echo, header("Mcp-Method", "tools/list"), "Mcp-Method", ""},
		{"method base64", "tools/call", echo, header("Mcp-Method", b64("tools/call")), "", "hi"},
		{"no name", "tools/call", echo, header("Mcp-Name", ""), "Mcp-Name", ""},
		{"name mismatch", "tools/call", echo, header("Mcp-Name", "add"), "Mcp-Name", ""},
		{"name base64", "tools/call", echo, header("Mcp-Name", b64("echo")), "", "hi"},
		{"name base64 mismatch", "tools/call", echo, header("Mcp-Name", b64("add")), "Mcp-Name", ""},
		{"name bad base64", "tools/call", echo, header("Mcp-Name", "=?base64?%%%?="), "Mcp-Name", ""},
		{"name twice", "tools/call", echo, func(r *http.Request) { r.Header.Add("Mcp-Name", "echo") }, "Mcp-Name", ""},
		{"prompt name", "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada"}}, nil, "", ""},
		{"prompt name mismatch", "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada"}}, header("Mcp-Name", "other"), "Mcp-Name", ""},
		{"uri base64", "resources/read", map[string]any{"uri": "demo://café"}, header("Mcp-Name", b64("demo://café")), "", ""},
		{"uri raw non-ASCII", "resources/read", map[string]any{"uri": "demo://café"}, nil, "Mcp-Name", ""},
		{"uri mismatch", "resources/read", map[string]any{"uri": "demo://café"}, header("Mcp-Name", b64("demo://cafe")), "Mcp-Name", ""},
		{"no name needed", "tools/list", map[string]any{}, nil, "", ""},
	}
	c := mcptest.New(t, n.url)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := postModern(t, c, n.url, tc.method, tc.params, tc.mod)
			if tc.bad == "" {
				if resp.Status != http.StatusOK {
					t.Fatalf("got status %d, want 200 (body %q)", resp.Status, resp.Body)
				}
				resp.Result(t, nil)
				if tc.wantOut != "" {
					if got := resultText(t, resp); got != tc.wantOut {
						t.Fatalf("got %q, want %q", got, tc.wantOut)
					}
				}
				return
			}
			e := wantRPCError(t, resp, http.StatusBadRequest, jsonrpc.CodeHeaderMismatch)
			var data struct {
				Header string `json:"header"`
			}
			_ = json.Unmarshal(e.Data, &data)
			if http.CanonicalHeaderKey(data.Header) != http.CanonicalHeaderKey(tc.bad) {
				t.Fatalf("error names header %q, want %q", data.Header, tc.bad)
			}
		})
	}
}

// 2026-07-28 has no GET stream and no sessions: GET and DELETE get 405
// with Allow: POST.
func TestModernGetDeleteNotAllowed(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			resp, err := c.Raw(context.Background(), method, n.url, nil, header("Mcp-Protocol-Version", mcp.Version20260728, "Mcp-Session-Id", "whatever"))
			if err != nil {
				t.Fatal(err)
			}
			wantRPCError(t, resp, http.StatusMethodNotAllowed, 0)
			if got := resp.Header.Get("Allow"); got != "POST" {
				t.Fatalf("got Allow %q, want POST", got)
			}
		})
	}
}

// A method 2026-07-28 does not define gets 404 with -32601.
func TestModernUnknownMethod(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	for _, method := range []string{"tools/frobnicate", "ping", "logging/setLevel", "resources/subscribe"} {
		t.Run(method, func(t *testing.T) {
			resp := postModern(t, c, n.url, method, map[string]any{"uri": "demo://counter", "level": "info"}, nil)
			e := wantRPCError(t, resp, http.StatusNotFound, jsonrpc.CodeMethodNotFound)
			if f := resp.Final(); f == nil || !f.ID.IsValid() {
				t.Fatalf("error %v carries no request id", e)
			}
		})
	}
}

// Mcp-Session-Id and Last-Event-ID mean nothing to 2026-07-28 requests:
// they are ignored, and no session id is minted or echoed.
func TestModernIgnoresSessionAndLastEventID(t *testing.T) {
	n := newNode(t, nil)
	legacy := session(t, n.url, mcp.Version20251125, nil)
	c := mcptest.New(t, n.url)
	for _, sid := range []string{"no-such-session", legacy.Session} {
		resp := postModern(t, c, n.url, "tools/call", toolCall("echo", map[string]any{"text": "m"}, false),
			header("Mcp-Session-Id", sid, "Last-Event-ID", "abcdefghijklmnop_3"))
		if got := resultText(t, resp); got != "m" {
			t.Fatalf("got %q", got)
		}
		if got := resp.Header.Get("Mcp-Session-Id"); got != "" {
			t.Fatalf("response carries Mcp-Session-Id %q", got)
		}
	}
	post(t, legacy, n.url, "ping", nil, nil).Result(t, nil)
}

// A 2026-07-28 request whose _meta lacks a required field is refused
// with 400 and -32602.
func TestModernMetaRequired(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	cases := map[string]map[string]any{
		"no _meta":              nil,
		"no protocolVersion":    {mcp.MetaClientCapabilities: map[string]any{}},
		"no clientCaps":         {mcp.MetaProtocolVersion: mcp.Version20260728},
		"clientCaps not an obj": {mcp.MetaProtocolVersion: mcp.Version20260728, mcp.MetaClientCapabilities: "all"},
	}
	for name, meta := range cases {
		t.Run(name, func(t *testing.T) {
			params := map[string]any{}
			if meta != nil {
				params["_meta"] = meta
			}
			b, _ := encodeRequest(t, c, "tools/list", params)
			resp, err := c.PostRaw(context.Background(), n.url, b, mcptest.ModernHeaders("tools/list", ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantRPCError(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidParams)
		})
	}
}

// How a stateless request's protocol versions are judged: a header that
// disagrees with _meta is -32020, whatever either says; a version not
// served is -32022 listing the versions usable there (never the requested
// one); every error echoes the request's id.
func TestModernUnsupportedVersion(t *testing.T) {
	n := newNode(t, nil)
	c := mcptest.New(t, n.url)
	modern := mcp.Version20260728
	cases := []struct {
		name, header, meta string
		code               int64
		supported          []string
	}{
		{"both unknown", "2099-01-01", "2099-01-01", jsonrpc.CodeUnsupportedProtocolVersion, mcp.SupportedVersions},
		{"both malformed", "1.0", "1.0", jsonrpc.CodeUnsupportedProtocolVersion, mcp.SupportedVersions},
		{"_meta unknown", modern, "2099-01-01", jsonrpc.CodeHeaderMismatch, nil},
		{"header unknown", "2099-01-01", modern, jsonrpc.CodeHeaderMismatch, nil},
		{"header malformed", "1.0", modern, jsonrpc.CodeHeaderMismatch, nil},
		{"_meta session-era", modern, mcp.Version20251125, jsonrpc.CodeHeaderMismatch, nil},
		{"no header, _meta unknown", "", "2099-01-01", jsonrpc.CodeUnsupportedProtocolVersion, mcp.ModernVersions},
		{"no header, _meta session-era", "", mcp.Version20251125, jsonrpc.CodeUnsupportedProtocolVersion, mcp.ModernVersions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta := mcptest.ModernMeta()
			meta[mcp.MetaProtocolVersion] = tc.meta
			b, id := encodeRequest(t, c, "tools/list", map[string]any{"_meta": meta})
			resp, err := c.PostRaw(context.Background(), n.url, b, chain(mcptest.ModernHeaders("tools/list", ""), header("Mcp-Protocol-Version", tc.header)), nil)
			if err != nil {
				t.Fatal(err)
			}
			e := wantRPCError(t, resp, http.StatusBadRequest, tc.code)
			msg, _ := jsonrpc.Decode(resp.Body)
			if msg.ID.String() != id.String() {
				t.Errorf("error id = %s, want the request's id %s", msg.ID, id)
			}
			if tc.supported == nil {
				return
			}
			var data struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil || !slices.Equal(data.Supported, tc.supported) || data.Requested != tc.meta {
				t.Fatalf("got data %s, want supported %v and requested %q", e.Data, tc.supported, tc.meta)
			}
			if slices.Contains(data.Supported, data.Requested) {
				t.Errorf("-32022 lists the requested version %q as supported", data.Requested)
			}
		})
	}
}
