// Package gosdk proves mcpcluster against the official Go MCP SDK client
// (github.com/modelcontextprotocol/go-sdk): its tests drive a single node
// and a three-node cluster behind a random router with mcp.NewClient and
// mcp.StreamableClientTransport, on the stateless 2026-07-28 revision the
// client discovers by default and pinned to every handshake-era revision.
// TestOAuthThroughNginx runs the SDK's OAuth support (auth package)
// against three nodes behind nginx with authorization on
// (scripts/cluster.sh --auth).
//
// It is a module of its own, so the SDK never enters the dependency graph
// of the product module, which it reaches through a replace directive.
// Run it with
//
//	cd clients/gosdk && go test ./...
package gosdk
