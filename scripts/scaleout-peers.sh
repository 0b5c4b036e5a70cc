#!/usr/bin/env bash
# The peers on the scale-out testbed: mcpcluster (./cmd/server on a
# Redis), the official Go SDK (bench/peers/gosdk) and mcp-go
# (bench/peers/mcpgo), each with 2 and 3 replicas behind the same nginx
# (deploy/nginx/compose.conf, its upstreams replaced), on the hosts of
# scripts/scaleout.sh (network namespaces, a CPU share each; its
# functions are sourced, not copied). For each server and replica count:
#
#   round robin  compose.conf as it is: echo, progress and sampling on
#                2025-11-25, echo on 2026-07-28 (which go-sdk does not
#                serve): operations per second, the share that failed
#                and why (mcpbench's error classes: session_not_found,
#                reply_not_delivered, ...), and the sessions that could
#                not even be opened.
#   sticky       the same scenarios on 2025-11-25 with
#                `hash $http_mcp_session_id consistent;` in the upstream.
#   kill -9      with client-address affinity (`hash $remote_addr
#                consistent;`, mcpbench's workers dial from addresses of
#                their own), one replica is killed in the middle of a
#                sampling run (sessions with open GET streams) and of a
#                run of long progress calls, and restarted 1.5 s later
#                (mcpcluster with the same --node-id, as the chaos
#                harness does). mcpbench resumes cut streams with
#                Last-Event-ID (--resume-cut) and pings every session at
#                the end (--check-sessions): calls failed, streams cut /
#                resumed / lost, calls that hung (timed out or still
#                waiting at the end), sessions lost.
#
# The output is one markdown table per part; the last line is "P passed,
# F failed". A point fails when mcpbench gave no report, or when
# mcpcluster failed a steady call or, in a kill, hung a call, lost a
# stream or lost a session (the peers' failures are what is measured).
# Everything is removed on exit, Ctrl-C and failure included.
#
# Usage: scripts/scaleout-peers.sh [--out FILE] [--replicas "2 3"]
#                                  [--servers "mcpcluster gosdk mcpgo"]
#                                  [--keep]
#
#   --out FILE        also write the tables to FILE
#   --replicas LIST   replica counts (default "2 3")
#   --servers LIST    servers to run (default "mcpcluster gosdk mcpgo")
#   --keep            keep the scratch directory (logs, mcpbench reports)
#
# Environment (defaults in parentheses): PEERS_DURATION (2s) and
# PEERS_WARMUP (500ms) per steady point, whose operations time out after
# PEERS_TIMEOUT (1s: a call that hangs is counted within the point);
# PEERS_KILL_DURATION (8s) per kill run, whose operations time out after
# PEERS_KILL_TIMEOUT (8s: longer than mcpcluster's 5 s membership lease,
# after which a dead node's calls end with -31003); the kill comes
# PEERS_KILL_AT (3: inside the measured window) seconds after mcpbench
# starts, the restart PEERS_KILL_GAP (1.5) seconds later;
# PEERS_WORKERS_PER_REPLICA (8).
# The hosts' CPU shares, netem delay and the rest are scripts/scaleout.sh's
# SCALEOUT_* settings. Run as root; about 5 minutes on 2 cores.
set -euo pipefail
export LC_ALL=C

peers_usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

PEERS_OUT=""
PEERS_KEEP=()
REPLICAS="2 3"
SERVERS="mcpcluster gosdk mcpgo"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) PEERS_OUT="${2:?--out needs a file}"; shift 2 ;;
    --out=*) PEERS_OUT="${1#*=}"; shift ;;
    --replicas) REPLICAS="${2:?--replicas needs a list}"; shift 2 ;;
    --replicas=*) REPLICAS="${1#*=}"; shift ;;
    --servers) SERVERS="${2:?--servers needs a list}"; shift 2 ;;
    --servers=*) SERVERS="${1#*=}"; shift ;;
    --keep) PEERS_KEEP=(--keep); shift ;;
    -h|--help) peers_usage; exit 0 ;;
    *) echo "scaleout-peers: unknown argument: $1" >&2; peers_usage >&2; exit 2 ;;
  esac
