#!/usr/bin/env bash
# Scale-out testbed: each part of a cluster on a host of its own, and the
# throughput of 1, 2, 3 and 4 nodes measured on it.
#
# Every host is a Linux network namespace with a CPU share of its own (a
# cgroup CFS quota): `redis` (redis-server), `lb` (nginx with
# deploy/nginx/compose.conf), `load` (mcpbench) and node1..nodeN (the
# server built from ./cmd/server, all on that Redis with one random state
# key). The hosts are joined by a Linux bridge that lives in a namespace of
# its own; each has one veth into it, an address in 10.77.0.0/24 (a range
# that exists only inside these namespaces: nothing of the machine's own
# network is touched, and no traffic leaves them) and netem delay on its
# side of the link (one datacenter hop each way). The load host has 32
# more addresses, so that mcpbench's workers come from addresses of their
# own (--source), as separate clients behind nginx do.
#
# For each N the script sets the cluster up, runs every scenario through
# nginx for the duration with 16×N workers, reads the CPU each host used
# in the measured window (cpuacct.usage, or cpu.stat on cgroup v2) and the
# share of requests each node got (nginx's access log, $upstream_addr),
# and tears it all down. A point where redis, nginx, the load host or the
# machine as a whole used 90% or more of its CPU is marked "saturated: …":
# its figure is that host's limit, not the nodes'. The output is a
# markdown table with the efficiency T(N)/(N×T(1)) of each scenario.
#
# Usage: scripts/scaleout.sh [--short] [--out FILE] [--nodes "1 2 3 4"]
#                            [--keep]
#
#   --short      the CI check: N = 1 and 2, echo only, 3 s each; checks
#                that the namespaces, CPU shares and nginx come up, that
#                every call is answered without error, that each node
#                served some of the requests and that nothing is left
#                behind afterwards. Exit status 0 when all of it held.
#   --out FILE   also write the table(s) to FILE
#   --nodes LIST the node counts to measure (default "1 2 3 4", or
#                SCALEOUT_NODES)
#   --keep       keep the scratch directory (logs, reports) on exit
#
# The last line is "P passed, F failed": a point passes when mcpbench
# reported no error and every node served part of its requests (and, after
# it, its hosts were all removed); the exit status is 0 only when none
# failed.
#
# Environment (defaults in parentheses):
#   SCALEOUT_SCENARIOS   SCENARIO@REVISION list ("echo@2025-11-25
#                        echo@2026-07-28 progress@2025-11-25
#                        sampling@2025-11-25 sampling@2026-07-28
#                        churn@2025-11-25"; mcpbench --help lists them)
#   SCALEOUT_DURATION    measured time per point (10s), after
#   SCALEOUT_WARMUP      an unmeasured warm-up (1s)
#   SCALEOUT_WORKERS_PER_NODE  mcpbench workers per node (16)
#   SCALEOUT_NODE_CPU, SCALEOUT_REDIS_CPU, SCALEOUT_LB_CPU,
#   SCALEOUT_LOAD_CPU    CPU share of each host in cores (0.25, 0.5, 0.5,
#                        0.5)
#   SCALEOUT_DELAY       netem delay on each host's side of its link
#                        (250us; 0 for none). A kernel without netem
#                        (CONFIG_NET_SCH_NETEM) gets links without delay,
#                        said in the output; SCALEOUT_REQUIRE_NETEM=1
#                        makes that an error.
#   SCALEOUT_SATURATED   share of its CPU from which a host counts as
#                        saturated (0.9)
#   SCALEOUT_NODE_ARGS   more flags for the nodes (--log-level warn)
#   SCALEOUT_GOMAXPROCS  auto: each Go program's GOMAXPROCS is its host's
#                        CPU share rounded up, as Go sets it in a
#                        container; 0: Go's default (the machine's CPUs)
#   SCALEOUT_NGINX_KEEPALIVE  replaces the upstream's keepalive (idle
#                        connections nginx keeps to the nodes; compose.conf's
#                        value when unset)
#   SCALEOUT_START_TIMEOUT  seconds to wait for each process (60)
#
# Run as root. ip and tc (iproute2), nginx, redis-server, curl and jq are
# installed from Debian packages when missing.
set -euo pipefail
export LC_ALL=C

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

SHORT=0
OUT=""
KEEP=0
NODE_COUNTS="${SCALEOUT_NODES:-1 2 3 4}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --short) SHORT=1; shift ;;
    --out) OUT="${2:?--out needs a file}"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --nodes) NODE_COUNTS="${2:?--nodes needs a list}"; shift 2 ;;
    --nodes=*) NODE_COUNTS="${1#*=}"; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scaleout: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

SCENARIOS="${SCALEOUT_SCENARIOS:-echo@2025-11-25 echo@2026-07-28 progress@2025-11-25 sampling@2025-11-25 sampling@2026-07-28 churn@2025-11-25}"
DURATION="${SCALEOUT_DURATION:-10s}"
WARMUP="${SCALEOUT_WARMUP:-1s}"
if (( SHORT )); then
  NODE_COUNTS="1 2"
  SCENARIOS="echo@2025-11-25"
  DURATION=3s
