#!/usr/bin/env bash
# Scale-out testbed: each part of a cluster on a host of its own, and the
# throughput of 1, 2, 3 and 4 nodes measured on it.
#
# Every host is a Linux network namespace with a CPU share of its own (a
# cgroup CFS quota): `redis` (redis-server; with --shards K, redis1..redisK,
# the primaries of a Redis Cluster), `lb` (nginx with
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
# Usage: scripts/scaleout.sh [--short] [--out FILE] [--data FILE]
#                            [--nodes "1 2 3 4"] [--shards "0 3 6"]
#                            [--redis-bound] [--keep]
#
#   --short      the CI check: N = 1 and 2, echo only, 3 s each, then one
#                Redis Cluster point (3 primaries, N = 1); checks that the
#                namespaces, CPU shares, nginx and the cluster come up,
#                that every call is answered without error, that each node
#                served some of the requests, that every primary was
#                watched and that nothing is left behind afterwards. Exit
#                status 0 when all of it held.
#   --out FILE   also write the table(s) to FILE
#   --data FILE  also write every point as JSON to FILE (what
#                cmd/scaleplot draws)
#   --nodes LIST the node counts to measure (default "1 2 3 4", or
#                SCALEOUT_NODES)
#   --shards LIST  the Redis set-ups to measure, each over every node
#                count: 0 is one standalone Redis, K (3 or more) a Redis
#                Cluster of K primaries (default "0", or
#                SCALEOUT_REDIS_SHARDS)
#   --redis-bound  a preset where Redis, not the nodes, is the limit: a
#                small Redis share (0.05 core per server unless
#                SCALEOUT_REDIS_CPU is set), N = 1, 2 and 4 (unless
#                --nodes or SCALEOUT_NODES), 32 workers per node, the
#                Redis-heavy scenarios (echo@2026-07-28 progress@2025-11-25
#                sampling@2025-11-25 churn@2025-11-25) for 5 s; each set
#                of these can still be overridden by its variable below.
#                Adds a table of Redis CPU per operation and how many
#                nodes one primary carries.
#   --keep       keep the scratch directory (logs, reports) on exit
#
# The last line is "P passed, F failed": a point passes when mcpbench
# reported no error, every node served part of its requests and, on a
# Redis Cluster, every primary executed some of its commands (and, after
# it, its hosts were all removed); the exit status is 0 only when none
# failed.
#
# Environment (defaults in parentheses):
#   SCALEOUT_SCENARIOS   SCENARIO@REVISION list ("echo@2025-11-25
#                        echo@2026-07-28 progress@2025-11-25
#                        sampling@2025-11-25 sampling@2026-07-28
#                        churn@2025-11-25 fanout@2025-11-25"; mcpbench
#                        --help lists them)
#   SCALEOUT_DURATION    measured time per point (10s), after
#   SCALEOUT_WARMUP      an unmeasured warm-up (1s)
#   SCALEOUT_FANOUT_STREAMS  open GET streams of the fanout scenario (1000); one toggle at a time
#   SCALEOUT_WORKERS_PER_NODE  mcpbench workers per node (16)
#   SCALEOUT_NODE_CPU, SCALEOUT_REDIS_CPU, SCALEOUT_LB_CPU,
#   SCALEOUT_LOAD_CPU    CPU share of each host in cores (0.25, 0.5, 0.5,
#                        0.5); SCALEOUT_REDIS_CPU is each Redis server's,
#                        every Cluster primary's too
#   SCALEOUT_REDIS_SHARDS  the Redis set-ups, as --shards ("0")
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
# Run as root. ip and tc (iproute2), nginx, redis-server, redis-cli, curl
# and jq are installed from Debian packages when missing.
set -euo pipefail
export LC_ALL=C

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

SHORT=0
OUT=""
DATA=""
KEEP=0
REDIS_BOUND=0
NODE_COUNTS="${SCALEOUT_NODES:-}"
SHARD_COUNTS="${SCALEOUT_REDIS_SHARDS:-0}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --short) SHORT=1; shift ;;
    --out) OUT="${2:?--out needs a file}"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --data) DATA="${2:?--data needs a file}"; shift 2 ;;
    --data=*) DATA="${1#*=}"; shift ;;
    --nodes) NODE_COUNTS="${2:?--nodes needs a list}"; shift 2 ;;
    --nodes=*) NODE_COUNTS="${1#*=}"; shift ;;
    --shards) SHARD_COUNTS="${2:?--shards needs a list}"; shift 2 ;;
    --shards=*) SHARD_COUNTS="${1#*=}"; shift ;;
    --redis-bound) REDIS_BOUND=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scaleout: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

if (( REDIS_BOUND )); then
  NODE_COUNTS="${NODE_COUNTS:-1 2 4}"
  SCENARIOS="${SCALEOUT_SCENARIOS:-echo@2026-07-28 progress@2025-11-25 sampling@2025-11-25 churn@2025-11-25}"
  DURATION="${SCALEOUT_DURATION:-5s}"
  WORKERS_PER_NODE="${SCALEOUT_WORKERS_PER_NODE:-32}"
  REDIS_CPU="${SCALEOUT_REDIS_CPU:-0.05}"
