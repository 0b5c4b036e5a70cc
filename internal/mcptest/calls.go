package mcptest

import (
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// Request encodes a request of cl with a fresh id.
func Request(t testing.TB, cl *Client, method string, params any) (jsonrpc.ID, []byte) {
	t.Helper()
	msg, err := jsonrpc.Request(cl.NextID(), method, params)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := jsonrpc.Encode(msg)
	return msg.ID, b
}

// OpenCall POSTs a request to url and returns its response as a stream,
// which the test may cut at any point; it is closed on cleanup.
func OpenCall(t testing.TB, cl *Client, url, method string, params any) (jsonrpc.ID, *Stream) {
	t.Helper()
	id, b := Request(t, cl, method, params)
	st, err := cl.OpenPost(url, b, nil)
	if err != nil {
		t.Fatalf("%s at %s: %v", method, url, err)
	}
	t.Cleanup(st.Close)
	return id, st
}

// OpenGet opens the session's GET stream on url, resuming after lastID
// when set; it is closed on cleanup.
func OpenGet(t testing.TB, cl *Client, url, lastID string) *Stream {
	t.Helper()
	st, err := cl.Get(url, lastID)
	if err != nil {
		t.Fatalf("GET at %s (Last-Event-ID %q): %v", url, lastID, err)
	}
	t.Cleanup(st.Close)
	return st
}

// Count returns how many of msgs have method.
func Count(msgs []*jsonrpc.Message, method string) int {
	n := 0
	for _, m := range msgs {
		if m.Method == method {
			n++
		}
	}
	return n
}

// Has is a stream condition: at least n messages of method.
func Has(method string, n int) func([]*jsonrpc.Message) bool {
	return func(ms []*jsonrpc.Message) bool { return Count(ms, method) >= n }
}

// Final returns the response among msgs (nil when none).
func Final(msgs []*jsonrpc.Message) *jsonrpc.Message {
	for _, m := range msgs {
		if m.Kind() == jsonrpc.KindResponse {
			return m
		}
	}
	return nil
}
