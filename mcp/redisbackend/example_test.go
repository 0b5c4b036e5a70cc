package redisbackend_test

import (
	"context"
	"encoding/hex"
	"log"
	"net/http"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// ExampleNew serves one node of a cluster over HTTP, on a go-redis
// client the program configured itself. Every node of the deployment
// runs the same program against the same Redis.
func ExampleNew() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", PoolSize: 50})
	defer client.Close()
	backend, err := redisbackend.New(ctx, client, &redisbackend.Options{Prefix: "greeter"})
	if err != nil {
		log.Fatal(err) // errors.Is(err, mcp.ErrBackendUnavailable): Redis is not up yet
	}
	defer backend.Close()

	// Every node seals MRTR requestState with the same 32-byte key.
	key, err := hex.DecodeString(os.Getenv("GREETER_STATE_KEY"))
	if err != nil || len(key) != 32 {
		log.Fatal("GREETER_STATE_KEY: want 64 hex digits")
	}
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, &mcp.ServerOptions{StateKeys: [][]byte{key}})
	h, err := s.NewHTTPHandler(&mcp.HTTPOptions{Backend: backend})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	http.Handle("/mcp", h)
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}
