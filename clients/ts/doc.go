// Package ts proves mcpcluster against the clients that run on Node: the
// official TypeScript MCP SDK client (flows.mjs, driven by
// TestTypeScriptSDK) and the MCP Inspector's CLI mode (TestInspectorCLI),
// both pinned in tools/npm. The tests start a single node and a three-node
// cluster behind a random router (internal/clustertest) and run the
// clients against them. TestTypeScriptSDKOAuth runs the SDK's OAuth
// support (oauth.mjs) against three nodes behind nginx with authorization
// on (scripts/cluster.sh --auth).
//
// It is a module of its own so that the product module's ./... never
// includes tests that need npm tools. Run it with
//
//	cd clients/ts && go test ./...
//
// MCP_NPM_TOOLS may name an installed tools directory (as printed by
// scripts/npm-tools.sh); otherwise the tests run that script.
package ts
