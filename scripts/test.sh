#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run).
#
# Stages, each run even when an earlier one failed:
#   prerequisites   redis-server (apt-get install if missing; its system
#                   service is not started), npm, a C compiler for -race
#   go mod download
#   gofmt           gofmt -l must list no file
#   go vet          go vet ./...
#   tidy + staticcheck  scripts/lint.sh: in the main module and every
#                   sub-module (each go.mod git tracks), go mod tidy -diff
#                   must print nothing and staticcheck (honnef.co/go/tools
#                   v0.8.2, installed from the Go module proxy by
#                   scripts/staticcheck.sh) must report nothing
#   go test         go test -race -count=1 ./...
#   fuzz            every Fuzz* target for FUZZTIME (default 5s) each
#   deploy          deploy/deploytest (own module): docker-compose.yml checked
#                   with compose-go; the Helm chart linted (helm lint --strict)
#                   and rendered with several value sets, every object decoded
#                   strictly against the Kubernetes, Gateway API and
#                   ServiceMonitor types, bad values rejected; helm is built
#                   once by scripts/helm.sh into a cache. Then
#                   scripts/cluster.sh --check: redis-server + 3 nodes + nginx
#                   (apt-get install if missing) and a smoke test through nginx
#   chaos           scripts/chaos.sh -short (cmd/chaos): 3 nodes on Redis behind
#                   nginx under load; kill -9 with stable node ids, then a
#                   Redis restart; fails on a hung call or a lost or
#                   duplicated event (nginx installed if missing; ~3 min)
#   upgrade         scripts/chaos.sh -scenarios upgrade -duration 45s: the
#                   same load while three nodes of the previous release
#                   (scripts/previous.sh builds it once into the cache of
#                   MCP_TOOLS_BIN) are replaced one by one by this build,
#                   then back; fails as the chaos stage does, or when an
#                   exchange across releases (a sampling reply, an MRTR
#                   round, a task's result, a session change) was not
#                   answered (~70 s)
#   storm           scripts/chaos.sh -storm -short: 3 nodes on one Redis, 1,000
#                   GET streams and 20 calls, one node killed with SIGKILL;
#                   fails on a stream not resumed on the survivors, a lost,
#                   repeated or missing event, or a call without an outcome
#                   (~30 s; make storm is the 10,000-stream form)
#   scaleout        scripts/scaleout.sh --short: 1 and 2 nodes, each in a network
#                   namespace of its own with a CPU share, Redis, nginx and
#                   mcpbench too, then 1 node on a 3-primary Redis Cluster;
#                   every call answered, every node served some, nothing
#                   left behind (as root; ~30 s)
#   conformance single      scripts/conformance.sh (one node, in-memory)
#   conformance cluster3    scripts/conformance.sh --cluster 3 (Redis + proxy)
#   conformance alpha-single    the 2026-07-28 suite (0.2.0-alpha.12):
#                   scripts/conformance.sh --requirements 2026-07-28; every
#                   required and pending check counts, tasks-* scenarios are
#                   printed against scripts/conformance-tasks-baseline.yml
#   conformance alpha-cluster3  the same through 3 nodes + randproxy
#   conformance cluster3-auth   scripts/conformance.sh --cluster 3 --auth: the
#                   stable suite with authorization on (the test OpenID
#                   provider's front adds a token; a request without one must
#                   get 401 first)
#   conformance alpha-cluster3-auth  the 2026-07-28 suite the same way
#   conformance skills-single   the Skills extension's scenarios of the
#                   0.2.0-alpha.12 suite, which no requirement set runs:
#                   scripts/conformance.sh --scenario sep-2640-skills-
#                   enumeration, -manifest and -directory; every check
#                   counts, and a skipped one fails the stage
#   conformance skills-cluster3  the same through 3 nodes + randproxy
#   conformance skills-cluster3-auth  the same with authorization on
#   go sdk clients  clients/gosdk (own module): the official Go SDK client
#                   v1.8.0 on 2026-07-28 (discovered) and pinned to 2025-03-26,
#                   2025-06-18 and 2025-11-25, against one node and a 3-node
#                   random-routing cluster (internal/clustertest); and its
#                   OAuth flow (authorization code + PKCE, step-up) through
#                   scripts/cluster.sh --auth (3 nodes, Redis, nginx, the test
#                   OpenID provider)
#   ts sdk clients  clients/ts (own module): the TypeScript SDK client
#                   (clients/ts/flows.mjs on node) against the same setups,
#                   and its OAuth flows (clients/ts/oauth.mjs) through
#                   scripts/cluster.sh --auth; the npm tools come from
#                   scripts/npm-tools.sh
#   inspector       clients/ts: the MCP Inspector CLI (Node 22 from the npm
#                   tools), tools/list and tools/call on both protocol eras
#
# Ends with a summary block whose last line is "N passed, M failed", counting
# stages; exits non-zero if any stage failed.
#
# Environment:
#   FUZZTIME=5s              time per fuzz target (0 skips fuzzing)
#   MCP_SKIP_CONFORMANCE=1   skip the nine conformance stages (quick local runs;
#                            CI never sets it)
#   MCP_SKIP_CLIENTS=1       skip the three client stages (quick local runs;
#                            CI never sets it)
#   GO_TEST_TIMEOUT=10m      go test -timeout
#   MCP_TOOLS_CACHE          npm tools cache (see scripts/npm-tools.sh)
#   MCP_TOOLS_BIN            helm and previous-release cache (see
#                            scripts/helm.sh, scripts/previous.sh)
#   MCP_SKIP_DEPLOY=1        skip the deploy stage (quick local runs; CI never
#                            sets it)
#   MCP_SKIP_CHAOS=1         skip the chaos and upgrade stages (quick local
#                            runs; CI never sets it)
#   MCP_SKIP_SCALEOUT=1      skip the scaleout stage (quick local runs, or
#                            not root; CI never sets it)
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FUZZTIME="${FUZZTIME:-5s}"
GO_TEST_TIMEOUT="${GO_TEST_TIMEOUT:-10m}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mcptest.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