done
[[ -z "$PEERS_OUT" || "$PEERS_OUT" == /* ]] || PEERS_OUT="$PWD/$PEERS_OUT"

# The testbed: settings, prerequisites, hosts, cleanup on exit (its
# trap), and the functions used below (cluster_up, cluster_down,
# start_on, stop_pid, nginx_site, leftovers, ...).
# shellcheck source=scripts/scaleout.sh
. "$(dirname "${BASH_SOURCE[0]}")/scaleout.sh" "${PEERS_KEEP[@]}"

say() { printf 'scaleout-peers: %s\n' "$*" >&2; }

DURATION="${PEERS_DURATION:-2s}"
WARMUP="${PEERS_WARMUP:-500ms}"
OP_TIMEOUT="${PEERS_TIMEOUT:-1s}"
KILL_DURATION="${PEERS_KILL_DURATION:-8s}"
KILL_TIMEOUT="${PEERS_KILL_TIMEOUT:-8s}"
KILL_AT="${PEERS_KILL_AT:-3}"
KILL_GAP="${PEERS_KILL_GAP:-1.5}"
PER_REPLICA="${PEERS_WORKERS_PER_REPLICA:-8}"
for v in DURATION KILL_DURATION; do
  seconds "${!v}" >/dev/null || die "PEERS_$v: not a duration like 2s or 1500ms: ${!v}"
done
for v in REPLICAS SERVERS; do [[ -n "${!v// /}" ]] || die "--${v,,}: empty list"; done
for n in $REPLICAS; do [[ "$n" =~ ^[2-9]$ ]] || die "--replicas: counts from 2 to 9: $REPLICAS"; done
for s in $SERVERS; do [[ "$s" =~ ^(mcpcluster|gosdk|mcpgo)$ ]] || die "--servers: mcpcluster, gosdk or mcpgo, not $s"; done
[[ "$PER_REPLICA" =~ ^[1-9][0-9]*$ ]] || die "PEERS_WORKERS_PER_REPLICA: not a positive integer"

# ------------------------------------------------------------- servers ---
# cluster_up starts "$TMP/bin/server --addr IP:8080 <mcpcluster's flags>"
# on every node host: for a peer, that is a wrapper that keeps the listen
# address only. A peer has no /readyz: any HTTP answer to a POST on /mcp
# is ready (a GET may open a stream).
SERVER=""
use_server() {
  SERVER="$1"
  rm -f "$TMP/bin/server"
  if [[ "$SERVER" == mcpcluster ]]; then
    ln -s "$TMP/bin/mcpcluster" "$TMP/bin/server"
  else
    # shellcheck disable=SC2016 # $2 is the wrapper's
    printf '#!/bin/sh\n# cluster_up'"'"'s node command line, for a peer: its address only.\nexec "%s" --addr "$2"\n' \
      "$TMP/bin/$SERVER" >"$TMP/bin/server"
    chmod 755 "$TMP/bin/server"
  fi
}
node_ready() {
  if [[ "$SERVER" == mcpcluster ]]; then in_load curl -fsS --max-time 2 "http://$(node_ip "$1"):8080/readyz"
  else in_load curl -sS -o /dev/null --max-time 2 -X POST -H 'Content-Type: application/json' -d '{}' "http://$(node_ip "$1"):8080/mcp"
  fi
}
label_of() {
  case "$1" in
    mcpcluster) echo "mcpcluster" ;;
    gosdk) echo "go-sdk $GOSDK_VERSION" ;;
    mcpgo) echo "mcp-go $MCPGO_VERSION" ;;
  esac
}

# forget INDEX: drops a process from PIDS, NAMES and LOGS (kept dense:
# stop_processes walks them by index).
forget() {
  unset 'PIDS[$1]' 'NAMES[$1]' 'LOGS[$1]'
  PIDS=("${PIDS[@]}"); NAMES=("${NAMES[@]}"); LOGS=("${LOGS[@]}")
}
# index_of NAME: the index of the process of that name.
index_of() {
  local i
  for i in "${!NAMES[@]}"; do [[ "${NAMES[$i]}" == "$1" ]] && { echo "$i"; return 0; }; done
  return 1
}

# set_routing MODE: nginx restarted with compose.conf's upstream balanced
# round robin (rr), by session id (sid) or by client address (ip).
ROUTING=""
set_routing() {
  local mode="$1" ngx="$RUN/nginx" i rc line=""
  ROUTING="$mode"
  # shellcheck disable=SC2016 # nginx variables
  case "$mode" in
    sid) line='hash $http_mcp_session_id consistent;' ;;
    ip) line='hash $remote_addr consistent;' ;;
  esac
  i="$(index_of nginx)" || die "no nginx to restart"
  stop_pid nginx "${PIDS[$i]}"
  forget "$i"
  nginx_site "$R" | awk -v line="$line" '{ print } /^upstream mcp_nodes \{/ && line != "" { print "    " line }' >"$ngx/site.conf"
  [[ -z "$line" ]] || grep -qF "$line" "$ngx/site.conf" || die "deploy/nginx/compose.conf: no 'upstream mcp_nodes {' line"
  start_on lb nginx "$RUN/logs/nginx-$mode.log" "$NGINX_BIN" -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log"
  rc=0; wait_up "${PIDS[-1]}" nginx_health || rc=$?
  (( rc == 0 )) || fail_setup "nginx ($mode) did not answer on $LB_IP:8080"
}

# kill_replica I: kill -9 of node I, and its restart KILL_GAP seconds
# later with the same command line (mcpcluster: the same --node-id).
kill_replica() {
  local i j pid cmd=()
  i="$(index_of "node$1")" || die "no node$1 to kill"
  pid="${PIDS[$i]}"
  mapfile -d '' -t cmd <"/proc/$pid/cmdline"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  forget "$i"
  sleep "$KILL_GAP"
  export MCP_STATE_KEY="$STATE_KEY"
  start_on "node$1" "node$1" "$RUN/logs/node$1-restarted-$(( ++RESTARTS )).log" "${cmd[@]}"
  unset MCP_STATE_KEY
  j=0; wait_up "${PIDS[-1]}" node_ready "$1" || j=$?
  (( j == 0 )) || say "node$1 did not come back after its kill"
}
RESTARTS=0

# ---------------------------------------------------------------- points ---
# point LABEL SCENARIO REVISION [kill]: one mcpbench run through nginx,
# with a replica killed in it when asked; appends a row to $ROWS.
point() {
  local label="$1" sc="$2" rev="$3" fault="${4:-}" json log pid i rc extra=() secs
  json="$TMP/reports/$SERVER-$ROUTING-r$R-$label.json"
  log="$RUN/logs/mcpbench-$ROUTING-$label.log"
  if [[ -n "$fault" ]]; then
    extra=(-d "$KILL_DURATION" --timeout "$KILL_TIMEOUT" --resume-cut --check-sessions)
    [[ "$sc" == progress ]] && extra+=(--steps 20 --delay-ms 100)
    secs="$(seconds "$KILL_DURATION")"
  else
    extra=(-d "$DURATION" --timeout "$OP_TIMEOUT")
    secs="$(seconds "$DURATION")"
  fi
  start_on load mcpbench "$log" "$TMP/bin/mcpbench" --url "http://$LB_IP:8080/mcp" \
    --scenario "$sc" --revision "$rev" -c $(( PER_REPLICA * R )) --warmup "$WARMUP" --settle 0s \
    --source "$SOURCE_RANGE" -q --json "$json" "${extra[@]}"
  pid="${PIDS[-1]}"
  if [[ -n "$fault" ]]; then
    sleep "$KILL_AT"
    kill_replica "$R"
  fi
  wait_bench "$pid" $(( secs + 30 )); rc=$BENCH_RC
  i="$(index_of mcpbench)" && forget "$i"

  local name
  name="$(label_of "$SERVER")"
  if [[ ! -s "$json" ]]; then
    say "$name R=$R $ROUTING $label: no report (mcpbench exit $rc):"
    tail -n 20 "$log" | sed 's/^/    /' >&2
    printf '%s\t%s\t%s\t%s\t%s\tnone\n' "$name" "$ROUTING" "$R" "$label" "$fault" >>"$ROWS"
    FAILED=$(( FAILED + 1 ))
    return 0
  fi
  # name routing R label fault | ops/s ops errors setup-errors workers |
  # classes | cut resumed lost get-cut get-resumed get-lost | hung |
  # sessions alive lost
  local row
  row="$(jq -r '
    def classes: [(.error_classes // {} | to_entries[]), (.setup_error_classes // {} | to_entries[] | .key += " (setup)")]
      | sort_by(-.value) | map("\(.key) \(.value)") | join(", ");
    (.counters // {}) as $c |
    [.ops_per_s, .ops, .errors, ([(.setup_errors // {})[] | .count] | add // 0), .concurrency,
     (if classes == "" then "none" else classes end),
     ($c.streams_cut // 0), ($c.streams_resumed // 0), ($c.streams_lost // 0),
     ($c.get_streams_cut // 0), ($c.get_streams_resumed // 0), ($c.get_streams_lost // 0),
     ((.error_kinds.timeout.count // 0) + ($c.stuck_at_end // 0)),
     ($c.sessions_alive // 0), ($c.sessions_lost // 0)] | @tsv' "$json")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$ROUTING" "$R" "$label" "$fault" "$row" >>"$ROWS"

  local ops errs setup causes slost_calls glost hung slost why=""
  IFS=$'\t' read -r _ ops errs setup _ causes _ _ slost_calls _ _ glost hung _ slost <<<"$row"
  if [[ "$SERVER" == mcpcluster ]]; then
    if [[ -z "$fault" ]]; then
      (( errs == 0 && setup == 0 )) || why+=" errors: $causes;"
    else
      (( hung == 0 )) || why+=" $hung call(s) hung;"
      (( slost_calls == 0 && glost == 0 )) || why+=" streams lost: $slost_calls call, $glost GET;"
      (( slost == 0 )) || why+=" $slost session(s) lost;"
    fi
  fi
  (( ops > 0 )) || [[ "$SERVER" != mcpcluster ]] || why+=" no operation succeeded;"
  if [[ -z "$why" ]]; then
    say "$name R=$R $ROUTING $label: $ops ok, $errs failed, $setup session(s) not opened; causes: $causes"
    PASSED=$(( PASSED + 1 ))
  else
    say "$name R=$R $ROUTING $label: FAILED:$why (mcpbench exit $rc)"
    FAILED=$(( FAILED + 1 ))
  fi
}

# ---------------------------------------------------------------- tables ---
peers_report() {
  echo "| server | routing | replicas | scenario | ops/s | failed ops | sessions not opened | main failure cause (all causes) |"
  echo "|---|---|---:|---|---:|---:|---:|---|"
  awk -F'\t' '
    function routing(r) { return r == "rr" ? "round robin" : r == "sid" ? "hash $http_mcp_session_id" : "hash $remote_addr" }
    $5 != "" { next }
    $6 == "none" { printf "| %s | %s | %s | %s | – | no report | – | – |\n", $1, routing($2), $3, $4; next }
    { tot = $7 + $8; fail = tot ? sprintf("%.1f%%", 100 * $8 / tot) : "–"
      main = $11; sub(/,.*/, "", main); sub(/ [0-9]+$/, "", main)
      if ($11 == "none") main = "–"
      printf "| %s | %s | %s | %s | %.0f | %s | %d of %d | %s (%s) |\n", $1, routing($2), $3, $4, $6, fail, $9, $10, main, $11 }' "$ROWS"
  echo
  echo "Kill -9 of one replica (restarted ${KILL_GAP} s later), client-address affinity (hash \$remote_addr consistent):"
  echo
  echo "| server | replicas | run | ops ok | calls failed | call streams cut / resumed / lost | GET streams cut / resumed / lost | calls hung | sessions lost | causes |"
  echo "|---|---:|---|---:|---:|---|---|---:|---|---|"
  awk -F'\t' '
    $5 == "" { next }
    $6 == "none" { printf "| %s | %s | %s | no report | – | – | – | – | – | – |\n", $1, $3, $4; next }
    { printf "| %s | %s | %s | %d | %d | %d / %d / %d | %d / %d / %d | %d | %d of %d | %s |\n",
        $1, $3, $4, $7, $8, $12, $13, $14, $15, $16, $17, $18, $20, $19 + $20, $11 }' "$ROWS"
}

