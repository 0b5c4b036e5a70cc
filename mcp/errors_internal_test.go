package mcp

import (
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// The exported codes are the ones the protocol code uses.
func TestErrorCodes(t *testing.T) {
	for _, c := range [][2]int64{
		{CodeParseError, jsonrpc.CodeParseError},
		{CodeInvalidRequest, jsonrpc.CodeInvalidRequest},
		{CodeMethodNotFound, jsonrpc.CodeMethodNotFound},
		{CodeInvalidParams, jsonrpc.CodeInvalidParams},
		{CodeInternalError, jsonrpc.CodeInternalError},
		{CodeResourceNotFound, jsonrpc.CodeResourceNotFound},
		{CodeURLElicitationRequired, jsonrpc.CodeURLElicitationRequired},
		{CodeHeaderMismatch, jsonrpc.CodeHeaderMismatch},
		{CodeMissingClientCapability, jsonrpc.CodeMissingClientCapability},
		{CodeUnsupportedProtocolVersion, jsonrpc.CodeUnsupportedProtocolVersion},
	} {
		if c[0] != c[1] {
			t.Errorf("exported code %d differs from the protocol's %d", c[0], c[1])
		}
	}
}

// The codes and bounds the API states as numbers are the layers' own.
func TestExportedCodesAreTheLayersOwn(t *testing.T) {
	for _, c := range []struct{ api, own int64 }{
		{CodeUnavailable, jsonrpc.CodeUnavailable}, {CodeRequestTimeout, jsonrpc.CodeRequestTimeout},
		{CodeConnectionClosed, jsonrpc.CodeConnectionClosed}, {CodeNodeLost, jsonrpc.CodeNodeLost},
		{CodeCancelled, jsonrpc.CodeCancelled}, {CodeDraining, jsonrpc.CodeDraining},
		{DefaultMaxSubscriptions, cluster.DefaultMaxSubscriptions},
	} {
		if c.api != c.own {
			t.Errorf("the API says %d, the layer %d", c.api, c.own)
		}
	}
}