STAGES=()
RESULTS=()
DURATIONS=()

# stage NAME FUNCTION: runs FUNCTION in a subshell with errexit and records
# PASS or FAIL.
stage() {
  local name="$1"; shift
  local start=$SECONDS rc
  printf '\n==> %s\n' "$name"
  set +e
  ( set -euo pipefail; "$@" )
  rc=$?
  set -e
  STAGES+=("$name")
  DURATIONS+=("$(( SECONDS - start ))s")
  if (( rc == 0 )); then
    RESULTS+=(PASS)
    printf '<== %s: PASS (%ss)\n' "$name" "$(( SECONDS - start ))"
  else
    RESULTS+=(FAIL)
    printf '<== %s: FAIL (exit %s, %ss)\n' "$name" "$rc" "$(( SECONDS - start ))"
  fi
}

skip() {
  STAGES+=("$1"); RESULTS+=(SKIP); DURATIONS+=("-")
  printf '\n==> %s: SKIP (%s)\n' "$1" "$2"
}



prerequisites() {
  local missing=()
  if ! command -v redis-server >/dev/null 2>&1 && [[ ! -x /usr/bin/redis-server ]]; then
    missing+=(redis-server)
  fi
  command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
  # nginx: cmd/chaos's tests run the repository's nginx configuration.
  command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
  if [[ "$(go env CGO_ENABLED)" != 1 ]] || ! command -v "$(go env CC)" >/dev/null 2>&1; then
    missing+=(gcc libc6-dev)
  fi
  if (( ${#missing[@]} > 0 )); then
    echo "installing: ${missing[*]}"
    apt_install "${missing[@]}"
  fi
  local redis
  redis="$(command -v redis-server || echo /usr/bin/redis-server)"
  echo "redis-server: $redis ($("$redis" --version | head -n 1))"
  echo "npm: $(npm --version), node: $(node --version 2>/dev/null || echo none)"
  echo "go: $(go version), cc: $(go env CC)"
}

go_mod_download() { go mod download; }

check_gofmt() {
  local files
  files="$(find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' \
    -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l)"
  if [[ -n "$files" ]]; then
    echo "gofmt: these files need formatting (run gofmt -w):"
    printf '  %s\n' $files
    return 1
  fi
  echo "gofmt: all files formatted"
}

go_vet() { go vet ./...; }

# The race detector's larger frames would hide what TestIdleGetStreamStack
# measures (an idle GET stream parks on a stack the runtime can shrink),
# so that test also runs once without it.
go_test() {
  go test -race -count=1 -timeout "$GO_TEST_TIMEOUT" ./...
  go test -count=1 -run '^TestIdleGetStreamStack$' -v ./mcp/ | grep -E '^(---|ok|FAIL)'
}

# fuzz_one PKG NAME: fuzzes one target for FUZZTIME. Go 1.26's fuzzing
# coordinator can fail a run at the -fuzztime boundary with a bare
# "context deadline exceeded" and no failing input (go.dev/issue/75804,
# fixed in Go 1.27). Such a run, and only such a run, is tried once more;
# a run that wrote a failing input, panicked or failed a check fails.
fuzz_one() {
  local pkg="$1" name="$2" out attempt
  for attempt in 1 2; do
    if out="$(go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=0 "$pkg" 2>&1)"; then
      printf '%s\n' "$out"
      return 0
    fi
    printf '%s\n' "$out"
    if (( attempt == 1 )) && grep -q 'context deadline exceeded' <<<"$out" \
      && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
      echo "fuzz: $pkg $name stopped at the fuzztime boundary with no failing input (go.dev/issue/75804); running it once more"
      continue
    fi
    return 1
  done
}

# Runs every fuzz target for FUZZTIME. Packages are those whose _test.go files
# declare a Fuzz function; targets come from go test -list.
fuzz() {
  local dirs dir pkg name n=0 failed=0
  dirs="$(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . \
    | grep -vE '^\./(\.git|node_modules)/|/testdata/' | xargs -r -n1 dirname | sort -u || true)"
  for dir in $dirs; do
    pkg="$dir"
    local names
    if ! names="$(go test -list '^Fuzz' "$pkg")"; then
      echo "$names"
      echo "fuzz: listing targets in $pkg failed"
      failed=1
      continue
    fi
    for name in $(grep -E '^Fuzz[A-Za-z0-9_]*$' <<<"$names" || true); do
      n=$(( n + 1 ))
      echo "fuzz: $pkg $name for $FUZZTIME"
      if ! fuzz_one "$pkg" "$name"; then
        echo "fuzz: $pkg $name FAILED; the failing input was saved under $dir/testdata/fuzz/$name (keep it as a regression case)"
        failed=1
      fi
    done
  done
  echo "fuzz: $n target(s) run"
  return "$failed"
}

# The deployment files: compose and chart checks in their own Go module (its
# heavy dependencies stay out of the product's graph), then the local
# nginx-fronted cluster's smoke test.
deploy() {
  local helm
  helm="$(scripts/helm.sh)"
  echo "deploy: helm $("$helm" version --short)"
  (
    cd deploy/deploytest
    go vet ./...
    HELM="$helm" go test -count=1 -timeout "$GO_TEST_TIMEOUT" ./...
  )
  scripts/cluster.sh --check
}

# The Skills extension's scenarios (SEP-2640), run by name.
SKILLS_SCENARIOS=(--scenario sep-2640-skills-enumeration --scenario sep-2640-skills-manifest --scenario sep-2640-skills-directory)

# conformance LABEL ARGS...: runs scripts/conformance.sh, keeping its output
# for the summary.
conformance() {
  local label="$1"; shift
  local rc=0
  scripts/conformance.sh --race "$@" 2>&1 | tee "$WORK/conformance-$label.log" || rc=$?
  return "$rc"
}

# Real clients against one node and a 3-node cluster. clients/gosdk and
# clients/ts are modules of their own, so the SDKs stay out of the
# product's dependency graph.
go_sdk_clients() {
  cd clients/gosdk
  go mod download
  go vet ./...
  go test -count=1 -timeout "$GO_TEST_TIMEOUT" ./...
}

# node_clients TEST: runs one test of clients/ts (-v: it prints each
# client's checks) with the pinned npm tools, installed on first use.
node_clients() {
  local tools
  tools="$(scripts/npm-tools.sh)"
  cd clients/ts
  go mod download
  go vet ./...
  MCP_NPM_TOOLS="$tools" go test -count=1 -v -timeout "$GO_TEST_TIMEOUT" -run "^$1\$" ./...
}

stage "prerequisites" prerequisites
stage "go mod download" go_mod_download
stage "gofmt" check_gofmt
stage "go vet" go_vet
stage "tidy + staticcheck" scripts/lint.sh
stage "go test -race" go_test
if [[ "$FUZZTIME" == 0 || "$FUZZTIME" == 0s ]]; then
  skip "fuzz" "FUZZTIME=$FUZZTIME"
else
  stage "fuzz ($FUZZTIME per target)" fuzz
fi
if [[ "${MCP_SKIP_DEPLOY:-}" == 1 ]]; then
  skip "deploy" "MCP_SKIP_DEPLOY=1"
else
  stage "deploy" deploy
fi
if [[ "${MCP_SKIP_CHAOS:-}" == 1 ]]; then
  skip "chaos" "MCP_SKIP_CHAOS=1"
  skip "upgrade" "MCP_SKIP_CHAOS=1"
  skip "storm" "MCP_SKIP_CHAOS=1"
else
  stage "chaos (kill -9, Redis restart)" env CHAOS_TIMEOUT=420 scripts/chaos.sh -short
  stage "upgrade (previous release → this build → back, under load)" env CHAOS_TIMEOUT=300 scripts/chaos.sh -scenarios upgrade -duration 45s
  stage "storm (a node killed under 1,000 GET streams)" env CHAOS_TIMEOUT=180 scripts/chaos.sh -storm -short
fi
if [[ "${MCP_SKIP_SCALEOUT:-}" == 1 ]]; then
  skip "scaleout" "MCP_SKIP_SCALEOUT=1"
else
  stage "scaleout (1 and 2 nodes, each a host of its own; 1 node on a Redis Cluster)" timeout --signal=INT --kill-after=30 300 scripts/scaleout.sh --short
fi
if [[ "${MCP_SKIP_CONFORMANCE:-}" == 1 ]]; then
  skip "conformance single" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance cluster3" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance alpha-single" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance alpha-cluster3" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance cluster3-auth" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance alpha-cluster3-auth" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance skills-single" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance skills-cluster3" "MCP_SKIP_CONFORMANCE=1"
  skip "conformance skills-cluster3-auth" "MCP_SKIP_CONFORMANCE=1"
else
  stage "conformance single" conformance single
  stage "conformance cluster3" conformance cluster3 --cluster 3
  stage "conformance alpha-single" conformance alpha-single --requirements 2026-07-28
  stage "conformance alpha-cluster3" conformance alpha-cluster3 --requirements 2026-07-28 --cluster 3
  stage "conformance cluster3-auth" conformance cluster3-auth --cluster 3 --auth
  stage "conformance alpha-cluster3-auth" conformance alpha-cluster3-auth --requirements 2026-07-28 --cluster 3 --auth
  stage "conformance skills-single" conformance skills-single --label skills-single "${SKILLS_SCENARIOS[@]}"
  stage "conformance skills-cluster3" conformance skills-cluster3 --label skills-cluster3 "${SKILLS_SCENARIOS[@]}" --cluster 3
  stage "conformance skills-cluster3-auth" conformance skills-cluster3-auth --label skills-cluster3-auth "${SKILLS_SCENARIOS[@]}" --cluster 3 --auth
fi
if [[ "${MCP_SKIP_CLIENTS:-}" == 1 ]]; then
  skip "go sdk clients" "MCP_SKIP_CLIENTS=1"
  skip "ts sdk clients" "MCP_SKIP_CLIENTS=1"
  skip "inspector" "MCP_SKIP_CLIENTS=1"
else
  stage "go sdk clients" go_sdk_clients
  stage "ts sdk clients" node_clients '(TestTypeScriptSDK|TestTypeScriptSDKOAuth|TestTypeScriptSDKTasks)'
  stage "inspector" node_clients TestInspectorCLI
fi

passed=0 failed=0
printf '\n==================== summary ====================\n'
for i in "${!STAGES[@]}"; do
  printf '%-4s  %-32s %s\n' "${RESULTS[$i]}" "${STAGES[$i]}" "${DURATIONS[$i]}"
  case "${RESULTS[$i]}" in
    PASS) passed=$(( passed + 1 )) ;;
    FAIL) failed=$(( failed + 1 )) ;;
  esac
done
for label in single cluster3 alpha-single alpha-cluster3 cluster3-auth alpha-cluster3-auth skills-single skills-cluster3 skills-cluster3-auth; do
  if [[ "${MCP_SKIP_CONFORMANCE:-}" == 1 ]]; then
    echo "conformance[$label]: skipped"
  elif line="$(grep -E "^conformance\[$label\]: Total: " "$WORK/conformance-$label.log" 2>/dev/null | tail -n 1)"; then
    echo "$line"
    grep -E "^conformance\[$label\]: tasks \(not counted\): " "$WORK/conformance-$label.log" | tail -n 1 || true
    # The failing checks, named where the summary is read (the stage's own
    # output may be cut from a CI log).
    sed -n "/^conformance\[$label\]: [0-9]* failed check(s):/,\$p" "$WORK/conformance-$label.log" \
      | grep -E "^conformance\[$label\]: " | head -n 12 || true
  else
    echo "conformance[$label]: no total (the run failed before the suite finished; see above)"
  fi
done
echo "total time: ${SECONDS}s"
echo "$passed passed, $failed failed"
(( failed == 0 ))
