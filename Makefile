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

.PHONY: chaos chaos-short chaos-upgrade soak

# The chaos harness (cmd/chaos, about 25 minutes): three nodes on Redis
# behind nginx under a verifying load while faults hit them: kill -9 with
# stable ids, a SIGTERM rolling restart, Redis restarts (no persistence,
# AOF), toxiproxy latency and a cut, a Sentinel failover, a node cut off
# from Redis, a rolling upgrade from the previous release and back (on a
# Redis server and on a Redis Cluster), a Redis Cluster primary's failover
# (kill -9, then CLUSTER FAILOVER on a replica).
# Prints the table of docs/RELIABILITY.md; fails on a hung call or a lost
# or duplicated event. Installs nginx and redis-server when missing;
# builds the previous release once (scripts/previous.sh).
chaos:
	scripts/chaos.sh

# The soak (not part of scripts/test.sh; an hour): the chaos load with a
# fault every 4 minutes drawn from the other scenarios, each node's RSS,
# heap, goroutines and open files and Redis's keys and memory sampled
# every 10 s into docs/soak (samples.csv, soak.md with the slopes over the
# last three quarters, and each quarter's peak). SOAK=20m shortens it;
# CHAOS_TIMEOUT (seconds, 90 minutes here) bounds the run.
# docs/soak/soak.svg is drawn from the samples by cmd/scaleplot.
SOAK ?= 1h
soak:
	CHAOS_TIMEOUT=$${CHAOS_TIMEOUT:-5400} scripts/chaos.sh -scenarios soak -duration $(SOAK)
	go run ./cmd/scaleplot -soak docs/soak/samples.csv

# The upgrade scenarios alone, with the full load (about 4 minutes): on a
# Redis server, and on a Redis Cluster (sharded pub/sub); the first's
# 45-second form is a stage of scripts/test.sh. See docs/UPGRADING.md.
chaos-upgrade:
	scripts/chaos.sh -scenarios upgrade,upgrade-cluster

# Its short version (kill -9 and a Redis restart, ~3 minutes), a stage of
# scripts/test.sh.
chaos-short:
	scripts/chaos.sh -short

.PHONY: storm storm-short

# A node's death at scale (cmd/chaos -storm, about 2 minutes; needs
# redis-server): three nodes on one Redis, 10,000 sessions each holding
# its GET stream open on a node, 500 progress calls in flight and a
# tools/list_changed every second; one node killed with SIGKILL. When
# every stream resumed on the survivors and every cut call ended, every
# event checked once, Redis's CPU and commands during the recovery.
# Writes docs/scaling/storm/storm.{md,json} and the charts beside them;
# fails on a lost, repeated or never resumed stream or a hung call.
storm:
	@mkdir -p docs/scaling/storm
	go run ./cmd/chaos -storm -storm-out docs/scaling/storm/storm
	go run ./cmd/scaleplot -storm docs/scaling/storm/storm.json

# Its short form (1,000 streams, 20 calls, under a minute), printed only.
storm-short:
	go run ./cmd/chaos -storm -short

.PHONY: bench bench-micro

# Benchmark suite (about 15 minutes on 2 cores): mcpcluster on 1 node
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

.PHONY: scaleout scaleout-short scaleout-small scaleout-redis scaleout-plots

# Scale-out testbed (as root, about 6 minutes on 2 cores): redis, nginx,
# the load generator and 1 to 4 nodes each on a host of its own (network
# namespaces on a bridge, a CPU share per host via cgroups, netem delay
# where the kernel has it); throughput, latency and each host's CPU per
# scenario, and the efficiency T(N)/(N×T(1)). Writes the tables to
# docs/scaling/main.md, every point to docs/scaling/main.json, and the
# plots. See docs/SCALING.md.
scaleout:
	scripts/scaleout.sh --out docs/scaling/main.md --data docs/scaling/main.json
	$(MAKE) scaleout-plots

# Its CI check (under 2 minutes): N = 1 and 2, echo only, and N = 1 on a
# three-primary Redis Cluster; every call answered, every node served
# requests, every primary watched, nothing left behind.
scaleout-short:
	scripts/scaleout.sh --short

# What grows with the number of nodes (as root, about 4 minutes): 1 to 16
# nodes of 0.05 core, 4 workers each, four scenarios, 5 s per point;
# docs/scaling/small.{md,json} and the plots.
scaleout-small:
	SCALEOUT_NODE_CPU=0.05 SCALEOUT_WORKERS_PER_NODE=4 \
	SCALEOUT_SCENARIOS="echo@2025-11-25 echo@2026-07-28 sampling@2025-11-25 churn@2025-11-25" \
	SCALEOUT_DURATION=5s scripts/scaleout.sh --nodes "1 2 4 8 16" \
		--out docs/scaling/small.md --data docs/scaling/small.json
	$(MAKE) scaleout-plots

# Where Redis is the limit (as root, about 6 minutes): the --redis-bound
# preset (0.05 core per Redis server, N = 1, 2 and 4, 32 workers per node,
# four scenarios, 5 s per point) on one Redis and on Redis Clusters of 3
# and 6 primaries; docs/scaling/redis.{md,json} and the plots.
scaleout-redis:
	scripts/scaleout.sh --redis-bound --shards "0 3 6" \
		--out docs/scaling/redis.md --data docs/scaling/redis.json
	$(MAKE) scaleout-plots

# The SVG charts of every docs/scaling/*.json (cmd/scaleplot), beside them.
scaleout-plots:
	@set -- docs/scaling/*.json; [ -e "$$1" ] || { echo "no docs/scaling/*.json: run make scaleout, scaleout-small or scaleout-redis first"; exit 1; }; \
	go run ./cmd/scaleplot -out docs/scaling "$$@"

.PHONY: scaleout-peers

# The peers on the same testbed (as root, about 5 minutes): mcpcluster,
# go-sdk and mcp-go (bench/peers) with 2 and 3 replicas behind nginx,
# round robin and hashed by Mcp-Session-Id: the share of calls that fail
# and why; then a kill -9 of a replica under client-address affinity:
# calls failed, streams lost, calls hung, sessions lost.
# See docs/SCALING.md, "The peers on the same testbed".
scaleout-peers:
	scripts/scaleout-peers.sh
