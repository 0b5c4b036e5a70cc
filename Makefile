# Developer entry points. The test command is scripts/test.sh (CI runs it via
# .ci/run); see the scripts for their options and environment variables.

.PHONY: test test-quick conformance conformance-cluster conformance-alpha conformance-alpha-cluster lint run cluster cluster-check deploy-test chart-apiserver

# Everything CI runs: gofmt, vet, tidy + staticcheck, race tests, fuzzing,
# conformance (both suites, 1 node and a 3-node cluster).
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

# The 2026-07-28 suite (0.2.0-alpha.12), one node and three.
conformance-alpha:
	scripts/conformance.sh --requirements 2026-07-28

conformance-alpha-cluster:
	scripts/conformance.sh --requirements 2026-07-28 --cluster 3

# go mod tidy -diff and staticcheck (pinned) in every module.
lint:
	scripts/lint.sh

run:
	go run ./cmd/server

# A local cluster without containers: redis-server, 3 nodes and nginx (round
# robin, SSE-ready) on 127.0.0.1; installs redis-server and nginx from Debian
# packages when missing. Prints the URL; Ctrl-C stops everything.
cluster:
	scripts/cluster.sh

# The same, started, smoke-tested through nginx and stopped.
cluster-check:
	scripts/cluster.sh --check

# docker-compose.yml and Helm chart checks (deploy/deploytest, its own
# module; builds the pinned helm once into ~/.cache/mcpcluster/bin).
deploy-test:
	cd deploy/deploytest && HELM="$$(../../scripts/helm.sh)" go test -count=1 ./...

# Not part of the test command: the chart against a real kube-apiserver
# (built from the k8s.io/kubernetes Go module) on Debian's etcd-server, on
# loopback: helm install --dry-run=server, then a real install, upgrade and
# uninstall of every value set (API server validation and admission; no
# controllers or kubelet, so nothing runs). The first run builds
# kube-apiserver (several minutes).
chart-apiserver:
	scripts/chart-apiserver.sh

.PHONY: chaos chaos-short

# The chaos harness (cmd/chaos, about 15 minutes): three nodes on Redis
# behind nginx under a verifying load while faults hit them: kill -9 with
# stable ids, a SIGTERM rolling restart, Redis restarts (no persistence,
# AOF), toxiproxy latency and a cut, a Sentinel failover, a node cut off
# from Redis. Prints the table of docs/RELIABILITY.md; fails on a hung
# call or a lost or duplicated event. Installs nginx and redis-server
# when missing.
chaos:
	scripts/chaos.sh

# Its short version (kill -9 and a Redis restart, ~3 minutes), a stage of
# scripts/test.sh.
chaos-short:
	scripts/chaos.sh -short

.PHONY: bench bench-micro

# Benchmark suite (about 13 minutes on 2 cores): mcpcluster on 1 node
# (memory, Redis) and 3 nodes (Redis; and both again with Redis behind
# toxiproxy, 0.5 ms each way) against the official Go SDK, mcp-go and a
# net/http ceiling, side by side on this machine; a 10,000-session
# fan-out over 3 nodes; profiles of the slowest Redis scenario; a
# redis-benchmark capacity model. Rewrites docs/BENCHMARKS.md and
# docs/bench/ (plots, profiles, results.json). One scenario alone:
# cd bench && go run ./cmd/benchrun --only redis,redis-far --scenarios echo
# (--help lists them). Needs redis-server and redis-benchmark.
bench:
	cd bench && go run ./cmd/benchrun

# Go micro-benchmarks of the hot paths: JSON-RPC decoding and encoding,
# SSE framing and event ids, session load with and without the node's
# cache, a whole tools/call in process (memory and Redis backends).
bench-micro:
	go test -run '^$$' -bench . -benchmem ./internal/jsonrpc ./internal/sse ./internal/bench ./mcp

.PHONY: scaleout scaleout-short

# Scale-out testbed (as root, about 5 minutes on 2 cores): redis, nginx,
# the load generator and 1 to 4 nodes each on a host of its own (network
# namespaces on a bridge, a CPU share per host via cgroups, netem delay
# where the kernel has it); throughput, latency and each host's CPU per
# scenario, and the efficiency T(N)/(N×T(1)). See docs/SCALING.md.
scaleout:
	scripts/scaleout.sh

# Its CI check (under 2 minutes): N = 1 and 2, echo only; every call
# answered, every node served requests, nothing left behind.
scaleout-short:
	scripts/scaleout.sh --short
