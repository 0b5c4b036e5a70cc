package stdio_test

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/stdio"
)

// A client and a server joined by two pipes, as a stdio client is to the
// child process it runs. The server answers each request on its own
// goroutine; the client calls it.
func Example() {
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()

	var server *stdio.Channel
	server = stdio.New(serverR, serverW, stdio.Options{
		OnInbound: func(req *jsonrpc.Message) {
			go func() {
				resp, _ := jsonrpc.Response(req.ID, map[string]string{"echo": req.Method})
				server.Send(resp)
			}()
		},
		OnInvalid: func(err *jsonrpc.DecodeError) {
			server.Send(jsonrpc.ErrorResponse(err.ID, err.Err))
		},
	})
	client := stdio.New(clientR, clientW, stdio.Options{IDPrefix: "c-"})

	ctx := context.Background()
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Run(ctx) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- client.Run(ctx) }()

	result, err := client.Call(ctx, "ping", nil)
	fmt.Println(string(result), err)

	// Shutdown as in the stdio transport: the client closes the server's
	// stdin; the server sees EOF, and closing its stdout ends the client.
	clientW.Close()
	fmt.Println("server:", <-serverDone)
	serverW.Close()
	fmt.Println("client:", <-clientDone)
	// Output:
	// {"echo":"ping"} <nil>
	// server: <nil>
	// client: <nil>
}
