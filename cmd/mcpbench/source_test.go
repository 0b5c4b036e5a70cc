package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

func TestSourceFlag(t *testing.T) {
	tests := []struct {
		arg  string
		want string // the parsed list, comma-separated; "" when an error is expected
		err  string // substring of the error
	}{
		{"10.77.0.100", "10.77.0.100", ""},
		{"10.77.0.100-10.77.0.103", "10.77.0.100,10.77.0.101,10.77.0.102,10.77.0.103", ""},
		{"10.77.0.100-102", "10.77.0.100,10.77.0.101,10.77.0.102", ""},
		{"10.77.0.254-10.77.1.1", "10.77.0.254,10.77.0.255,10.77.1.0,10.77.1.1", ""},
		{" 127.0.0.1 , 127.0.0.2-3,", "127.0.0.1,127.0.0.2,127.0.0.3", ""},
		{"10.77.0.5-10.77.0.5", "10.77.0.5", ""},
		{"10.77.0.5-10.77.0.4", "", "ends before"},
		{"10.77.0.5-300", "", "range"},
		{"::1", "", "IPv4"},
		{"host.example", "", "IPv4"},
		{"10.0.0.0-10.1.0.0", "", "more than"},
	}
	for _, tt := range tests {
		cfg, err := parseFlags([]string{"--source", tt.arg}, io.Discard)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("--source %q: got error %v, want one mentioning %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("--source %q: %v", tt.arg, err)
			continue
		}
		got := make([]string, len(cfg.sources))
		for i, a := range cfg.sources {
			got[i] = a.String()
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("--source %q: got %v, want %s", tt.arg, got, tt.want)
		}
	}
	// Repeated flags add up; without the flag there is none.
	cfg, err := parseFlags([]string{"--source", "127.0.0.1", "--source", "127.0.0.2"}, io.Discard)
	if err != nil || len(cfg.sources) != 2 {
		t.Errorf("repeated --source: %v (%v), want 2 addresses", cfg.sources, err)
	}
	cfg, err = parseFlags(nil, io.Discard)
	if err != nil || len(cfg.sources) != 0 {
		t.Errorf("no --source: %v (%v), want none", cfg.sources, err)
	}
}

// A worker's requests are dialed from its source address (index mod the
// number of addresses); unmarked requests take the addresses in turn.
func TestSourceAddressPerWorker(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // X-Worker -> client address
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("X-Worker")
		if prev, ok := seen[key]; ok && prev != host && key != "none" {
			t.Errorf("worker %s: request from %s, earlier from %s", key, host, prev)
		}
		seen[key+"/"+host] = host
		seen[key] = host
	}))
	defer ts.Close()
	sources := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
	cl := newClient([]string{ts.URL}, rev20251125, 4, sources)
	defer cl.closeIdle()
	get := func(ctx context.Context, worker string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
		req.Header.Set("X-Worker", worker)
		resp, err := cl.do(req)
		if err != nil {
			if strings.Contains(err.Error(), "assign requested address") {
				t.Skipf("127.0.0.2 and 127.0.0.3 are not local here: %v", err)
			}
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for round := 0; round < 3; round++ {
		for w := 0; w < 5; w++ {
			get(withSource(context.Background(), w), string(rune('0'+w)))
		}
	}
	for w := 0; w < 5; w++ {
		want := sources[w%len(sources)].String()
		if got := seen[string(rune('0'+w))]; got != want {
			t.Errorf("worker %d dialed from %s, want %s", w, got, want)
		}
	}
	for i := 0; i < 3; i++ {
		get(context.Background(), "none")
	}
	for _, a := range sources {
		if _, ok := seen["none/"+a.String()]; !ok {
			t.Errorf("unmarked requests never came from %s", a)
		}
	}
	// Without sources there is one transport and no local address.
	if cl := newClient([]string{ts.URL}, rev20251125, 4, nil); len(cl.hcs) != 1 {
		t.Errorf("no sources: %d transports, want 1", len(cl.hcs))
	}
}
