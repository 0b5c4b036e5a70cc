package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpcluster/mcpcluster/mcp"
)

// GreetIn is the typed input of the greet tool: its JSON Schema is
// inferred from the struct.
type GreetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// Example_stdio registers a typed tool and serves it over stdio. A real
// program passes os.Stdin and os.Stdout; here a fixed input stands in for
// the client.
func Example_stdio() {
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "greet", Description: "Says hello."},
		func(ctx context.Context, req *mcp.Request, in GreetIn) (string, error) {
			return "Hello, " + in.Name + "!", nil
		})

	// The client side of the pipe: send one request, read one reply.
	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), clientOut, clientIn, nil) }()
	fmt.Fprintln(serverIn, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	reply, _ := bufio.NewReader(serverOut).ReadString('\n')
	serverIn.Close() // end of input stops the server
	fmt.Print(reply)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Hello, Ada!"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"greeter","version":"1.0.0"}}}}
}

// ExampleServer_SetEnabled registers a tool on every node and enables it
// at run time: with an HTTP handler attached the change is cluster state,
// so every node lists it.
func ExampleServer_SetEnabled() {
	s := mcp.NewServer(mcp.Implementation{Name: "shop", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "checkout", Description: "Buys the cart."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "bought", nil })
	// At registration: this node's default, until the cluster records a state.
	_ = s.SetEnabled(context.Background(), mcp.KindTool, "checkout", false)
	fmt.Println(s.ToolNames())

	h, err := s.NewHTTPHandler(nil) // in-memory backend: a single node
	if err != nil {
		panic(err)
	}
	defer h.Close()
	// At run time, from any node: recorded in the shared store and
	// announced with one tools/list_changed.
	_ = s.SetEnabled(context.Background(), mcp.KindTool, "checkout", true)
	fmt.Println(s.ToolNames(), s.Enabled(mcp.KindTool, "checkout"))
	// Output:
	// []
	// [checkout] true
}

// ExampleServer_ToggleEnabled flips a tool in one atomic step of the
// shared store: toggles sent to different nodes each flip the cluster's
// state, whatever a node last saw of it, and each is announced once.
// SwapEnabled sets a state and tells whether it changed.
func ExampleServer_ToggleEnabled() {
	s := mcp.NewServer(mcp.Implementation{Name: "shop", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "sale", Description: "Applies the sale price."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "on sale", nil })
	_ = s.SetEnabled(context.Background(), mcp.KindTool, "sale", false)

	h, err := s.NewHTTPHandler(nil)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	on, _ := s.ToggleEnabled(context.Background(), mcp.KindTool, "sale")
	fmt.Println("toggled:", on)
	was, _ := s.SwapEnabled(context.Background(), mcp.KindTool, "sale", true)
	fmt.Println("changed:", !was)
	// Output:
	// toggled: true
	// changed: false
}

// LookupIn is the typed input of the lookup tool.
type LookupIn struct {
	Account string `json:"account"`
}

// ExampleNewError shows a tool answering with a protocol error instead
// of a result: the client gets a JSON-RPC error with the code, message
// and data the handler chose. (An ordinary error would become a result
// with isError set.)
func ExampleNewError() {
	s := mcp.NewServer(mcp.Implementation{Name: "bank", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "lookup", Description: "Looks an account up."},
		func(ctx context.Context, req *mcp.Request, in LookupIn) (string, error) {
			if in.Account != "42" {
				return "", mcp.NewError(mcp.CodeInvalidParams, "unknown account", map[string]string{"account": in.Account})
			}
			return "balance: 10", nil
		})

	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), clientOut, clientIn, nil) }()
	fmt.Fprintln(serverIn, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{"account":"7"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	reply, _ := bufio.NewReader(serverOut).ReadString('\n')
	serverIn.Close()
	fmt.Print(reply)

	// Code that calls a handler directly finds the error with errors.As.
	var e *mcp.Error
	err := fmt.Errorf("lookup: %w", mcp.NewError(mcp.CodeInvalidParams, "unknown account", nil))
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Message)
	}
	// Output:
	// {"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown account","data":{"account":"7"}}}
	// -32602 unknown account
}

// ExampleIsRetryable shows what a client does with the cluster's errors:
// the JSON-RPC error of a call cut by a node that died (-31003, naming
// the node), of shared state out of reach (-31000), or of a draining
// node (-31005) is worth sending again; a protocol error is not.
func ExampleIsRetryable() {
	for _, body := range []string{
		`{"code":-31003,"message":"the node running this request stopped before its response was recorded; retry it","data":{"node":"node-2"}}`,
		`{"code":-31000,"message":"shared state is unavailable; retry later"}`,
		`{"code":-32602,"message":"unknown tool \"nosuch\""}`,
	} {
		var e mcp.Error
		_ = json.Unmarshal([]byte(body), &e)
		fmt.Println(e.Code, e.Code == mcp.CodeNodeLost, mcp.IsRetryable(&e))
	}
	// Output:
	// -31003 true true
	// -31000 false true
	// -32602 false false
}

// ExampleServer_AddReceivingMiddleware logs every inbound method and
// refuses one tool before it runs; the refusal (an *mcp.Error, as other
// errors are answered as internal errors) is the JSON-RPC error.
func ExampleServer_AddReceivingMiddleware() {
	s := mcp.NewServer(mcp.Implementation{Name: "guarded", Version: "1.0.0"}, nil)
	mcp.AddTool(s, mcp.Tool{Name: "delete_all", Description: "Deletes everything."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "deleted", nil })
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			fmt.Println("received", method)
			if method == "tools/call" && strings.Contains(string(req.Params), `"delete_all"`) {
				return nil, mcp.NewError(-32001, "delete_all is not allowed", nil)
			}
			return next(ctx, method, req)
		}
	})

	clientOut, serverIn := io.Pipe()
	serverOut, clientIn := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), clientOut, clientIn, nil) }()
	fmt.Fprintln(serverIn, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_all","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	reply, _ := bufio.NewReader(serverOut).ReadString('\n')
	serverIn.Close()
	fmt.Print(reply)
	// Output:
	// received tools/call
	// {"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"delete_all is not allowed"}}
}

// ExampleTaskSupport registers a long-running tool that runs as a durable
// task when the client negotiated the tasks extension: the call answers
// at once with the task, and the client polls tasks/get (on any node of
// the cluster) for its status and result. The handler is the ordinary
// one; Elicit or Sample inside it put the task in input_required.
func ExampleTaskSupport() {
	s := mcp.NewServer(mcp.Implementation{Name: "reports", Version: "1.0.0"}, nil)
	yes := true
	mcp.AddTool(s, mcp.Tool{
		Name: "build_report", Description: "Builds the quarterly report.",
		TaskSupport: mcp.TaskOptional,
		// Safe to run again: a task whose node dies is re-run elsewhere.
		Annotations: &mcp.ToolAnnotations{IdempotentHint: &yes},
	}, func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
		id, _ := req.Task()
		return "report built by task " + fmt.Sprint(id != ""), nil
	})
	h, err := s.NewHTTPHandler(nil)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	fmt.Println(s.ToolNames())
	// Output:
	// [build_report]
}