# ------------------------------------------------------------------- run ---
mkdir -p "$TMP/reports"
say "building ./cmd/server, ./cmd/mcpbench and the peers (bench/peers/gosdk, bench/peers/mcpgo)"
go build -o "$TMP/bin/mcpcluster" ./cmd/server || die "./cmd/server does not build"
go build -o "$TMP/bin/mcpbench" ./cmd/mcpbench || die "./cmd/mcpbench does not build"
(cd bench && go build -o "$TMP/bin/gosdk" ./peers/gosdk && go build -o "$TMP/bin/mcpgo" ./peers/mcpgo) \
  || die "the peers (bench/peers) do not build"
GOSDK_VERSION="$(cd bench && go list -m -f '{{.Version}}' github.com/modelcontextprotocol/go-sdk)"
MCPGO_VERSION="$(cd bench && go list -m -f '{{.Version}}' github.com/mark3labs/mcp-go)"
STATE_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
ROWS="$TMP/rows.tsv"
: >"$ROWS"
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"
for server in $SERVERS; do
  use_server "$server"
  for R in $REPLICAS; do
    cluster_up "$R"
    say "$(label_of "$SERVER"), $R replicas"
    for mode in rr sid; do
      set_routing "$mode"
      point echo@2025-11-25 echo 2025-11-25
      point progress@2025-11-25 progress 2025-11-25
      point sampling@2025-11-25 sampling 2025-11-25
      # 2026-07-28 has no session id to hash: sid routes it round robin.
      if [[ "$mode" == rr && "$server" != gosdk ]]; then point echo@2026-07-28 echo 2026-07-28; fi
    done
    set_routing ip
    point "sampling, kill -9" sampling 2025-11-25 kill
    point "progress 2 s, kill -9" progress 2025-11-25 kill
    cluster_down
    mv "$RUN" "$TMP/runs/$server-r$R"
    left_behind "$server R=$R" || true
  done
done

{
  echo "Peers on the scale-out testbed, $STARTED: $(nproc) CPUs, cgroup v$CGV; a replica ${NODE_CPU} core, nginx ${LB_CPU}, load ${LOAD_CPU};"
  echo "${PER_REPLICA}×R workers from $SOURCES addresses; steady points $DURATION after $WARMUP (operations time out after $OP_TIMEOUT), kill runs $KILL_DURATION (time-out $KILL_TIMEOUT);"
  if (( NETEM )) && [[ "$DELAY" != 0 ]]; then echo "netem delay $DELAY on each host's side of its link."
  elif [[ "$DELAY" == 0 ]]; then echo "no added link delay."
  else echo "$NETEM_NOTE."
  fi
  echo "go-sdk does not serve 2026-07-28; 2026-07-28 has no session id, so hash \$http_mcp_session_id routes it round robin (not repeated)."
  echo
  peers_report
} >"$TMP/report.md"
cat "$TMP/report.md"
if [[ -n "$PEERS_OUT" ]]; then cp "$TMP/report.md" "$PEERS_OUT"; fi

# scaleout.sh's exit trap stops what is left and removes the hosts; it
# fails the run when any of them remains.
summary
(( FAILED == 0 ))
