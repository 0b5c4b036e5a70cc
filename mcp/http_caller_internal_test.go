package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := parseTrustedProxies([]string{"10.0.0.0/8", "2001:db8:ffff::1", " "})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer string
		xff, fwd   []string
		want       string
	}{
		{"no proxy", "198.51.100.7:5000", nil, nil, "198.51.100.7"},
		{"untrusted peer's header ignored", "198.51.100.7:5000", []string{"203.0.113.9"}, nil, "198.51.100.7"},
		{"trusted proxy", "10.1.2.3:80", []string{"203.0.113.9"}, nil, "203.0.113.9"},
		{"spoofed entries left of the client ignored", "10.1.2.3:80", []string{"1.1.1.1, 203.0.113.9"}, nil, "203.0.113.9"},
		{"trusted hops skipped", "10.1.2.3:80", []string{"203.0.113.9, 10.9.9.9", "10.8.8.8"}, nil, "203.0.113.9"},
		{"all hops trusted: the leftmost", "10.1.2.3:80", []string{"10.7.7.7, 10.9.9.9"}, nil, "10.7.7.7"},
		{"garbage ends at the proxy that appended it", "10.1.2.3:80", []string{"203.0.113.9, nonsense"}, nil, "10.1.2.3"},
		{"port and brackets", "10.1.2.3:80", []string{"[2001:db8::5]:443"}, nil, "2001:db8::5"},
		{"v4 with port", "10.1.2.3:80", []string{"203.0.113.9:1234"}, nil, "203.0.113.9"},
		{"mapped v4", "10.1.2.3:80", []string{"::ffff:203.0.113.9"}, nil, "203.0.113.9"},
		{"forwarded", "10.1.2.3:80", nil, []string{`for=198.51.100.1;proto=https, For="[2001:db8::7]:80";by=x`}, "2001:db8::7"},
		{"forwarded unknown", "10.1.2.3:80", nil, []string{`for=unknown`}, "10.1.2.3"},
		{"xff wins over forwarded", "10.1.2.3:80", []string{"203.0.113.9"}, []string{"for=198.51.100.1"}, "203.0.113.9"},
		{"v6 trusted proxy by address", "[2001:db8:ffff::1]:80", []string{"203.0.113.9"}, nil, "203.0.113.9"},
		{"v6 untrusted peer", "[2001:db8:ffff::2]:80", []string{"203.0.113.9"}, nil, "2001:db8:ffff::2"},
		{"unparseable peer", "@", []string{"203.0.113.9"}, nil, "invalid IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.xff {
				h.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				h.Add("Forwarded", v)
			}
			if got := clientAddr(tc.peer, h, trusted).String(); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A long forwarding chain is read only from the right, within
// maxForwardHops.
func TestClientAddrBoundsHops(t *testing.T) {
	trusted, _ := parseTrustedProxies([]string{"10.0.0.0/8"})
	chain := "203.0.113.9" + strings.Repeat(", 10.0.0.1", 1000)
	h := http.Header{"X-Forwarded-For": {chain}}
	if got := clientAddr("10.1.1.1:1", h, trusted); !trusted[0].Contains(got) {
		t.Fatalf("got %s, want a trusted hop: the walk stops after %d", got, maxForwardHops)
	}
}

func TestCallerKey(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:9"
	if got, want := callerKey(r, nil), "a:2001:db8:1:2::/64"; got != want {
		t.Fatalf("IPv6 client: got %q, want %q", got, want)
	}
	r.RemoteAddr = "198.51.100.7:1"
	if got, want := callerKey(r, nil), "a:198.51.100.7"; got != want {
		t.Fatalf("IPv4 client: got %q, want %q", got, want)
	}
	r = r.WithContext(WithPrincipal(r.Context(), &Principal{Issuer: "https://i", Subject: "ada"}))
	if got, want := callerKey(r, nil), "p:https://i#ada"; got != want {
		t.Fatalf("principal: got %q, want %q", got, want)
	}
}

func TestTrustedProxiesValidate(t *testing.T) {
	o := &HTTPOptions{TrustedProxies: []string{"10.0.0.0/8", "not-a-range"}}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "HTTPOptions.TrustedProxies") || !strings.Contains(err.Error(), "not-a-range") {
		t.Fatalf("Validate: got %v, want an error naming HTTPOptions.TrustedProxies and the bad entry", err)
	}
}

// FuzzClientAddr: whatever the forwarding headers hold, clientAddr
// returns the peer or an address named in them, never panics, and
// believes nothing from an untrusted peer.
func FuzzClientAddr(f *testing.F) {
	for _, s := range []string{"203.0.113.9", "1.1.1.1, 10.0.0.1", "[2001:db8::1]:80", `for="[::1]";proto=http, for=unknown`, ",,,", "::ffff:1.2.3.4%eth0"} {
		f.Add("10.1.2.3:80", s, s)
		f.Add("198.51.100.1:1", s, "")
	}
	trusted, _ := parseTrustedProxies([]string{"10.0.0.0/8", "::1"})
	f.Fuzz(func(t *testing.T, peer, xff, fwd string) {
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		h.Set("Forwarded", fwd)
		got := clientAddr(peer, h, trusted)
		p := parseHop(peer)
		if !p.IsValid() || !isTrusted(p, trusted) {
			if got != p {
				t.Fatalf("untrusted peer %q: got %s, want the peer", peer, got)
			}
			return
		}
		if got == p {
			return
		}
		for _, e := range forwardHops(h) {
			if parseHop(e) == got {
				return
			}
		}
		t.Fatalf("got %s: neither the peer nor an entry of the forwarding headers", got)
	})
}