fi
WORKERS_PER_NODE="${SCALEOUT_WORKERS_PER_NODE:-16}"
NODE_CPU="${SCALEOUT_NODE_CPU:-0.25}"
REDIS_CPU="${SCALEOUT_REDIS_CPU:-0.5}"
LB_CPU="${SCALEOUT_LB_CPU:-0.5}"
LOAD_CPU="${SCALEOUT_LOAD_CPU:-0.5}"
DELAY="${SCALEOUT_DELAY:-250us}"
SATURATED="${SCALEOUT_SATURATED:-0.9}"
START_TIMEOUT="${SCALEOUT_START_TIMEOUT:-60}"
read -r -a NODE_ARGS <<<"${SCALEOUT_NODE_ARGS:---log-level warn}"
NGINX_KEEPALIVE="${SCALEOUT_NGINX_KEEPALIVE:-}"
GOMAXPROCS_MODE="${SCALEOUT_GOMAXPROCS:-auto}"
SOURCES=32

say() { printf 'scaleout: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# ------------------------------------------------------------- arguments ---
# seconds DURATION: whole seconds (rounded up) of a Go duration such as
# 10s, 1500ms, 1m.
seconds() {
  local d="$1"
  [[ "$d" =~ ^([0-9]+)(ms|s|m)$ ]] || return 1
  case "${BASH_REMATCH[2]}" in
    ms) echo $(( (BASH_REMATCH[1] + 999) / 1000 )) ;;
    s) echo $(( BASH_REMATCH[1] )) ;;
    m) echo $(( BASH_REMATCH[1] * 60 )) ;;
  esac
}
is_cores() { [[ "$1" =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v c="$1" 'BEGIN{exit !(c > 0 && c <= 64)}'; }
DURATION_S="$(seconds "$DURATION")" || die "SCALEOUT_DURATION: not a duration like 10s or 1500ms: $DURATION"
WARMUP_S="$(seconds "$WARMUP")" || die "SCALEOUT_WARMUP: not a duration like 1s: $WARMUP"
(( DURATION_S > 0 )) || die "SCALEOUT_DURATION must be positive"
for v in NODE_CPU REDIS_CPU LB_CPU LOAD_CPU; do
  is_cores "${!v}" || die "SCALEOUT_$v: not a number of cores (0 < x <= 64): ${!v}"
done
[[ "$WORKERS_PER_NODE" =~ ^[1-9][0-9]*$ ]] || die "SCALEOUT_WORKERS_PER_NODE: not a positive integer"
[[ -z "$NGINX_KEEPALIVE" || "$NGINX_KEEPALIVE" =~ ^[1-9][0-9]*$ ]] || die "SCALEOUT_NGINX_KEEPALIVE: not a positive integer"
[[ "$DELAY" == 0 || "$DELAY" =~ ^[0-9]+(\.[0-9]+)?(us|ms)$ ]] || die "SCALEOUT_DELAY: not a delay like 250us or 1ms: $DELAY"
for n in $NODE_COUNTS; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]] || (( n > 80 )); then die "node counts must be integers from 1 to 80: $NODE_COUNTS"; fi
done
for s in $SCENARIOS; do
  [[ "$s" =~ ^[a-z]+@[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "SCALEOUT_SCENARIOS: not SCENARIO@REVISION: $s"
done

# ---------------------------------------------------------- prerequisites ---
(( EUID == 0 )) || die "must run as root: it creates network namespaces, veth links and cgroups (try: sudo $0 $*)"

find_bin() {
  command -v "$1" 2>/dev/null && return 0
  local d
  for d in /usr/sbin /usr/bin /sbin /bin; do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}
command -v go >/dev/null || die "go is not on PATH (needed to build ./cmd/server and ./cmd/mcpbench)"
missing=()
if ! find_bin ip >/dev/null || ! find_bin tc >/dev/null; then missing+=(iproute2); fi
find_bin nginx >/dev/null || missing+=(nginx)
find_bin redis-server >/dev/null || missing+=(redis-server)
find_bin curl >/dev/null || missing+=(curl)
find_bin jq >/dev/null || missing+=(jq)
if (( ${#missing[@]} > 0 )); then
  say "installing ${missing[*]} (Debian packages)"
  apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
IP="$(find_bin ip)" || die "ip not found"
TC="$(find_bin tc)" || die "tc not found"
NGINX_BIN="$(find_bin nginx)" || die "nginx not found"
REDIS_BIN="$(find_bin redis-server)" || die "redis-server not found"

# cgroups: v1 with the cpu and cpuacct controllers (separate or co-mounted
# hierarchies), or v2 with the cpu controller.
P="mcps-$$"
if [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == cgroup2fs ]]; then
  CGV=2
  CG2="/sys/fs/cgroup"
  if ! grep -qw cpu "$CG2/cgroup.subtree_control"; then
    grep -qw cpu "$CG2/cgroup.controllers" || die "cgroup v2 without the cpu controller"
    echo +cpu >"$CG2/cgroup.subtree_control" 2>/dev/null \
      || die "cannot enable the cpu controller in $CG2/cgroup.subtree_control (a container's own cgroup?)"
    say "enabled the cpu controller for the children of $CG2"
  fi
elif [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us && -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]]; then
  CGV=1
  CG_CPU="/sys/fs/cgroup/cpu"
  CG_ACCT="/sys/fs/cgroup/cpuacct"
else
  die "no usable cgroup: need cgroup v1 cpu + cpuacct (/sys/fs/cgroup/cpu, /sys/fs/cgroup/cpuacct) or cgroup v2 with cpu"
fi
CPUS="$(nproc)"

# ---------------------------------------------------------------- layout ---
# Host names, namespaces and addresses.
NET="10.77.0"
REDIS_IP="$NET.2"
LB_IP="$NET.3"
LOAD_IP="$NET.4"
node_ip() { echo "$NET.$(( 10 + $1 ))"; }
ns_of() { echo "$P-$1"; }
BR_NS="$P-br"
cores_of() {
  case "$1" in
    redis) echo "$REDIS_CPU" ;;
    lb) echo "$LB_CPU" ;;
    load) echo "$LOAD_CPU" ;;
    *) echo "$NODE_CPU" ;;
  esac
}
ip_of() {
  case "$1" in
    redis) echo "$REDIS_IP" ;;
    lb) echo "$LB_IP" ;;
    load) echo "$LOAD_IP" ;;
    node*) node_ip "${1#node}" ;;
  esac
}
SOURCE_RANGE="$NET.100-$NET.$(( 100 + SOURCES - 1 ))"