else
  NODE_COUNTS="${NODE_COUNTS:-1 2 3 4}"
  SCENARIOS="${SCALEOUT_SCENARIOS:-echo@2025-11-25 echo@2026-07-28 progress@2025-11-25 sampling@2025-11-25 sampling@2026-07-28 churn@2025-11-25 fanout@2025-11-25}"
  DURATION="${SCALEOUT_DURATION:-10s}"
  WORKERS_PER_NODE="${SCALEOUT_WORKERS_PER_NODE:-16}"
  REDIS_CPU="${SCALEOUT_REDIS_CPU:-0.5}"
fi
WARMUP="${SCALEOUT_WARMUP:-1s}"
FANOUT_STREAMS="${SCALEOUT_FANOUT_STREAMS:-1000}"
# PLAN: the points to set up, as SHARDS:N (every Redis set-up with every
# node count; --short: N = 1 and 2 on one Redis, then N = 1 on a
# three-primary Cluster).
PLAN=""
if (( SHORT )); then
  SCENARIOS="echo@2025-11-25"
  DURATION=3s
  PLAN="0:1 0:2 3:1"
else
  for k in $SHARD_COUNTS; do
    for n in $NODE_COUNTS; do PLAN+="${PLAN:+ }$k:$n"; done
  done
fi
NODE_CPU="${SCALEOUT_NODE_CPU:-0.25}"
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
for k in $SHARD_COUNTS; do
  # redis-cli --cluster create wants 3 primaries at least.
  if ! [[ "$k" =~ ^(0|[3-9]|1[0-6])$ ]]; then die "shard counts must be 0 (one standalone Redis) or 3 to 16 (Cluster primaries): $SHARD_COUNTS"; fi
done
[[ -n "$PLAN" ]] || die "nothing to measure: no node counts or shard counts"
for s in $SCENARIOS; do
  [[ "$s" =~ ^[a-z][a-z-]*@[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "SCALEOUT_SCENARIOS: not SCENARIO@REVISION: $s"
done

# ---------------------------------------------------------- prerequisites ---
(( EUID == 0 )) || die "must run as root: it creates network namespaces, veth links and cgroups (try: sudo $0 $*)"

command -v go >/dev/null || die "go is not on PATH (needed to build ./cmd/server and ./cmd/mcpbench)"
missing=()
if ! find_bin ip >/dev/null || ! find_bin tc >/dev/null; then missing+=(iproute2); fi
find_bin nginx >/dev/null || missing+=(nginx)
find_bin redis-server >/dev/null || missing+=(redis-server)
find_bin redis-cli >/dev/null || missing+=(redis-tools)
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
REDIS_CLI="$(find_bin redis-cli)" || die "redis-cli not found"

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
# The primaries of a Redis Cluster are hosts redis1..redisK.
shard_ip() { echo "$NET.$(( 200 + $1 ))"; }
ns_of() { echo "$P-$1"; }
BR_NS="$P-br"
cores_of() {
  case "$1" in
    redis|redis[0-9]*) echo "$REDIS_CPU" ;;
    lb) echo "$LB_CPU" ;;
    load) echo "$LOAD_CPU" ;;
    *) echo "$NODE_CPU" ;;
  esac
}
ip_of() {
  case "$1" in
    redis) echo "$REDIS_IP" ;;
    redis[0-9]*) shard_ip "${1#redis}" ;;
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
# Every point as a line of JSON (run_point), and the limit the report
# found for each (report; for --data).
POINTS="$TMP/points.jsonl"
STATUS="$TMP/status.tsv"
: >"$POINTS"
: >"$STATUS"

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

