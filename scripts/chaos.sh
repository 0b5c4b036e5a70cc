#!/usr/bin/env bash
# The chaos harness (cmd/chaos): three nodes on Redis behind nginx
# (deploy/nginx/compose.conf) under a verifying load while faults hit
# them. Installs redis-server and nginx from Debian packages when missing
# (their system services are not started); toxiproxy runs inside the
# harness and the Sentinel scenario runs redis-server --sentinel.
#
# The upgrade scenario runs the previous release's cmd/server beside this
# tree's: scripts/previous.sh builds it once into a cache, and it is
# passed as -previous when the run includes that scenario.
#
# Usage: scripts/chaos.sh [cmd/chaos flags]
#   scripts/chaos.sh                 every scenario (make chaos, ~23 min)
#   scripts/chaos.sh -short          kill -9 and a Redis restart (~3 min)
#   scripts/chaos.sh -scenarios aof  one scenario; -h lists the flags
#   scripts/chaos.sh -scenarios upgrade -duration 45s
#                                    the upgrade and downgrade (~70 s), a
#                                    stage of scripts/test.sh
# Environment: CHAOS_TIMEOUT (seconds, default 1800) bounds the whole run.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]] || missing+=(redis-server)
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
if (( ${#missing[@]} > 0 )); then
  echo "chaos: installing ${missing[*]} (Debian packages)"
  apt_install "${missing[@]}"
fi
args=("$@")
case " $* " in
  *" -h "*|*" -help "*|*" --help "*|*" -previous"*|*" --previous"*) ;;
  *upgrade*) args=(-previous "$(scripts/previous.sh)" "${args[@]}") ;;
  *" -scenarios"*|*" --scenarios"*|*" -short "*|*" --short "*) ;;
  *) args=(-previous "$(scripts/previous.sh)" "${args[@]}") ;; # every scenario
esac
go build -o "${TMPDIR:-/tmp}/mcpcluster-chaos" ./cmd/chaos
exec timeout --signal=INT --kill-after=30 "${CHAOS_TIMEOUT:-1800}" "${TMPDIR:-/tmp}/mcpcluster-chaos" "${args[@]}"
