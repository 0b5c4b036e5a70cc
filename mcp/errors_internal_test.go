package mcp

import (
	"testing"

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
