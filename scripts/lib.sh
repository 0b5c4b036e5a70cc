# Shell helpers shared by the project's scripts; source it, do not run it.

# as_root CMD...: runs CMD as root (directly, or through non-interactive sudo).
as_root() {
  if (( EUID == 0 )); then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else echo "need root to run: $*" >&2; return 1
  fi
}

# find_bin NAME: the path of NAME, on PATH or in the system directories
# (where Debian puts tools that root's PATH may lack).
find_bin() {
  command -v "$1" 2>/dev/null && return 0
  local d
  for d in /usr/sbin /usr/bin /sbin /bin; do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}

# apt_install PKG...: installs Debian packages without starting their
# system services (a policy-rc.d that denies every start): the scripts
# start their own redis-server or nginx on free ports. apt-get update
# runs once per shell. The install's output is shown only on failure.
APT_UPDATED=0
apt_install() {
  if (( ! APT_UPDATED )); then
    as_root apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  local guard=0 rc=0 log
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod +x /usr/sbin/policy-rc.d
    guard=1
  fi
  log="$(mktemp "${TMPDIR:-/tmp}/mcpcluster-apt.XXXXXX")"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >"$log" 2>&1 || rc=$?
  if (( guard )); then as_root rm -f /usr/sbin/policy-rc.d; fi
  if (( rc != 0 )); then cat "$log" >&2; fi
  rm -f "$log"
  return "$rc"
}

# start NAME LOGFILE CMD...: starts CMD in the background with its output
# in LOGFILE, and records it in the caller's PIDS, NAMES and LOGS arrays
# (which the caller's cleanup stops and whose logs it prints).
start() {
  local name="$1" logf="$2"; shift 2
  "$@" >"$logf" 2>&1 </dev/null &
  PIDS+=("$!"); NAMES+=("$name"); LOGS+=("$logf")
}

# stop_pid NAME PID [TENTHS]: asks a process started with start to stop
# (nginx with QUIT, so that it finishes its requests; anything else with
# TERM), waits up to TENTHS tenths of a second (default 100) and kills it
# past that (the caller's say reports it), then reaps it.
stop_pid() {
  local name="$1" pid="$2" limit="${3:-100}" n=0
  if kill -0 "$pid" 2>/dev/null; then
    if [[ "$name" == nginx ]]; then kill -QUIT "$pid" 2>/dev/null || true
    else kill -TERM "$pid" 2>/dev/null || true
    fi
    while kill -0 "$pid" 2>/dev/null && (( n < limit )); do sleep 0.1; n=$(( n + 1 )); done
    if kill -0 "$pid" 2>/dev/null; then
      say "$name (pid $pid) did not stop within $(( limit / 10 ))s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# tail_logs LINES: the last LINES lines of the log of every process
# started with start that wrote one (the caller's say names each).
tail_logs() {
  local i
  for i in "${!PIDS[@]}"; do
    [[ -s "${LOGS[$i]}" ]] || continue
    say "--- last $1 lines of ${NAMES[$i]} (${LOGS[$i]}) ---"
    tail -n "$1" "${LOGS[$i]}" | sed 's/^/    /'
  done
}
