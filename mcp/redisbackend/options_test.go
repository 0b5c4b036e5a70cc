package redisbackend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts *redisbackend.Options
		want string
	}{
		{nil, ""},
		{&redisbackend.Options{}, ""},
		{&redisbackend.Options{MaxSubscriptions: 10}, ""},
		{&redisbackend.Options{MaxSubscriptions: -1}, "redisbackend: Options.MaxSubscriptions: must not be negative"},
		{&redisbackend.Options{ShardedPubSub: "off"}, ""},
		{&redisbackend.Options{ShardedPubSub: "sometimes"}, "redisbackend: Options.ShardedPubSub"},
	} {
		err := tc.opts.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// New and Open refuse negative options before they touch Redis.
func TestConstructorsRejectNegativeOptions(t *testing.T) {
	r := redistest.Start(t)
	bad := &redisbackend.Options{MaxSubscriptions: -1}
	client := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer client.Close()
	if b, err := redisbackend.New(context.Background(), client, bad); err == nil || !strings.Contains(err.Error(), "MaxSubscriptions") {
		if b != nil {
			_ = b.Close()
		}
		t.Errorf("New: got %v, want an error naming MaxSubscriptions", err)
	}
	if b, err := redisbackend.Open(context.Background(), r.URL(), bad); err == nil || !strings.Contains(err.Error(), "MaxSubscriptions") {
		if b != nil {
			_ = b.Close()
		}
		t.Errorf("Open: got %v, want an error naming MaxSubscriptions", err)
	}
}
