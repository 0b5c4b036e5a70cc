package clustertest

import (
	"reflect"
	"testing"
)

func TestOnlyFlags(t *testing.T) {
	known := map[string]bool{"addr": true, "metrics-addr": true, "stdio": true}
	for _, c := range []struct{ args, want []string }{
		{[]string{"--addr", "127.0.0.1:1", "--record-retry", "5s", "--metrics-addr", ""}, []string{"--addr", "127.0.0.1:1", "--metrics-addr", ""}},
		{[]string{"--redis-sharded-pubsub=off", "--stdio", "--addr=x"}, []string{"--stdio", "--addr=x"}},
		{[]string{"--new-bool", "--addr", "a"}, []string{"--addr", "a"}},
		{[]string{"-addr", "a", "--new", "v", "--new2"}, []string{"-addr", "a"}},
	} {
		if got := onlyFlags(c.args, known); !reflect.DeepEqual(got, c.want) {
			t.Errorf("onlyFlags(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// The flags of this tree's cmd/server, as another release's binary
// would be read.
func TestKnownFlags(t *testing.T) {
	known, err := KnownFlags(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"addr", "node-id", "redis-url", "state-key", "stdio", "drain-delay"} {
		if !known[f] {
			t.Errorf("--%s not found in --help: %v", f, known)
		}
	}
}
