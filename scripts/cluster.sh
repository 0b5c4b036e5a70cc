#!/usr/bin/env bash
# A local mcpcluster without containers: one redis-server, N nodes sharing it
# (and one random state key), and nginx in front of them with the repository's
# deploy/nginx/compose.conf (round robin, SSE-ready). Everything listens on 127.0.0.1
# and runs from a scratch directory; Ctrl-C stops it all.
#
# Usage: scripts/cluster.sh [--check] [--auth] [--run CMD] [--nodes N]
#                           [--port PORT] [--keep]
#
#   --check      start the cluster, run a smoke test through nginx with curl
#                (initialize, then tools/call echo several times so that the
#                calls of one session land on every node, open an SSE
#                stream, and find mcp_streams_open on the nodes' /metrics),
#                print the result and stop everything. Exit status
#                0 when the smoke test passed. MCP_CLUSTER_CHECK=1 does the
#                same.
#   --auth       authorization on: the test OpenID provider
#                (internal/tools/oidcprovider) runs on loopback and the nodes
#                accept only its tokens, with nginx's URL as audience and
#                scope mcp:tools; the tool add also needs mcp:math (hidden
#                without it, 403 insufficient_scope when called: step-up).
#                Registered clients: svc (secret svc-secret; client
#                credentials) and app (public, PKCE; redirect URI
#                http://127.0.0.1:1/callback; the provider's login step
#                approves at once), both allowed mcp:tools, mcp:read and
#                mcp:math. --check then also expects 401 without a token and
#                makes its calls with a client-credentials token.
#   --run CMD    once the cluster is up (and --check passed), run CMD with
#                bash and stop everything; the exit status is CMD's. CMD sees
#                MCP_CLUSTER_URL (nginx's MCP endpoint), MCP_CLUSTER_NODES
#                (the nodes' host:port, space-separated),
#                MCP_CLUSTER_ACCESS_LOG (nginx's access log: one line per
#                request with its status and upstream=NODE) and, with --auth,
#                MCP_CLUSTER_ISSUER.
#   --nodes N    number of nodes (default 3)
#   --port PORT  nginx's port (default: 8080 when free, else a free port;
#                --check always takes a free port)
#   --keep       keep the scratch directory (logs, config) on exit
#
# redis-server, nginx and curl are installed from Debian packages when
# missing (apt-get update first; their system services are not started).
# The nodes are built once from ./cmd/server. Environment: NODE_DRAIN_TIMEOUT
# (the nodes' --drain-timeout, default 5s), CLUSTER_START_TIMEOUT (seconds to
# wait for each process, default 60).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CHECK="${MCP_CLUSTER_CHECK:-0}"
NODES=3
PORT=""
KEEP=0
AUTH=0
RUN=""
NODE_DRAIN_TIMEOUT="${NODE_DRAIN_TIMEOUT:-5s}"
CLUSTER_START_TIMEOUT="${CLUSTER_START_TIMEOUT:-60}"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) CHECK=1; shift ;;
    --nodes) NODES="${2:?--nodes needs a number}"; shift 2 ;;
    --nodes=*) NODES="${1#*=}"; shift ;;
    --port) PORT="${2:?--port needs a number}"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    --keep) KEEP=1; shift ;;
    --auth) AUTH=1; shift ;;
    --run) RUN="${2:?--run needs a command}"; shift 2 ;;
    --run=*) RUN="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cluster: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || { echo "cluster: --nodes needs a positive integer" >&2; exit 2; }
[[ -z "$PORT" || "$PORT" =~ ^[1-9][0-9]*$ ]] || { echo "cluster: --port needs a port number" >&2; exit 2; }

say() { printf 'cluster: %s\n' "$*"; }
fail() { say "ERROR: $*"; exit 1; }