# left_behind [WHAT]: a failure, said (with WHAT before it) and counted,
# when this run left something behind; returns 1 then.
left_behind() {
  local left
  left="$(leftovers)"
  [[ -z "$left" ]] && return 0
  say "${1:+$1: }left behind${1:+ after teardown}: $(tr '\n' ' ' <<<"$left")"
  FAILED=$(( FAILED + 1 ))
  return 1
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
  left_behind || { (( rc != 0 )) || rc=1; }
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
# redis_ping [ADDRESS]: the Redis server at ADDRESS:6379 (REDIS_IP)
# answers PING.
redis_ping() {
  local reply
  reply="$(in_load timeout 2 bash -c "exec 3<>/dev/tcp/${1:-$REDIS_IP}/6379; printf 'PING\r\n' >&3; head -c 5 <&3")" || return 1
  [[ "$reply" == "+PONG" ]]
}
# cluster_ok ADDRESS: the Cluster primary at ADDRESS:6379 sees the
# cluster as ok, with every primary in it.
cluster_ok() {
  local info
  info="$(in_load "$REDIS_CLI" -h "$1" -p 6379 CLUSTER INFO 2>/dev/null | tr -d '\r')" || return 1
  grep -qx 'cluster_state:ok' <<<"$info" && grep -qx "cluster_known_nodes:${#REDIS_HOSTS[@]}" <<<"$info"
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

# redis_up: one redis-server (REDIS_SHARDS=0) or a Redis Cluster of
# REDIS_SHARDS primaries, no replicas, each on a host of its own; sets
# REDIS_URL to what the nodes and mcpbench are given.
redis_up() {
  local h rc k addrs=() pids=()
  if (( REDIS_SHARDS == 0 )); then
    mkdir -p "$RUN/redis"
    start_on redis redis "$RUN/logs/redis.log" "$REDIS_BIN" --bind "$REDIS_IP" --port 6379 \
      --save "" --appendonly no --protected-mode no --dir "$RUN/redis" --daemonize no
    rc=0; wait_up "${PIDS[-1]}" redis_ping || rc=$?
    (( rc == 0 )) || fail_setup "redis-server did not answer PING on $REDIS_IP:6379"
    REDIS_URL="redis://$REDIS_IP:6379"
    return 0
  fi
  for h in "${REDIS_HOSTS[@]}"; do
    mkdir -p "$RUN/$h"
    start_on "$h" "$h" "$RUN/logs/$h.log" "$REDIS_BIN" --bind "$(ip_of "$h")" --port 6379 \
      --save "" --appendonly no --protected-mode no --dir "$RUN/$h" --daemonize no \
      --cluster-enabled yes --cluster-config-file "$RUN/$h/nodes.conf"
    addrs+=("$(ip_of "$h"):6379")
    pids+=("${PIDS[-1]}")
  done
  for k in "${!REDIS_HOSTS[@]}"; do
    h="${REDIS_HOSTS[$k]}"
    rc=0; wait_up "${pids[$k]}" redis_ping "$(ip_of "$h")" || rc=$?
    (( rc == 0 )) || fail_setup "redis-server $h did not answer PING on $(ip_of "$h"):6379"
  done
  in_load "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
    >"$RUN/logs/cluster-create.log" 2>&1 || { cat "$RUN/logs/cluster-create.log" >&2; fail_setup "redis-cli --cluster create failed"; }
  for k in "${!REDIS_HOSTS[@]}"; do
    h="${REDIS_HOSTS[$k]}"
    rc=0; wait_up "${pids[$k]}" cluster_ok "$(ip_of "$h")" || rc=$?
    (( rc == 0 )) || fail_setup "Redis Cluster: $h did not report cluster_state:ok with ${#REDIS_HOSTS[@]} nodes"
  done
  REDIS_URL="redis-cluster://$(IFS=,; echo "${addrs[*]}")"
}

# cluster_up N [SHARDS]: the hosts, Redis (one server, or a Cluster of
# SHARDS primaries), N nodes and nginx, each checked.
RUN=""
KEEPALIVE_SEEN=""
REDIS_SHARDS=0
REDIS_HOSTS=()
REDIS_URL=""
cluster_up() {
  local n="$1" i h rc
  REDIS_SHARDS="${2:-0}"
  REDIS_HOSTS=()
  if (( REDIS_SHARDS == 0 )); then
    REDIS_HOSTS=(redis)
    RUN="$TMP/runs/n$n"
  else
    for (( i=1; i<=REDIS_SHARDS; i++ )); do REDIS_HOSTS+=("redis$i"); done
    RUN="$TMP/runs/k$REDIS_SHARDS-n$n"
  fi
  mkdir -p "$RUN/logs" "$RUN/nginx/logs" "$RUN/nginx/tmp"
  chmod 755 "$TMP/runs" "$RUN" "$RUN/nginx" "$RUN/nginx/tmp"

  "$IP" netns add "$BR_NS"
  "$IP" -n "$BR_NS" link set lo up
  "$IP" -n "$BR_NS" link add name br0 type bridge
  "$IP" -n "$BR_NS" link set br0 up
  if (( CGV == 1 )); then mkdir -p "$CG_CPU/$P" "$CG_ACCT/$P"; else mkdir -p "$CG2/$P"; fi
  for h in "${REDIS_HOSTS[@]}" lb load; do add_host "$h"; done
  for (( i=1; i<=n; i++ )); do add_host "node$i"; done

  redis_up

  export MCP_STATE_KEY="$STATE_KEY"
  local first=${#PIDS[@]}
  for (( i=1; i<=n; i++ )); do
    start_on "node$i" "node$i" "$RUN/logs/node$i.log" "$TMP/bin/server" \
      --addr "$(node_ip "$i"):8080" --metrics-addr "$(node_ip "$i"):7979" \
      --redis-url "$REDIS_URL" --node-id "node$i" --tools demo \
      --trusted-proxies "$LB_IP" --drain-timeout 2s "${NODE_ARGS[@]}"
  done
  unset MCP_STATE_KEY
  for (( i=1; i<=n; i++ )); do
    rc=0; wait_up "${PIDS[$(( first + i - 1 ))]}" node_ready "$i" || rc=$?
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
  (( nns == n + 3 + ${#REDIS_HOSTS[@]} )) || bad+=" namespaces($nns, want $(( n + 3 + ${#REDIS_HOSTS[@]} )))"
  [[ -z "$bad" ]] || fail_setup "hosts not as set up:$bad"
  say "N=$n: ${#HOSTS[@]} hosts up (namespaces, CPU shares$( (( NETEM )) && [[ "$DELAY" != 0 ]] && echo ", netem $DELAY")), $(redis_name), $n node(s), nginx on $LB_IP:8080"
}

# redis_name: the Redis set-up of the current cluster, in words.
redis_name() {
  if (( REDIS_SHARDS == 0 )); then echo "one Redis"; else echo "a Redis Cluster of $REDIS_SHARDS primaries"; fi
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

# point_json N SCENARIO REVISION REPORT CPU COUNTS REDIS_US BUS PRIMARIES:
# one point as a line of JSON, from mcpbench's REPORT and the figures
# run_point took (the $RESULTS columns of the same names). The limit is
# added when the data file is written.
point_json() {
  jq -c --argjson k "$REDIS_SHARDS" --argjson n "$1" --arg sc "$2" --arg rev "$3" \
    --arg cpu "$5" --arg counts "$6" --argjson rus "$7" --argjson bus "$8" --arg prim "$9" \
    --arg hosts "${REDIS_HOSTS[*]}" '
    def known: if . < 0 then null else . end;
    def pair: split(":") | map(tonumber) | {cores: .[0], of_share: .[1]};
    ($cpu | split(" ")) as $c
    | ($hosts | split(" ")) as $h
    | {shards: $k, n: $n, scenario: $sc, revision: $rev, ok: true,
       ops_per_s: .ops_per_s, p50_ms: .latency.p50_ms, p99_ms: .latency.p99_ms,
       errors: (.errors + ([(.setup_errors // {})[] | .count] | add // 0)),
       redis_commands_per_op: (.redis.total_commands_per_op // null),
       bus_messages_per_op: $bus,
       redis_us_per_op: ($rus | known),
       cpu: (if $cpu == "none" then null else
         {redis: ($c[0] | pair), lb: ($c[1] | pair), load: ($c[2] | pair),
          nodes: [$c[3:3 + $n][] | pair], total_cores: ($c[3 + $n] | tonumber)} end),
       requests_per_node: ($counts | split(" ") | map(select(. != "") | tonumber)),
       primaries: [$prim | split(" ") | to_entries[] | select(.value != "")
         | (.value | split(":") | map(tonumber | known)) as $v
         | {host: $h[.key], cores: $v[0], of_share: $v[1], commands_per_op: $v[2],
            publish_per_op: $v[3], spublish_per_op: $v[4], bus_publish_received_per_op: $v[5]}]}
    | .node_us_per_op = (if .cpu == null or .ops_per_s <= 0 then null
        else ([.cpu.nodes[].cores] | add) * 1e6 / .ops_per_s end)' "$4"
}

# run_point N SCENARIO REVISION: one mcpbench run through nginx; appends
# a line to $RESULTS and a JSON object to $POINTS.
#
# $RESULTS columns: N, scenario, revision, ops/s (or "fail"), p50 ms,
# p99 ms, errors, setup errors, ops, CPU ("used:of-share" per host:
# Redis (summed over the primaries, the highest share of one), nginx,
# load, node1..nodeN; then the cores of all hosts), requests per node,
# error kinds, Redis commands/op, bus messages/op (PUBLISH and SPUBLISH),
# Redis shards (0: one server), Redis CPU µs/op, and per primary
# "used:of-share:commands:publish:spublish:bus" (bus: publish messages it
# received over the cluster bus; all per operation but the CPU).
# wait_bench waits up to SECS seconds for the mcpbench of PID to end,
# stops it (INT, then KILL) past that, and sets BENCH_RC to its status.
wait_bench() {
  local pid="$1" deadline=$(( SECONDS + $2 ))
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    say "mcpbench did not end in time; stopping it"
    kill -INT "$pid" 2>/dev/null || true
    sleep 5
    kill -KILL "$pid" 2>/dev/null || true
  fi
  BENCH_RC=0; wait "$pid" 2>/dev/null || BENCH_RC=$?
}

run_point() {
  local n="$1" sc="$2" rev="$3" c json log rc pid hosts=() i extra=()
  c=$(( WORKERS_PER_NODE * n ))
  if [[ "$sc" == fanout ]]; then
    # One toggle at a time, each timed until every open stream has it.
    c=1 extra=(--streams "$FANOUT_STREAMS")
  fi
  json="$RUN/$sc-$rev.json"
  log="$RUN/logs/mcpbench-$sc-$rev.log"
  hosts=("${REDIS_HOSTS[@]}" lb load)
  for (( i=1; i<=n; i++ )); do hosts+=("node$i"); done
  local lines0
  lines0="$(wc -l <"$ACCESS_LOG")"
  sampler "${hosts[@]}" >"$RUN/cpu-$sc-$rev.txt" &
  SAMPLER_PID=$!
  start_on load mcpbench "$log" "$TMP/bin/mcpbench" --url "http://$LB_IP:8080/mcp" \
    --scenario "$sc" --revision "$rev" -c "$c" -d "$DURATION" --warmup "$WARMUP" \
    --source "$SOURCE_RANGE" --redis "$REDIS_URL" -q --json "$json" "${extra[@]}"
  pid="${PIDS[-1]}"
  wait_bench "$pid" $(( DURATION_S + WARMUP_S + 60 )); rc=$BENCH_RC
  unset 'PIDS[-1]' 'NAMES[-1]' 'LOGS[-1]'
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""

  if [[ ! -s "$json" ]]; then
    say "N=$n $sc@$rev: no report (mcpbench exit $rc):"
    tail -n 20 "$log" | sed 's/^/    /' >&2
    printf '%s\t%s\t%s\tfail\t\t\t\t\t\t\t\t\t\t\t%s\t\t\n' "$n" "$sc" "$rev" "$REDIS_SHARDS" >>"$RESULTS"
    jq -cn --argjson k "$REDIS_SHARDS" --argjson n "$n" --arg sc "$sc" --arg rev "$rev" \
      '{shards: $k, n: $n, scenario: $sc, revision: $rev, ok: false}' >>"$POINTS"
    FAILED=$(( FAILED + 1 ))
    return 0
  fi
  local ops_s p50 p99 errs setup_errs ops started elapsed kinds rcmds rpub
  IFS=$'\t' read -r ops_s p50 p99 errs setup_errs ops started elapsed rcmds rpub < <(jq -r '[.ops_per_s, .latency.p50_ms, .latency.p99_ms, .errors,
      ([(.setup_errors // {})[] | .count] | add // 0), .ops, .started, .elapsed_s,
      (.redis.total_commands_per_op // -1),
      ((.redis.commands_per_op.publish // 0) + (.redis.commands_per_op.spublish // 0))] | @tsv' "$json")
  kinds="$(jq -r '[(.error_kinds // {}), (.setup_errors // {}) | to_entries[] | "\(.key) \(.value.count)"] | join(", ")' "$json")"

  # CPU of each host in the measured window, as a fraction of its share:
  # one line with Redis (the primaries summed; the highest fraction of
  # one), the other hosts and the total, and one with each Redis host.
  local t0 t1 cpu rcpu
  t0="$(date -d "$started" +%s.%N)"
  t1="$(awk -v a="$t0" -v e="$elapsed" 'BEGIN{printf "%.6f", a + e}')"
  local shares=()
  for h in "${hosts[@]}"; do shares+=("$(cores_of "$h")"); done
  { read -r cpu; read -r rcpu || true; } < <(awk -v t0="$t0" -v t1="$t1" -v shares="${shares[*]}" -v nred="${#REDIS_HOSTS[@]}" '
    BEGIN { ns = split(shares, sh, " ") }
    { t = $1 + 0
      if (t >= t0 && !have_a) { have_a = 1; ta = t; for (i = 2; i <= NF; i++) ua[i] = $i }
      if (t <= t1) { tb = t; for (i = 2; i <= NF; i++) ub[i] = $i }
    }
    END {
      if (!have_a || tb - ta < 0.5) { print "none"; print ""; exit }
      out = ""; total = 0; rused = 0; rmax = 0; each = ""
      for (i = 2; i <= ns + 1; i++) {
        used = (ub[i] - ua[i]) / 1e9 / (tb - ta)
        total += used
        if (i - 1 <= nred) {
          rused += used; if (used / sh[i - 1] > rmax) rmax = used / sh[i - 1]
          each = each sprintf("%.3f:%.3f ", used, used / sh[i - 1])
          if (i - 1 == nred) out = sprintf("%.3f:%.3f ", rused, rmax)
        } else out = out sprintf("%.3f:%.3f ", used, used / sh[i - 1])
      }
      printf "%s%.3f\n%s\n", out, total, each
    }' "$RUN/cpu-$sc-$rev.txt")
  # Redis CPU per operation, and each primary's part.
  local rus="-1" shard_list="" tok
  if [[ "$cpu" != none ]]; then
    rus="$(awk -v c="${cpu%% *}" -v t="$ops_s" 'BEGIN { split(c, x, ":"); printf "%.1f", (t > 0 ? 1e6 * x[1] / t : -1) }')"
  fi
  if (( REDIS_SHARDS > 0 )); then
    local each=() k2=0
    read -r -a each <<<"$rcpu"
    for h in "${REDIS_HOSTS[@]}"; do
      tok="$(jq -r --arg a "$(ip_of "$h"):6379" '[.redis.shards[]? | select(.addr == $a)][0] // {} |
        [(.commands_per_op // -1), (.publish_per_op // -1), (.spublish_per_op // -1), (.bus_publish_received_per_op // -1)]
        | map(tostring) | join(":")' "$json")"
      shard_list+="${shard_list:+ }${each[$k2]:--1:-1}:$tok"
      k2=$(( k2 + 1 ))
    done
  fi

  # Requests per node (the node that answered: the last upstream).
  local counts
  counts="$(tail -n +"$(( lines0 + 1 ))" "$ACCESS_LOG" | awk -v n="$n" '
    # upstream=A[, B...] rt=...: the last one tried answered.
    /upstream=/ { u = $0; sub(/.* upstream=/, "", u); sub(/ rt=.*/, "", u)
      k = split(u, tried, /, */); c[tried[k]]++ }
    END { for (i = 1; i <= n; i++) { a = sprintf("10.77.0.%d:8080", 10 + i); printf "%d ", c[a] + 0 } }')"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$sc" "$rev" "$ops_s" "$p50" "$p99" "$errs" \
    "$setup_errs" "$ops" "$cpu" "$counts" "$kinds" "$rcmds" "$rpub" "$REDIS_SHARDS" "$rus" "$shard_list" >>"$RESULTS"
  point_json "$n" "$sc" "$rev" "$json" "$cpu" "$counts" "$rus" "$rpub" "$shard_list" >>"$POINTS"

  # Pass: answered without error, and every node served requests.
  local why=""
  (( ops > 0 )) || why+=" no operation succeeded;"
  (( errs == 0 && setup_errs == 0 )) || why+=" errors: $kinds;"
  local cnt k=0
  for cnt in $counts; do k=$(( k + 1 )); (( cnt > 0 )) || why+=" node$k served no request;"; done
  (( k == n )) || why+=" requests per node not found in nginx's access log;"
  [[ "$cpu" != none ]] || why+=" no CPU samples in the window;"
  if (( REDIS_SHARDS > 0 )); then
    local watched
    watched="$(jq '[.redis.shards[]? | select(.commands_per_op > 0)] | length' "$json")"
    (( watched == REDIS_SHARDS )) || why+=" mcpbench saw commands on $watched of the $REDIS_SHARDS primaries;"
  fi
  if [[ -z "$why" ]]; then
    say "$( (( REDIS_SHARDS > 0 )) && echo "K=$REDIS_SHARDS ")N=$n $sc@$rev: $(printf '%.0f ops/s, p50 %.2f ms, p99 %.2f ms, Redis %s µs/op' "$ops_s" "$p50" "$p99" "$rus"), requests per node: ${counts% }"
    PASSED=$(( PASSED + 1 ))
  else
    say "$( (( REDIS_SHARDS > 0 )) && echo "K=$REDIS_SHARDS ")N=$n $sc@$rev: FAILED:$why (mcpbench exit $rc)"
    FAILED=$(( FAILED + 1 ))
  fi
}

# ---------------------------------------------------------------- report ---
# report [FILE]: the markdown tables of FILE ($RESULTS); the limit of
# each point is also appended to $STATUS as "shards N scenario@revision
# limit".
report() {
  awk -F'\t' -v sat="$SATURATED" -v cpus="$CPUS" -v statusfile="${STATUS:-}" '
    function pct(x) { return sprintf("%.0f%%", 100 * x) }
    {
      n = $1; key = $2 "@" $3
      if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
      if (!(n in seenN)) { seenN[n] = 1; ns[++nn] = n }
      if ($4 == "fail") { ok[key, n] = 0; row[++nr] = sprintf("| %s | %s | – | – | – | no report | – | – | – | – | – | – | – | – | – | – | – | failed |", n, key); next }
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
      if (statusfile != "") printf "%d\t%s\t%s\t%s\n", $15, n, key, status >>statusfile
      rc = ($13 >= 0) ? sprintf("%.2f", $13) : "–"
      rus = ($16 != "" && $16 >= 0) ? sprintf("%.1f", $16) : "–"
      row[++nr] = sprintf("| %s | %s | %.0f | %.2f | %.2f | %d | EFF(%s,%s) | %s | %s | %s | %s | %.2f | %s | %s | %s | %.2f | %s | %s |",
        n, key, $4, $5, $6, $7 + $8, key, n, nodes, perop, rus, rc, $14, pct(r[2]), pct(l[2]), pct(d[2]), total, spread, status)
    }
    END {
      print "| N | scenario@revision | ops/s | p50 ms | p99 ms | errors | efficiency | CPU of share: nodes | node µs/op | Redis µs/op | Redis commands/op | bus messages/op | redis | nginx | load | cores used (all) | requests per node | limit |"
      print "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
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
    }' "${1:-$RESULTS}"
}

# shard_report FILE: for the Redis Cluster points of FILE, each
# primary's CPU and what it handled per operation.
shard_report() {
  awk -F'\t' '
    function pct(x) { return sprintf("%.0f%%", 100 * x) }
    function num(x, f) { return x < 0 ? "–" : sprintf(f, x) }
    $4 != "fail" && $15 > 0 {
      k = split($17, p, " "); cpus = ""; cm = 0; pb = 0; sp = 0; bus = 0; known = 1
      for (i = 1; i <= k; i++) {
        split(p[i], v, ":")
        cpus = cpus (i > 1 ? " " : "") (v[2] < 0 ? "–" : pct(v[2]))
        if (v[3] < 0 || v[4] < 0 || v[5] < 0 || v[6] < 0) known = 0
        cm += v[3]; pb += v[4]; sp += v[5]; bus += v[6]
      }
      if (!rows++) {
        print "Per primary (mean over the " k " primaries but the CPU; per operation): the commands it executed, the PUBLISH and SPUBLISH clients sent it, the publish messages it received from the other primaries over the cluster bus, and all the pub/sub messages it handled (the three summed)."
        print ""
        print "| N | scenario@revision | CPU of share: each primary | commands/op | PUBLISH/op | SPUBLISH/op | bus publish messages received/op | pub/sub messages handled/op |"
        print "|---|---|---|---:|---:|---:|---:|---:|"
      }
      if (!known || k == 0) { printf "| %s | %s@%s | %s | – | – | – | – | – |\n", $1, $2, $3, cpus; next }
      printf "| %s | %s@%s | %s | %.2f | %.3f | %.3f | %.3f | %.3f |\n", $1, $2, $3, cpus, cm / k, pb / k, sp / k, bus / k, (pb + sp + bus) / k
    }' "$1"
}

# redis_report: Redis CPU per operation and how many nodes one primary
# carries, per Redis set-up and scenario, at the largest N measured; and
# the throughput there by number of shards.
redis_report() {
  awk -F'\t' -v nodecpu="$NODE_CPU" -v rediscpu="$REDIS_CPU" '
    FILENAME == ARGV[1] { st[$1, $2, $3] = $4; next }
    {
      k = $15 + 0; n = $1 + 0; key = $2 "@" $3
      if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
      if (!(k in seenK)) { seenK[k] = 1; ks[++nks] = k }
      if (n < top[k, key]) next
      top[k, key] = n; line[k, key] = $0
    }
    function label(k) { return k == 0 ? "one server" : k " primaries" }
    END {
      print "Redis CPU per operation (all primaries) against the nodes'"'"', at the largest N of each set-up. A primary with one core (Redis runs commands on one thread) carries node µs/op ÷ (Redis µs/op × " nodecpu ") nodes of " nodecpu " core; at its share here (" rediscpu " core), that times " rediscpu ". The figures hold where Redis is the limit (saturated: redis) or close to it."
      print ""
      print "| Redis | scenario@revision | N | ops/s | Redis CPU of share (highest primary) | Redis µs/op | node µs/op | nodes per primary (one core) | nodes per primary (its share here) | limit |"
      print "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
      for (j = 1; j <= nks; j++) for (i = 1; i <= nk; i++) {
        k = ks[j]; key = order[i]
        if (!((k, key) in line)) continue
        split(line[k, key], f, "\t"); n = f[1]
        if (f[4] == "fail") { printf "| %s | %s | %s | – | – | – | – | – | – | failed |\n", label(k), key, n; continue }
        split(f[10], c, " "); split(c[1], r, ":")
        nused = 0; for (m = 1; m <= n; m++) { split(c[3 + m], x, ":"); nused += x[1] }
        nus = f[4] > 0 ? 1e6 * nused / f[4] : -1; rus = f[16] + 0
        carry = (nus > 0 && rus > 0) ? nus / (rus * nodecpu) : -1
        ops[k, key] = f[4]; sat[k, key] = st[k, n, key] ~ /saturated: .*redis/
        printf "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n", label(k), key, n, f[4],
          (f[10] == "none" ? "–" : sprintf("%.0f%%", 100 * r[2])), (rus > 0 ? sprintf("%.1f", rus) : "–"),
          (nus > 0 ? sprintf("%.0f", nus) : "–"), (carry > 0 ? sprintf("%.1f", carry) : "–"),
          (carry > 0 ? sprintf("%.1f", carry * rediscpu) : "–"), st[k, n, key]
      }
      if (nks < 2) exit
      print ""
      print "Throughput at the largest N by Redis set-up (* = saturated: redis)"
      print ""
      hdr = "| scenario@revision |"; sep = "|---|"
      for (j = 1; j <= nks; j++) { hdr = hdr " " label(ks[j]) " |"; sep = sep "---:|" }
      print hdr; print sep
      for (i = 1; i <= nk; i++) {
        key = order[i]; row = "| " key " |"
        for (j = 1; j <= nks; j++) {
          k = ks[j]
          row = row " " (((k, key) in ops) ? sprintf("%.0f%s", ops[k, key], sat[k, key] ? "*" : "") : "–") " |"
        }
        print row
      }
    }' "$STATUS" "$RESULTS"
}

# write_data: the run's settings and every point ($POINTS) with the
# limit the report found ($STATUS), as one JSON document.
write_data() {
  jq -n --slurpfile pts "$POINTS" --rawfile st "$STATUS" \
    --arg started "$STARTED" --argjson cpus "$CPUS" --arg model "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
    --argjson cgroup "$CGV" --argjson node "$NODE_CPU" --argjson redis "$REDIS_CPU" --argjson lb "$LB_CPU" --argjson load "$LOAD_CPU" \
    --argjson workers "$WORKERS_PER_NODE" --arg duration "$DURATION" --arg warmup "$WARMUP" \
    --arg delay "$( (( NETEM )) && echo "$DELAY" || echo 0)" --argjson redis_bound "$REDIS_BOUND" --argjson short "$SHORT" '
    ([$st | split("\n")[] | select(. != "") | split("\t") | {key: "\(.[0]) \(.[1]) \(.[2])", value: .[3]}] | from_entries) as $lim
    | {started: $started, machine: {cpus: $cpus, model: $model, cgroup: $cgroup},
       shares: {node: $node, redis: $redis, lb: $lb, load: $load},
       workers_per_node: $workers, duration: $duration, warmup: $warmup, link_delay: $delay,
       redis_bound: ($redis_bound == 1), short: ($short == 1),
       points: [$pts[] | .limit = ($lim["\(.shards) \(.n) \(.scenario)@\(.revision)"] // (if .ok then null else "failed" end))]}'
}

# ------------------------------------------------------------------- run ---
# Sourced (scripts/scaleout-peers.sh): the settings, hosts, cleanup and
# functions above only; the measurement below runs when executed.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0
say "building ./cmd/server and ./cmd/mcpbench"
go build -o "$TMP/bin/server" ./cmd/server || die "./cmd/server does not build"
go build -o "$TMP/bin/mcpbench" ./cmd/mcpbench || die "./cmd/mcpbench does not build"
STATE_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
RESULTS="$TMP/results.tsv"
: >"$RESULTS"
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"
SHARDS_SEEN=""
for pt in $PLAN; do
  k="${pt%:*}"; n="${pt#*:}"
  [[ " $SHARDS_SEEN " == *" $k "* ]] || SHARDS_SEEN+="${SHARDS_SEEN:+ }$k"
  cluster_up "$n" "$k"
  for s in $SCENARIOS; do
    run_point "$n" "${s%@*}" "${s#*@}"
  done
  cluster_down
  left_behind "N=$n" || true
done

{
  echo "Scale-out testbed, $STARTED: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), cgroup v$CGV."
  echo "Shares: node $NODE_CPU, redis $REDIS_CPU, nginx $LB_CPU, load $LOAD_CPU core(s); ${WORKERS_PER_NODE}×N workers from $SOURCES addresses; $DURATION per point after $WARMUP warm-up;"
  echo "nginx: deploy/nginx/compose.conf$( [[ -n "$NGINX_KEEPALIVE" ]] && echo " with its keepalive replaced"), keepalive ${KEEPALIVE_SEEN:-none} (idle upstream connections kept);"
  if (( NETEM )) && [[ "$DELAY" != 0 ]]; then echo "netem delay $DELAY on each host's side of its link."
  elif [[ "$DELAY" == 0 ]]; then echo "no added link delay."
  else echo "$NETEM_NOTE."
  fi
  if [[ "$SHARDS_SEEN" != 0 ]]; then
    echo "Redis: $(for k in $SHARDS_SEEN; do if (( k == 0 )); then echo "one server;"; else echo "a Cluster of $k primaries (no replicas);"; fi; done | paste -sd ' ') $REDIS_CPU core per Redis server."
  fi
  for k in $SHARDS_SEEN; do
    echo
    if [[ "$SHARDS_SEEN" != 0 ]]; then
      if (( k == 0 )); then echo "**Redis: one server**"; else echo "**Redis Cluster: $k primaries** (the redis column: the highest share one primary used)"; fi
      echo
    fi
    awk -F'\t' -v k="$k" '$15 == k' "$RESULTS" >"$TMP/results-k$k.tsv"
    report "$TMP/results-k$k.tsv"
    if (( k > 0 )); then
      echo
      shard_report "$TMP/results-k$k.tsv"
    fi
  done
  if (( REDIS_BOUND )) || [[ "$SHARDS_SEEN" != 0 ]]; then
    echo
    redis_report
  fi
} >"$TMP/report.md"
cat "$TMP/report.md"
if [[ -n "$OUT" ]]; then mkdir -p "$(dirname "$OUT")"; cp "$TMP/report.md" "$OUT"; fi
if [[ -n "$DATA" ]]; then
  write_data >"$TMP/data.json" || die "could not write the data file"
  mkdir -p "$(dirname "$DATA")"
  cp "$TMP/data.json" "$DATA"
fi

# Nothing may be left once everything is torn down.
stop_processes
remove_hosts
left_behind || true
summary
(( FAILED == 0 ))