# cg_dirs HOST: the cgroup directories of HOST (one per hierarchy).
cg_dirs() {
  if (( CGV == 2 )); then echo "$CG2/$P/$1"
  else echo "$CG_CPU/$P/$1"; [[ "$CG_ACCT/$P/$1" -ef "$CG_CPU/$P/$1" ]] || echo "$CG_ACCT/$P/$1"
  fi
}
# cg_usage_file HOST: the file with HOST's CPU time.
cg_usage_file() {
  if (( CGV == 2 )); then echo "$CG2/$P/$1/cpu.stat"; else echo "$CG_ACCT/$P/$1/cpuacct.usage"; fi
}

# ----------------------------------------------------------------- state ---
PIDS=()
NAMES=()
LOGS=()
HOSTS=()
SAMPLER_PID=""
PASSED=0
FAILED=0
NETEM=1
NETEM_NOTE=""
TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcps-$$.XXXXXX")"
# nginx workers drop privileges when started as root: let them reach
# their temp directories.
chmod 755 "$TMP"
mkdir -p "$TMP/bin" "$TMP/runs"

# stop_processes: nginx first (no new requests), then the nodes (they
# drain), then Redis; each gets 10 s before SIGKILL. Then whatever is left
# in the host cgroups is killed.
stop_processes() {
  local i pid n
  if [[ -n "$SAMPLER_PID" ]]; then
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
  fi
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    stop_pid "${NAMES[$i]}" "${PIDS[$i]}"
  done
  PIDS=(); NAMES=(); LOGS=()
  # Anything still in a host's cgroup (an nginx worker whose master was
  # killed) was started by this script.
  local h d p left
  for h in "${HOSTS[@]}"; do
    for d in $(cg_dirs "$h"); do
      [[ -f "$d/cgroup.procs" ]] || continue
      for (( n=0; n<50; n++ )); do
        left=0
        while read -r p; do
          [[ -n "$p" ]] || continue
          left=1
          kill -KILL "$p" 2>/dev/null || true
        done <"$d/cgroup.procs"
        (( left )) || break
        sleep 0.1
      done
    done
  done
}

# remove_hosts: the namespaces (their veths and the bridge go with them)
# and the cgroups of the current cluster.
remove_hosts() {
  local h ns d n
  for ns in $("$IP" netns list 2>/dev/null | awk '{print $1}' | grep "^$P-" || true); do
    "$IP" netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
  done
  for h in "${HOSTS[@]}"; do
    for d in $(cg_dirs "$h"); do
      [[ -d "$d" ]] || continue
      for (( n=0; n<50; n++ )); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
      [[ -d "$d" ]] && say "could not remove cgroup $d"
    done
  done
  HOSTS=()
  for d in ${CG2:+"$CG2/$P"} ${CG_CPU:+"$CG_CPU/$P"} ${CG_ACCT:+"$CG_ACCT/$P"}; do
    [[ -d "$d" ]] || continue
    for (( n=0; n<50; n++ )); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
    [[ -d "$d" ]] && say "could not remove cgroup $d"
  done
  return 0
}

# leftovers: prints what this run left behind (nothing when clean).
leftovers() {
  "$IP" netns list 2>/dev/null | awk '{print $1}' | grep "^$P-" | sed 's/^/namespace /' || true
  local d
  for d in ${CG2:+"$CG2/$P"} ${CG_CPU:+"$CG_CPU/$P"} ${CG_ACCT:+"$CG_ACCT/$P"}; do
    [[ -d "$d" ]] && echo "cgroup $d"
  done
  return 0
}