# ------------------------------------------------------------ prerequisites ---
missing=()
find_bin redis-server >/dev/null || missing+=(redis-server)
find_bin nginx >/dev/null || missing+=(nginx)
find_bin curl >/dev/null || missing+=(curl)
if (( ${#missing[@]} > 0 )); then
  say "installing ${missing[*]} (Debian packages)"
  apt_install "${missing[@]}" || fail "apt-get install ${missing[*]} failed"
fi
REDIS_BIN="$(find_bin redis-server)" || fail "redis-server not found"
NGINX_BIN="$(find_bin nginx)" || fail "nginx not found"

# ------------------------------------------------------------------ cleanup ---
PIDS=()
NAMES=()
LOGS=()
TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcpcluster.XXXXXX")"
# nginx workers drop privileges when started as root: let them reach their
# temp directories.
chmod 755 "$TMP"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i
  # nginx first (no new requests), then the nodes (they drain), then Redis.
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    stop_pid "${NAMES[$i]}" "${PIDS[$i]}" 150
  done
  if (( ${#PIDS[@]} > 0 )); then say "stopped ${#PIDS[@]} process(es)"; fi
  if (( KEEP )); then say "scratch directory kept: $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


dump_logs() { tail_logs 20; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a loopback port nothing listens on (not one handed out before).
USED_PORTS=" "
free_port() {
  local p i
  for (( i=0; i<200; i++ )); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
    [[ "$USED_PORTS" == *" $p "* ]] && continue
    if ! port_open "$p"; then USED_PORTS+="$p "; echo "$p"; return 0; fi
  done
  return 1
}

# free_port_held: a free port below the kernel's ephemeral range, for a
# port chosen long before it is bound (nginx's with --auth): outgoing
# connections (the nodes' to Redis) never take such a port meanwhile.
free_port_held() {
  local low p i
  low="$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
  (( low > 20000 )) || low=32768
  for (( i=0; i<200; i++ )); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % (low - 20000) ))
    [[ "$USED_PORTS" == *" $p "* ]] && continue
    if ! port_open "$p"; then USED_PORTS+="$p "; echo "$p"; return 0; fi
  done
  return 1
}

# wait_up PID CMD...: retries CMD until it succeeds (0); 1 if PID exits
# first, 2 after CLUSTER_START_TIMEOUT.
wait_up() {
  local pid="$1"; shift
  local deadline=$(( SECONDS + CLUSTER_START_TIMEOUT ))
  while (( SECONDS < deadline )); do
    kill -0 "$pid" 2>/dev/null || return 1
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 2
}

# forget_last: drops the last started process (it exited) from the lists.
forget_last() {
  wait "${PIDS[-1]}" 2>/dev/null || true
  unset 'PIDS[-1]' 'NAMES[-1]' 'LOGS[-1]'
}

# start_on_free_port NAME LOGFILE PROBE CMD...: picks a free port, starts
# CMD with {PORT} in its arguments replaced by it and waits until PROBE PORT
# succeeds. Another process can take the port between the pick and the
# bind, so a start that exits early is retried on another port. Sets PORT_OF.
start_on_free_port() {
  local name="$1" logf="$2" probe="$3"; shift 3
  local try port rc args a
  for (( try=1; try<=5; try++ )); do
    port="$(free_port)" || fail "no free port for $name"
    args=()
    for a in "$@"; do args+=("${a//\{PORT\}/$port}"); done
    start "$name" "$logf" "${args[@]}"
    rc=0; wait_up "${PIDS[-1]}" "$probe" "$port" || rc=$?
    case "$rc" in
      0) PORT_OF="$port"; return 0 ;;
      1) say "$name exited at start on port $port (try $try): $(tail -n 1 "$logf")"; forget_last ;;
      *) dump_logs; fail "$name was not up within ${CLUSTER_START_TIMEOUT}s" ;;
    esac
  done
  dump_logs
  fail "$name did not start (5 tries)"
}

# -------------------------------------------------------------------- build ---
mkdir -p "$TMP/bin" "$TMP/logs" "$TMP/redis" "$TMP/nginx/logs" "$TMP/nginx/tmp"
chmod 755 "$TMP/nginx" "$TMP/nginx/tmp"
say "building ./cmd/server"
go build -o "$TMP/bin/server" ./cmd/server || fail "./cmd/server does not build"
if (( AUTH )); then
  go build -o "$TMP/bin/oidcprovider" ./internal/tools/oidcprovider || fail "./internal/tools/oidcprovider does not build"
fi

# -------------------------------------------------------------------- redis ---
redis_ping() {
  local reply
  reply="$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'PING\r\n' >&3; head -c 5 <&3")" || return 1
  [[ "$reply" == "+PONG" ]]
}
start_on_free_port redis "$TMP/logs/redis.log" redis_ping "$REDIS_BIN" --port '{PORT}' --bind 127.0.0.1 \
  --save "" --appendonly no --dir "$TMP/redis" --daemonize no
REDIS_URL="redis://127.0.0.1:$PORT_OF/0"
say "redis-server pid ${PIDS[-1]} on $REDIS_URL"

# --------------------------------------------------------------------- auth ---
# The tokens' audience is nginx's URL, so nginx's port is chosen now.
NODE_AUTH=()
AUTH_HEADER=()
if (( AUTH )); then
  if [[ -z "$PORT" ]] || (( CHECK )); then PORT="$(free_port_held)" || fail "no free port for nginx"; fi
  RESOURCE="http://127.0.0.1:$PORT/mcp"
  oidc_up() { curl -fsS --max-time 2 "http://127.0.0.1:$1/.well-known/openid-configuration"; }
  start_on_free_port oidcprovider "$TMP/logs/oidcprovider.log" oidc_up "$TMP/bin/oidcprovider" \
    --listen '127.0.0.1:{PORT}' --resource "$RESOURCE" \
    --client svc:svc-secret:mcp:tools,mcp:read,mcp:math --client app::mcp:tools,mcp:read,mcp:math \
    --redirect http://127.0.0.1:1/callback
  ISSUER="http://127.0.0.1:$PORT_OF"
  say "oidcprovider pid ${PIDS[-1]}: issuer $ISSUER, audience $RESOURCE"
  NODE_AUTH=(--auth-issuer "$ISSUER" --auth-resource "$RESOURCE" --auth-scopes mcp:tools --auth-tool-scopes add=mcp:math)
fi

# -------------------------------------------------------------------- nodes ---
# One random state key for every node: a request sealed by one opens on all.
# Each node takes a port from the kernel (127.0.0.1:0) and prints its URL.
STATE_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export MCP_STATE_KEY="$STATE_KEY"
for (( i=1; i<=NODES; i++ )); do
  # nginx connects from 127.0.0.1 and names the client in X-Forwarded-For:
  # trusting it gives every anonymous client its own per-caller limits.
  start "node$i" "$TMP/logs/node$i.log" "$TMP/bin/server" --addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 \
    --redis-url "$REDIS_URL" --node-id "node$i" --drain-timeout "$NODE_DRAIN_TIMEOUT" \
    --trusted-proxies 127.0.0.1 "${NODE_AUTH[@]}"
done
unset MCP_STATE_KEY
node_addr() { sed -n 's|^mcpcluster node .* listening on http://\([0-9.:]*\)/.*|\1|p' "$1" | head -n 1; }
metrics_addr() { sed -n 's|^metrics on http://\([0-9.:]*\)/.*|\1|p' "$1" | head -n 1; }
node_ready() { local a; a="$(node_addr "$1")" && [[ -n "$a" ]] && curl -fsS --max-time 2 "http://$a/readyz"; }
NODE_ADDRS=()
METRICS_ADDRS=()
for (( i=1; i<=NODES; i++ )); do
  idx=$(( ${#PIDS[@]} - NODES + i - 1 ))
  rc=0; wait_up "${PIDS[$idx]}" node_ready "${LOGS[$idx]}" || rc=$?
  (( rc == 0 )) || { dump_logs; fail "node$i did not become ready"; }
  NODE_ADDRS+=("$(node_addr "${LOGS[$idx]}")")
  METRICS_ADDRS+=("$(metrics_addr "${LOGS[$idx]}")")
  say "node$i pid ${PIDS[$idx]} on http://${NODE_ADDRS[-1]}/mcp (ready)"
done

# -------------------------------------------------------------------- nginx ---
NGX="$TMP/nginx"
# nginx_site PORT: deploy/nginx/compose.conf (the one nginx configuration of
# the repository) with the nodes' addresses as upstream servers and
# 127.0.0.1:PORT as the listen address.
nginx_site() {
  local line a first=1
  while IFS= read -r line; do
    if [[ "$line" =~ ^([[:space:]]*)server[[:space:]]+node[0-9]+:8080(.*)$ ]]; then
      if (( first )); then
        for a in "${NODE_ADDRS[@]}"; do echo "${BASH_REMATCH[1]}server $a${BASH_REMATCH[2]}"; done
        first=0
      fi
    elif [[ "$line" =~ ^([[:space:]]*)listen[[:space:]]+8080\;$ ]]; then
      echo "${BASH_REMATCH[1]}listen 127.0.0.1:$1;"
    else
      echo "$line"
    fi
  done <"$ROOT/deploy/nginx/compose.conf"
}
# nginx_conf PORT: the main config around nginx_site.
nginx_conf() {
  echo "# Generated by scripts/cluster.sh around deploy/nginx/compose.conf."
  echo "worker_processes 1;"
  echo "daemon off;"
  echo "pid $NGX/nginx.pid;"
  echo "error_log $NGX/logs/error.log warn;"
  echo "events { worker_connections 1024; }"
  echo "http {"
  echo "    log_format upstream '\$remote_addr \"\$request\" \$status upstream=\$upstream_addr rt=\$request_time';"
  echo "    access_log $NGX/logs/access.log upstream;"
  echo "    client_body_temp_path $NGX/tmp/client_body;"
  echo "    proxy_temp_path $NGX/tmp/proxy;"
  echo "    fastcgi_temp_path $NGX/tmp/fastcgi;"
  echo "    uwsgi_temp_path $NGX/tmp/uwsgi;"
  echo "    scgi_temp_path $NGX/tmp/scgi;"
  echo "    include $NGX/site.conf;"
  echo "}"
}
nginx_health() { curl -fsS --max-time 2 "http://127.0.0.1:$1/nginx-health"; }
# run_nginx PORT: writes the config for PORT, checks it and runs nginx.
run_nginx() {
  nginx_site "$1" >"$NGX/site.conf"
  nginx_conf "$1" >"$NGX/nginx.conf"
  "$NGINX_BIN" -t -q -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/logs/error.log" || { cat "$NGX/logs/error.log"; return 1; }
  exec "$NGINX_BIN" -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/logs/error.log"
}
if [[ -z "$PORT" ]] && (( ! CHECK )) && ! port_open 8080; then PORT=8080; fi
if [[ -n "$PORT" ]] && (( ! CHECK || AUTH )); then
  port_open "$PORT" && fail "port $PORT is in use"
  start nginx "$TMP/logs/nginx.log" run_nginx "$PORT"
  rc=0; wait_up "${PIDS[-1]}" nginx_health "$PORT" || rc=$?
  (( rc == 0 )) || { dump_logs; fail "nginx did not start on 127.0.0.1:$PORT"; }
else
  start_on_free_port nginx "$TMP/logs/nginx.log" nginx_health run_nginx '{PORT}'
  PORT="$PORT_OF"
fi
URL="http://127.0.0.1:$PORT/mcp"
say "nginx pid ${PIDS[-1]} on 127.0.0.1:$PORT -> ${NODE_ADDRS[*]}"

# -------------------------------------------------------------------- check ---
# post BODY [SESSION]: POSTs a JSON-RPC message to the cluster; prints the
# response headers to $TMP/h and the body (SSE data lines unwrapped).
post() {
  local body="$1" sid="${2:-}" args=()
  [[ -n "$sid" ]] && args+=(-H "Mcp-Session-Id: $sid" -H "Mcp-Protocol-Version: 2025-06-18")
  curl -sS --max-time 10 -D "$TMP/h" -X POST "$URL" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    "${AUTH_HEADER[@]}" "${args[@]}" --data-binary "$body" | sed -n 's/^data: //p;/^{/p'
}

# auth_check: without a token the cluster answers 401 with a challenge
# naming its Protected Resource Metadata, which names the provider; then
# AUTH_HEADER gets a client-credentials token for the calls that follow.
auth_check() {
  local status challenge prm meta token
  post '{"jsonrpc":"2.0","id":1,"method":"ping"}' >/dev/null
  status="$(head -n 1 "$TMP/h" | tr -d '\r')"
  [[ "$status" == *" 401"* ]] || { say "without a token: $status, want 401"; return 1; }
  challenge="$(tr -d '\r' <"$TMP/h" | grep -i '^www-authenticate:' || true)"
  prm="$(sed -n 's/.*resource_metadata="\([^"]*\)".*/\1/p' <<<"$challenge")"
  [[ -n "$prm" ]] || { say "401 without a resource_metadata challenge: $challenge"; return 1; }
  meta="$(curl -fsS --max-time 5 "$prm")" || { say "metadata $prm unreachable"; return 1; }
  [[ "$meta" == *"\"$ISSUER\""* && "$meta" == *"\"$RESOURCE\""* ]] || { say "metadata does not name $ISSUER and $RESOURCE: $meta"; return 1; }
  say "check: 401 without a token ($challenge)"
  token="$(curl -fsS --max-time 5 -u svc:svc-secret "$ISSUER/oauth/token" \
    -d grant_type=client_credentials -d scope=mcp:tools --data-urlencode "resource=$RESOURCE" \
    | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')"
  [[ -n "$token" ]] || { say "no client-credentials token from $ISSUER"; return 1; }
  AUTH_HEADER=(-H "Authorization: Bearer $token")
  say "check: client-credentials token from $ISSUER"
}

smoke() {
  local out sid i n=$(( NODES * 2 )) status
  if (( AUTH )); then auth_check || return 1; fi
  out="$(post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cluster-check","version":"0"}}}')"
  [[ "$out" == *'"protocolVersion":"2025-06-18"'* ]] || { say "initialize: unexpected answer: $out"; return 1; }
  sid="$(tr -d '\r' <"$TMP/h" | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii][Dd]: //p')"
  [[ -n "$sid" ]] || { say "initialize: no Mcp-Session-Id header"; return 1; }
  say "check: initialize OK (session ${sid:0:12}...)"
  post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$sid" >/dev/null
  status="$(head -n 1 "$TMP/h" | tr -d '\r')"
  [[ "$status" == *" 202"* ]] || { say "notifications/initialized: $status"; return 1; }
  for (( i=1; i<=n; i++ )); do
    out="$(post "{\"jsonrpc\":\"2.0\",\"id\":$(( i + 1 )),\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hello $i\"}}}" "$sid")"
    [[ "$out" == *'"text":"hello '"$i"'"'* ]] || { say "tools/call echo #$i: unexpected answer: $out"; return 1; }
  done
  say "check: $n tools/call echo OK"
  # Round robin: the session's requests reached every node.
  local hit
  hit="$(grep -oE 'upstream=[0-9.:]+' "$NGX/logs/access.log" | sort -u | wc -l)"
  local spread="" a c
  for i in "${!NODE_ADDRS[@]}"; do
    a="${NODE_ADDRS[$i]}"
    c="$(grep -c "upstream=$a\( \|,\|$\)" "$NGX/logs/access.log" || true)"
    spread+="${spread:+, }node$(( i + 1 )) x$c"
  done
  say "check: requests reached $hit of $NODES node(s): $spread"
  (( hit == NODES )) || { say "round robin did not reach every node"; return 1; }
  # An SSE stream opens through nginx: headers arrive at once, the stream
  # stays open (curl's timeout ends it).
  local hdrs
  hdrs="$(curl -sS --max-time 2 -D - -o /dev/null -H 'Accept: text/event-stream' "${AUTH_HEADER[@]}" \
    -H "Mcp-Session-Id: $sid" -H 'Mcp-Protocol-Version: 2025-06-18' "$URL" 2>/dev/null || true)"
  if ! grep -qi '^content-type: text/event-stream' <<<"$hdrs"; then
    say "GET stream: no text/event-stream answer: $(head -n 1 <<<"$hdrs")"; return 1
  fi
  say "check: SSE GET stream opened through nginx"
  # The nodes' Prometheus metrics have the open-streams gauge (the Helm
  # chart's ServiceMonitor scrapes /metrics; its HPA can scale on it). They
  # are served on each node's own metrics listener, not the MCP one.
  local a found=0
  for a in "${METRICS_ADDRS[@]}"; do
    if curl -fsS --max-time 5 "http://$a/metrics" | grep -q '^mcp_streams_open{'; then found=$(( found + 1 )); fi
  done
  (( found > 0 )) || { say "no node reports mcp_streams_open on /metrics"; return 1; }
  say "check: /metrics reports mcp_streams_open ($found of $NODES node(s) had a stream)"
  curl -sS --max-time 5 -X DELETE "$URL" "${AUTH_HEADER[@]}" -H "Mcp-Session-Id: $sid" -H 'Mcp-Protocol-Version: 2025-06-18' -o /dev/null || true
}

if (( CHECK )); then
  if smoke; then
    say "check: PASS"
    [[ -n "$RUN" ]] || exit 0
  else
    dump_logs
    say "check: FAIL"
    exit 1
  fi
fi
if [[ -n "$RUN" ]]; then
  say "running: $RUN"
  rc=0
  MCP_CLUSTER_URL="$URL" MCP_CLUSTER_NODES="${NODE_ADDRS[*]}" MCP_CLUSTER_ISSUER="${ISSUER:-}" \
    MCP_CLUSTER_ACCESS_LOG="$NGX/logs/access.log" bash -c "$RUN" || rc=$?
  if (( rc != 0 )); then dump_logs; say "run: FAIL (exit $rc)"; exit "$rc"; fi
  say "run: PASS"
  exit 0
fi

cat <<EOF

  mcpcluster: $NODES node(s) + redis-server + nginx, all on 127.0.0.1
  MCP endpoint:  $URL
  nodes:         ${NODE_ADDRS[*]}
  redis:         $REDIS_URL
  logs:          $TMP/logs, $NGX/logs (removed on exit; --keep keeps them)

  Press Ctrl-C to stop everything.

EOF
# Wait until Ctrl-C, or until a process dies.
while :; do
  for i in "${!PIDS[@]}"; do
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      st=0; wait "${PIDS[$i]}" 2>/dev/null || st=$?
      dump_logs
      fail "${NAMES[$i]} (pid ${PIDS[$i]}) exited with status $st"
    fi
  done
  sleep 1
done
