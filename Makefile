# Developer entry points. The test command is scripts/test.sh (CI runs it via
# .ci/run); see the scripts for their options and environment variables.

.PHONY: test test-quick conformance conformance-cluster run

# Everything CI runs: gofmt, vet, race tests, fuzzing, conformance (1 node and
# a 3-node cluster).
test:
	scripts/test.sh

# Local quick run: no conformance, no fuzzing.
test-quick:
	MCP_SKIP_CONFORMANCE=1 FUZZTIME=0 scripts/test.sh

# Official MCP conformance suite against one node (in-memory backend).
conformance:
	scripts/conformance.sh

# The same against 3 nodes sharing a Redis behind a random-routing proxy.
conformance-cluster:
	scripts/conformance.sh --cluster 3

run:
	go run ./cmd/server
