package mcp

import (
	"encoding/base64"
	"mime"
	"strings"
	"testing"
)

// FuzzDecodeHeaderValue: decodeHeaderValue never panics; a plain value it
// accepts is returned unchanged and is visible ASCII, space and tab
// without outer white space; and the base64 form of any string decodes
// to that string.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{
		"", "echo", "tools/call", "demo://café", "=?base64?ZWNobw==?=", "=?base64?", "=?base64??=",
		"=?base64?%%%?=", "=?base64?=", " lead", "trail ", "tab\there", "\x00", "a\r\nb", "?=", "=?BASE64?ZWNobw==?=",
	} {
		f.Add(s)
	}
	const pre, post = "=?base64?", "?="
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeHeaderValue(s)
		sentinel := strings.HasPrefix(s, pre) && strings.HasSuffix(s, post) && len(s) >= len(pre)+len(post)
		if err == nil && !sentinel {
			if got != s {
				t.Fatalf("plain %q decoded to %q", s, got)
			}
			for i := 0; i < len(s); i++ {
				if c := s[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
					t.Fatalf("plain %q accepted with byte %#x", s, c)
				}
			}
			if strings.TrimSpace(s) != s {
				t.Fatalf("plain %q accepted with outer white space", s)
			}
		}
		enc := pre + base64.StdEncoding.EncodeToString([]byte(s)) + post
		back, err := decodeHeaderValue(enc)
		if err != nil || back != s {
			t.Fatalf("%q encoded as %q decodes to %q, %v", s, enc, back, err)
		}
	})
}

// parseMediaType answers as mime.ParseMediaType does, on the bare
// types it reads itself and on the rest.
func TestParseMediaTypeMatchesMime(t *testing.T) {
	for _, v := range []string{
		"application/json", "text/event-stream", "*/*", "text/*", "application/vnd.a+json", "a/b-c.d",
		"Application/JSON", "application/json; charset=utf-8", "application/", "/json", "application", "",
		"a/b/c", "a b/c", "application/json;q=0", "text/event-stream;q=0.5", "a/b,", "ü/x",
	} {
		mt, params, err := parseMediaType(v)
		wmt, wparams, werr := mime.ParseMediaType(v)
		if mt != wmt || (err == nil) != (werr == nil) || len(params) != len(wparams) || params["q"] != wparams["q"] {
			t.Errorf("parseMediaType(%q) = %q %v %v; mime gives %q %v %v", v, mt, params, err, wmt, wparams, werr)
		}
	}
}

// FuzzParseMediaType: on any Content-Type or Accept member a client sends,
// parseMediaType answers as mime.ParseMediaType does.
func FuzzParseMediaType(f *testing.F) {
	for _, v := range []string{"application/json", "text/event-stream", "*/*", "a/b/c", "Application/JSON", "text/plain; q=0", "a/", "/b"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mt, params, err := parseMediaType(v)
		wmt, wparams, werr := mime.ParseMediaType(v)
		if mt != wmt || (err == nil) != (werr == nil) || len(params) != len(wparams) {
			t.Fatalf("parseMediaType(%q) = %q %v %v; mime gives %q %v %v", v, mt, params, err, wmt, wparams, werr)
		}
		for k, want := range wparams {
			if params[k] != want {
				t.Fatalf("parseMediaType(%q) parameter %q = %q; mime gives %q", v, k, params[k], want)
			}
		}
	})
}
