package seal_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/seal"
)

func Example() {
	key, err := seal.ParseKey("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		panic(err)
	}
	s, err := seal.New(key)
	if err != nil {
		panic(err)
	}
	now := time.Now()

	// The first request returns input_required with a sealed requestState.
	orig := json.RawMessage(`{"name":"book","arguments":{"city":"Paris"}}`)
	digest, _ := seal.ParamsDigest("tools/call", orig)
	b := seal.Binding{Principal: "alice", Method: "tools/call", ParamsDigest: digest}
	state, _ := s.Seal(b, []byte(`{"step":2}`), 5*time.Minute, now)

	// The retry, possibly on another node, carries the state back.
	retry := json.RawMessage(`{"name":"book","arguments":{"city":"Paris"},"requestState":"...","inputResponses":{}}`)
	digest, _ = seal.ParamsDigest("tools/call", retry)
	payload, _, err := s.Open(state, seal.Binding{Principal: "alice", Method: "tools/call", ParamsDigest: digest}, now.Add(time.Second))
	fmt.Println(string(payload), err)

	_, _, err = s.Open(state, seal.Binding{Principal: "mallory", Method: "tools/call", ParamsDigest: digest}, now.Add(time.Second))
	fmt.Println(err)
	// Output:
	// {"step":2} <nil>
	// seal: invalid token: sealed for another principal
}