SUMMARY_DONE=0
summary() {
  (( SUMMARY_DONE )) && return 0
  SUMMARY_DONE=1
  echo "$PASSED passed, $FAILED failed"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  stop_processes
  remove_hosts
  if (( KEEP )); then say "scratch directory kept: $TMP"; else rm -rf "$TMP"; fi
  local left
  left="$(leftovers)"
  if [[ -n "$left" ]]; then
    say "left behind: $(tr '\n' ' ' <<<"$left")"
    FAILED=$(( FAILED + 1 )); (( rc != 0 )) || rc=1
  fi
  if (( rc != 0 && ! SUMMARY_DONE )); then
    (( FAILED > 0 )) || FAILED=1
    summary
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

dump_logs() { tail_logs 15 >&2; }
fail_setup() { dump_logs; die "$*"; }

# ----------------------------------------------------------------- hosts ---
# add_host HOST: its namespace, veth into the bridge, address(es), netem
# delay, and its cgroup(s) with its CPU share.
add_host() {
  local h="$1" ns addr quota d k
  ns="$(ns_of "$h")"
  addr="$(ip_of "$h")"
  HOSTS+=("$h")
  "$IP" netns add "$ns"
  "$IP" -n "$ns" link set lo up
  "$IP" -n "$BR_NS" link add name "v-$h" type veth peer name eth0 netns "$ns"
  "$IP" -n "$BR_NS" link set "v-$h" master br0
  "$IP" -n "$BR_NS" link set "v-$h" up
  "$IP" -n "$ns" addr add "$addr/24" dev eth0
  if [[ "$h" == load ]]; then
    for (( k=0; k<SOURCES; k++ )); do "$IP" -n "$ns" addr add "$NET.$(( 100 + k ))/24" dev eth0; done
  fi
  "$IP" -n "$ns" link set eth0 up
  if (( NETEM )) && [[ "$DELAY" != 0 ]]; then
    local err
    if ! err="$("$TC" -n "$ns" qdisc add dev eth0 root netem delay "$DELAY" 2>&1)"; then
      if [[ "$err" == *"unknown"* ]]; then
        [[ "${SCALEOUT_REQUIRE_NETEM:-0}" == 1 ]] && die "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): $err"
        NETEM=0
        NETEM_NOTE="this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set): the links have no added delay"
        say "WARNING: $NETEM_NOTE"
      else
        die "tc qdisc add dev eth0 root netem delay $DELAY in $ns: $err"
      fi
    fi
  fi
  # CPU share: quota per 100 ms period.
  quota="$(awk -v c="$(cores_of "$h")" 'BEGIN{printf "%d", c * 100000 + 0.5}')"
  if (( CGV == 2 )); then
    mkdir -p "$CG2/$P/$h"
    grep -qw cpu "$CG2/$P/cgroup.subtree_control" || echo +cpu >"$CG2/$P/cgroup.subtree_control"
    echo "$quota 100000" >"$CG2/$P/$h/cpu.max"
  else
    for d in $(cg_dirs "$h"); do mkdir -p "$d"; done
    echo 100000 >"$CG_CPU/$P/$h/cpu.cfs_period_us"
    echo "$quota" >"$CG_CPU/$P/$h/cpu.cfs_quota_us"
  fi
}

# quota_ok HOST: the cgroup has the CPU share asked for.
quota_ok() {
  local h="$1" want got
  want="$(awk -v c="$(cores_of "$h")" 'BEGIN{printf "%d", c * 100000 + 0.5}')"
  if (( CGV == 2 )); then got="$(cat "$CG2/$P/$h/cpu.max")"; [[ "$got" == "$want 100000" ]]
  else
    got="$(cat "$CG_CPU/$P/$h/cpu.cfs_quota_us") $(cat "$CG_CPU/$P/$h/cpu.cfs_period_us")"
    [[ "$got" == "$want 100000" ]]
  fi
}

# start_on HOST NAME LOGFILE CMD...: runs CMD in HOST's namespace and
# cgroup(s). The wrapper shell puts itself into the cgroups, then becomes
# `ip netns exec`, which becomes CMD: the recorded pid is CMD's, and every
# process and thread it makes is in the host's groups.
start_on() {
  local h="$1" name="$2" logf="$3"; shift 3
  local dirs=() d procs=()
  read -r -d '' -a dirs < <(cg_dirs "$h") || true
  for d in "${dirs[@]}"; do procs+=("$d/cgroup.procs"); done
  (( ${#procs[@]} == 2 )) || procs+=("${procs[0]}")
  # A Go program sizes GOMAXPROCS by its cgroup's CPU limit, as in a
  # container, but cannot read it behind ip netns exec (which remounts
  # /sys): it is given here, the host's share rounded up
  # (SCALEOUT_GOMAXPROCS=0 leaves Go its default, the machine's CPUs).
  local procs_env=()
  if [[ "$GOMAXPROCS_MODE" != 0 ]]; then
    procs_env=(env "GOMAXPROCS=$(awk -v c="$(cores_of "$h")" 'BEGIN{n=int(c); if (n < c) n++; print (n < 1 ? 1 : n)}')")
  fi
  # shellcheck disable=SC2016 # $$ and $@ are the wrapper shell's
  "${procs_env[@]}" sh -c 'echo $$ >"$1" && echo $$ >"$2" || exit 97; ns="$3"; shift 3; exec "$0" netns exec "$ns" "$@"' \
    "$IP" "${procs[0]}" "${procs[1]}" "$(ns_of "$h")" "$@" >"$logf" 2>&1 </dev/null &
  PIDS+=("$!"); NAMES+=("$name"); LOGS+=("$logf")
}

# in_group HOST PID: PID is in HOST's cgroup(s).
in_group() {
  local d
  for d in $(cg_dirs "$1"); do grep -qx "$2" "$d/cgroup.procs" || return 1; done
}

# wait_up PID CMD...: retries CMD until it succeeds (0); 1 if PID exits
# first, 2 after START_TIMEOUT seconds.
wait_up() {
  local pid="$1"; shift
  local deadline=$(( SECONDS + START_TIMEOUT ))
  while (( SECONDS < deadline )); do
    kill -0 "$pid" 2>/dev/null || return 1
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 2
}

# in_load CMD...: runs CMD in the load host's namespace (outside its
# cgroup: checks only).
in_load() { "$IP" netns exec "$(ns_of load)" "$@"; }
redis_ping() {
  local reply
  reply="$(in_load timeout 2 bash -c "exec 3<>/dev/tcp/$REDIS_IP/6379; printf 'PING\r\n' >&3; head -c 5 <&3")" || return 1
  [[ "$reply" == "+PONG" ]]
}
node_ready() { in_load curl -fsS --max-time 2 "http://$(node_ip "$1"):8080/readyz"; }
nginx_health() { in_load curl -fsS --max-time 2 "http://$LB_IP:8080/nginx-health"; }

# nginx_site N: deploy/nginx/compose.conf with the N nodes as upstream
# servers and LB_IP:8080 as the listen address (and, with
# SCALEOUT_NGINX_KEEPALIVE, that many idle upstream connections kept).
nginx_site() {
  local n="$1" line i first=1
  while IFS= read -r line; do
    if [[ "$line" =~ ^([[:space:]]*)server[[:space:]]+node[0-9]+:8080(.*)$ ]]; then
      if (( first )); then
        for (( i=1; i<=n; i++ )); do echo "${BASH_REMATCH[1]}server $(node_ip "$i"):8080${BASH_REMATCH[2]}"; done
        first=0
      fi
    elif [[ "$line" =~ ^([[:space:]]*)listen[[:space:]]+8080\;$ ]]; then
      echo "${BASH_REMATCH[1]}listen $LB_IP:8080;"
    elif [[ -n "$NGINX_KEEPALIVE" && "$line" =~ ^([[:space:]]*)keepalive[[:space:]]+[0-9]+\;$ ]]; then
      echo "${BASH_REMATCH[1]}keepalive $NGINX_KEEPALIVE;"
    else
      echo "$line"
    fi
  done <"$ROOT/deploy/nginx/compose.conf"
}
nginx_conf() {
  local ngx="$1"
  echo "# Generated by scripts/scaleout.sh around deploy/nginx/compose.conf."
  echo "worker_processes 1;"
  echo "worker_rlimit_nofile 16384;"
  echo "daemon off;"
  echo "pid $ngx/nginx.pid;"
  echo "error_log $ngx/logs/error.log warn;"
  echo "events { worker_connections 8192; }"
  echo "http {"
  echo "    log_format upstream '\$remote_addr \"\$request\" \$status upstream=\$upstream_addr rt=\$request_time';"
  echo "    access_log $ngx/logs/access.log upstream;"
  echo "    client_body_temp_path $ngx/tmp/client_body;"
  echo "    proxy_temp_path $ngx/tmp/proxy;"
  echo "    fastcgi_temp_path $ngx/tmp/fastcgi;"
  echo "    uwsgi_temp_path $ngx/tmp/uwsgi;"
  echo "    scgi_temp_path $ngx/tmp/scgi;"
  echo "    include $ngx/site.conf;"
  echo "}"
}

# cluster_up N: the hosts, redis, N nodes and nginx, each checked.
RUN=""
KEEPALIVE_SEEN=""
cluster_up() {
  local n="$1" i h rc
  RUN="$TMP/runs/n$n"
  mkdir -p "$RUN/logs" "$RUN/redis" "$RUN/nginx/logs" "$RUN/nginx/tmp"
  chmod 755 "$TMP/runs" "$RUN" "$RUN/nginx" "$RUN/nginx/tmp"

  "$IP" netns add "$BR_NS"
  "$IP" -n "$BR_NS" link set lo up
  "$IP" -n "$BR_NS" link add name br0 type bridge
  "$IP" -n "$BR_NS" link set br0 up
  if (( CGV == 1 )); then mkdir -p "$CG_CPU/$P" "$CG_ACCT/$P"; else mkdir -p "$CG2/$P"; fi
  for h in redis lb load; do add_host "$h"; done
  for (( i=1; i<=n; i++ )); do add_host "node$i"; done

  start_on redis redis "$RUN/logs/redis.log" "$REDIS_BIN" --bind "$REDIS_IP" --port 6379 \
    --save "" --appendonly no --protected-mode no --dir "$RUN/redis" --daemonize no
  rc=0; wait_up "${PIDS[-1]}" redis_ping || rc=$?
  (( rc == 0 )) || fail_setup "redis-server did not answer PING on $REDIS_IP:6379"

  export MCP_STATE_KEY="$STATE_KEY"
  for (( i=1; i<=n; i++ )); do
    start_on "node$i" "node$i" "$RUN/logs/node$i.log" "$TMP/bin/server" \
      --addr "$(node_ip "$i"):8080" --metrics-addr "$(node_ip "$i"):9090" \
      --redis-url "redis://$REDIS_IP:6379" --node-id "node$i" --tools demo \
      --trusted-proxies "$LB_IP" --drain-timeout 2s "${NODE_ARGS[@]}"
  done
  unset MCP_STATE_KEY
  for (( i=1; i<=n; i++ )); do
    rc=0; wait_up "${PIDS[$i]}" node_ready "$i" || rc=$?
    (( rc == 0 )) || fail_setup "node$i did not become ready on $(node_ip "$i"):8080"
  done

  local ngx="$RUN/nginx"
  nginx_site "$n" >"$ngx/site.conf"
  nginx_conf "$ngx" >"$ngx/nginx.conf"
  local servers
  servers="$(grep -cE '^[[:space:]]*server[[:space:]]+10\.77\.' "$ngx/site.conf" || true)"
  (( servers == n )) || die "deploy/nginx/compose.conf: expected upstream lines 'server nodeI:8080 ...' to rewrite; got $servers of $n servers"
  grep -q "listen $LB_IP:8080;" "$ngx/site.conf" || die "deploy/nginx/compose.conf: no 'listen 8080;' line to rewrite"
  KEEPALIVE_SEEN="$(sed -n 's/^[[:space:]]*keepalive[[:space:]]*\([0-9]*\);.*/\1/p' "$ngx/site.conf" | head -n 1)"
  if [[ -n "$NGINX_KEEPALIVE" ]]; then
    grep -qE "^[[:space:]]*keepalive $NGINX_KEEPALIVE;" "$ngx/site.conf" || die "deploy/nginx/compose.conf: no 'keepalive N;' line to rewrite"
  fi
  "$IP" netns exec "$(ns_of lb)" "$NGINX_BIN" -t -q -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log" 2>"$RUN/logs/nginx-t.log" \
    || { cat "$RUN/logs/nginx-t.log" "$ngx/logs/error.log" >&2 2>/dev/null; die "nginx -t failed"; }
  start_on lb nginx "$RUN/logs/nginx.log" "$NGINX_BIN" -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log"
  rc=0; wait_up "${PIDS[-1]}" nginx_health || rc=$?
  (( rc == 0 )) || fail_setup "nginx did not answer on $LB_IP:8080"
  ACCESS_LOG="$ngx/logs/access.log"

  # Every process is in its host's group; every group has its share.
  local k bad=""
  for k in "${!PIDS[@]}"; do
    case "${NAMES[$k]}" in nginx) h=lb ;; *) h="${NAMES[$k]}" ;; esac
    in_group "$h" "${PIDS[$k]}" || bad+=" ${NAMES[$k]}(pid ${PIDS[$k]} not in its cgroup)"
  done
  for h in "${HOSTS[@]}"; do quota_ok "$h" || bad+=" $h(CPU share not set)"; done
  local nns
  nns="$("$IP" netns list | awk '{print $1}' | grep -c "^$P-" || true)"
  (( nns == n + 4 )) || bad+=" namespaces($nns, want $(( n + 4 )))"
  [[ -z "$bad" ]] || fail_setup "hosts not as set up:$bad"
  say "N=$n: ${#HOSTS[@]} hosts up (namespaces, CPU shares$( (( NETEM )) && [[ "$DELAY" != 0 ]] && echo ", netem $DELAY")), redis, $n node(s), nginx on $LB_IP:8080"
}

cluster_down() {
  stop_processes
  remove_hosts
}

# ----------------------------------------------------------- measurement ---
# sampler HOST...: every 200 ms a line "EPOCH usage(HOST1) usage(HOST2)
# ..." with each host's CPU time in ns.
sampler() {
  local files=() h f v k line
  for h in "$@"; do files+=("$(cg_usage_file "$h")"); done
  while :; do
    line="$EPOCHREALTIME"
    for f in "${files[@]}"; do
      if (( CGV == 2 )); then read -r k v <"$f"; v=$(( v * 1000 )); else read -r v <"$f"; fi
      line+=" $v"
    done
    echo "$line"
    sleep 0.2
  done
}

# run_point N SCENARIO REVISION: one mcpbench run through nginx; appends
# a line to $RESULTS.
run_point() {
  local n="$1" sc="$2" rev="$3" c json log rc pid hosts=() i
  c=$(( WORKERS_PER_NODE * n ))
  json="$RUN/$sc-$rev.json"
  log="$RUN/logs/mcpbench-$sc-$rev.log"
  hosts=(redis lb load)
  for (( i=1; i<=n; i++ )); do hosts+=("node$i"); done
  local lines0
  lines0="$(wc -l <"$ACCESS_LOG")"
  sampler "${hosts[@]}" >"$RUN/cpu-$sc-$rev.txt" &
  SAMPLER_PID=$!
  start_on load mcpbench "$log" "$TMP/bin/mcpbench" --url "http://$LB_IP:8080/mcp" \
    --scenario "$sc" --revision "$rev" -c "$c" -d "$DURATION" --warmup "$WARMUP" \
    --source "$SOURCE_RANGE" --redis "redis://$REDIS_IP:6379" -q --json "$json"
  pid="${PIDS[-1]}"
  local deadline=$(( SECONDS + DURATION_S + WARMUP_S + 60 ))
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    say "mcpbench did not end in time; stopping it"
    kill -INT "$pid" 2>/dev/null || true
    sleep 5
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rc=0; wait "$pid" 2>/dev/null || rc=$?
  unset 'PIDS[-1]' 'NAMES[-1]' 'LOGS[-1]'
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""

  if [[ ! -s "$json" ]]; then
    say "N=$n $sc@$rev: no report (mcpbench exit $rc):"
    tail -n 20 "$log" | sed 's/^/    /' >&2
    printf '%s\t%s\t%s\tfail\n' "$n" "$sc" "$rev" >>"$RESULTS"
    FAILED=$(( FAILED + 1 ))
    return 0
  fi
  local ops_s p50 p99 errs setup_errs ops started elapsed kinds rcmds rpub
  IFS=$'\t' read -r ops_s p50 p99 errs setup_errs ops started elapsed rcmds rpub < <(jq -r '[.ops_per_s, .latency.p50_ms, .latency.p99_ms, .errors,
      ([(.setup_errors // {})[] | .count] | add // 0), .ops, .started, .elapsed_s,
      (.redis.total_commands_per_op // -1), (.redis.commands_per_op.publish // 0)] | @tsv' "$json")
  kinds="$(jq -r '[(.error_kinds // {}), (.setup_errors // {}) | to_entries[] | "\(.key) \(.value.count)"] | join(", ")' "$json")"

  # CPU of each host in the measured window, as a fraction of its share.
  local t0 t1 cpu
  t0="$(date -d "$started" +%s.%N)"
  t1="$(awk -v a="$t0" -v e="$elapsed" 'BEGIN{printf "%.6f", a + e}')"
  local shares=()
  for h in "${hosts[@]}"; do shares+=("$(cores_of "$h")"); done
  cpu="$(awk -v t0="$t0" -v t1="$t1" -v shares="${shares[*]}" '
    BEGIN { ns = split(shares, sh, " ") }
    { t = $1 + 0
      if (t >= t0 && !have_a) { have_a = 1; ta = t; for (i = 2; i <= NF; i++) ua[i] = $i }
      if (t <= t1) { tb = t; for (i = 2; i <= NF; i++) ub[i] = $i }
    }
    END {
      if (!have_a || tb - ta < 0.5) { printf "none"; exit }
      out = ""; total = 0
      for (i = 2; i <= ns + 1; i++) {
        used = (ub[i] - ua[i]) / 1e9 / (tb - ta)
        total += used
        out = out sprintf("%.3f:%.3f ", used, used / sh[i - 1])
      }
      printf "%s%.3f", out, total
    }' "$RUN/cpu-$sc-$rev.txt")"

  # Requests per node (the node that answered: the last upstream).
  local counts
  counts="$(tail -n +"$(( lines0 + 1 ))" "$ACCESS_LOG" | awk -v n="$n" '
    # upstream=A[, B...] rt=...: the last one tried answered.
    /upstream=/ { u = $0; sub(/.* upstream=/, "", u); sub(/ rt=.*/, "", u)
      k = split(u, tried, /, */); c[tried[k]]++ }
    END { for (i = 1; i <= n; i++) { a = sprintf("10.77.0.%d:8080", 10 + i); printf "%d ", c[a] + 0 } }')"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$sc" "$rev" "$ops_s" "$p50" "$p99" "$errs" \
    "$setup_errs" "$ops" "$cpu" "$counts" "$kinds" "$rcmds" "$rpub" >>"$RESULTS"

  # Pass: answered without error, and every node served requests.
  local why=""
  (( ops > 0 )) || why+=" no operation succeeded;"
  (( errs == 0 && setup_errs == 0 )) || why+=" errors: $kinds;"
  local cnt k=0
  for cnt in $counts; do k=$(( k + 1 )); (( cnt > 0 )) || why+=" node$k served no request;"; done
  (( k == n )) || why+=" requests per node not found in nginx's access log;"
  [[ "$cpu" != none ]] || why+=" no CPU samples in the window;"
  if [[ -z "$why" ]]; then
    say "N=$n $sc@$rev: $(printf '%.0f ops/s, p50 %.2f ms, p99 %.2f ms' "$ops_s" "$p50" "$p99"), requests per node: ${counts% }"
    PASSED=$(( PASSED + 1 ))
  else
    say "N=$n $sc@$rev: FAILED:$why (mcpbench exit $rc)"
    FAILED=$(( FAILED + 1 ))
  fi
}

# ---------------------------------------------------------------- report ---
# report: the markdown tables of $RESULTS.
report() {
  awk -F'\t' -v sat="$SATURATED" -v cpus="$CPUS" '
    function pct(x) { return sprintf("%.0f%%", 100 * x) }
    {
      n = $1; key = $2 "@" $3
      if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
      if (!(n in seenN)) { seenN[n] = 1; ns[++nn] = n }
      if ($4 == "fail") { ok[key, n] = 0; row[++nr] = sprintf("| %s | %s | – | – | – | no report | – | – | – | – | – | – | – | – | – | – | failed |", n, key); next }
      T[key, n] = $4; ok[key, n] = 1
      split($10, cpu, " ")
      # cpu: redis lb load node1..nodeN as used:fraction, then the total.
      split(cpu[1], r, ":"); split(cpu[2], l, ":"); split(cpu[3], d, ":")
      nodes = ""; nmax = 0; nused = 0
      for (i = 1; i <= n; i++) { split(cpu[3 + i], x, ":"); nodes = nodes (i > 1 ? " " : "") pct(x[2]); if (x[2] > nmax) nmax = x[2]; nused += x[1] }
      perop = ($4 > 0 && $10 != "none") ? sprintf("%.0f", 1e6 * nused / $4) : "–"
      total = cpu[4 + n]
      status = ""
      if ($10 == "none") { status = "no CPU figures"; nodes = "–" }
      else {
        if (r[2] >= sat) status = status (status ? ", " : "") "redis"
        if (l[2] >= sat) status = status (status ? ", " : "") "nginx"
        if (d[2] >= sat) status = status (status ? ", " : "") "load"
        if (total >= sat * cpus) status = status (status ? ", " : "") "machine"
        if (status) status = "saturated: " status
        else if (nmax >= sat) status = "nodes"
        else status = "no host at " pct(sat)
      }
      if ($7 + $8 > 0) status = status "; errors: " $12
      split($11, c, " "); tot = 0; for (i = 1; i <= n; i++) tot += c[i]
      spread = ""
      for (i = 1; i <= n; i++) spread = spread (i > 1 ? " " : "") (tot ? sprintf("%.0f%%", 100 * c[i] / tot) : "–")
      st[key, n] = status
      rc = ($13 >= 0) ? sprintf("%.2f", $13) : "–"
      row[++nr] = sprintf("| %s | %s | %.0f | %.2f | %.2f | %d | EFF(%s,%s) | %s | %s | %s | %.2f | %s | %s | %s | %.2f | %s | %s |",
        n, key, $4, $5, $6, $7 + $8, key, n, nodes, perop, rc, $14, pct(r[2]), pct(l[2]), pct(d[2]), total, spread, status)
    }
    END {
      print "| N | scenario@revision | ops/s | p50 ms | p99 ms | errors | efficiency | CPU of share: nodes | node µs/op | Redis commands/op | bus messages/op | redis | nginx | load | cores used (all) | requests per node | limit |"
      print "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
      for (i = 1; i <= nr; i++) {
        line = row[i]
        if (match(line, /EFF\([^)]*\)/)) {
          arg = substr(line, RSTART + 4, RLENGTH - 5); split(arg, a, ",")
          e = "–"
          if (ok[a[1], 1] && ok[a[1], a[2]] && T[a[1], 1] > 0) e = sprintf("%.2f", T[a[1], a[2]] / (a[2] * T[a[1], 1]))
          line = substr(line, 1, RSTART - 1) e substr(line, RSTART + RLENGTH)
        }
        print line
      }
      print ""
      printf "Efficiency T(N)/(N×T(1)) (* = saturated: not the nodes'"'"' figure)\n\n"
      hdr = "| scenario@revision |"; sep = "|---|"
      for (j = 1; j <= nn; j++) { hdr = hdr " N=" ns[j] " |"; sep = sep "---:|" }
      print hdr; print sep
      for (k = 1; k <= nk; k++) {
        key = order[k]; line = "| " key " |"
        for (j = 1; j <= nn; j++) {
          n = ns[j]; e = "–"
          if (ok[key, 1] && ok[key, n] && T[key, 1] > 0) e = sprintf("%.2f", T[key, n] / (n * T[key, 1]))
          if (st[key, n] ~ /^saturated/) e = e "*"
          line = line " " e " |"
        }
        print line
      }
    }' "$RESULTS"
}

# ------------------------------------------------------------------- run ---
say "building ./cmd/server and ./cmd/mcpbench"
go build -o "$TMP/bin/server" ./cmd/server || die "./cmd/server does not build"
go build -o "$TMP/bin/mcpbench" ./cmd/mcpbench || die "./cmd/mcpbench does not build"
STATE_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
RESULTS="$TMP/results.tsv"
: >"$RESULTS"
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"
for n in $NODE_COUNTS; do
  cluster_up "$n"
  for s in $SCENARIOS; do
    run_point "$n" "${s%@*}" "${s#*@}"
  done
  cluster_down
  left="$(leftovers)"
  if [[ -n "$left" ]]; then
    say "N=$n: left behind after teardown: $(tr '\n' ' ' <<<"$left")"
    FAILED=$(( FAILED + 1 ))
  fi
done

{
  echo "Scale-out testbed, $STARTED: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), cgroup v$CGV."
  echo "Shares: node $NODE_CPU, redis $REDIS_CPU, nginx $LB_CPU, load $LOAD_CPU core(s); ${WORKERS_PER_NODE}×N workers from $SOURCES addresses; $DURATION per point after $WARMUP warm-up;"
  echo "nginx: deploy/nginx/compose.conf$( [[ -n "$NGINX_KEEPALIVE" ]] && echo " with its keepalive replaced"), keepalive ${KEEPALIVE_SEEN:-none} (idle upstream connections kept);"
  if (( NETEM )) && [[ "$DELAY" != 0 ]]; then echo "netem delay $DELAY on each host's side of its link."
  elif [[ "$DELAY" == 0 ]]; then echo "no added link delay."
  else echo "$NETEM_NOTE."
  fi
  echo
  report
} >"$TMP/report.md"
cat "$TMP/report.md"
if [[ -n "$OUT" ]]; then cp "$TMP/report.md" "$OUT"; fi

# Nothing may be left once everything is torn down.
stop_processes
remove_hosts
left="$(leftovers)"
if [[ -n "$left" ]]; then
  say "left behind: $(tr '\n' ' ' <<<"$left")"
  FAILED=$(( FAILED + 1 ))
fi
summary
(( FAILED == 0 ))
