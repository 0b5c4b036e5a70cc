#!/usr/bin/env bash
# Builds cmd/server of the previous release once into a cache directory
# and prints the binary's path: the chaos harness's upgrade scenario
# (scripts/chaos.sh -scenarios upgrade) runs it beside this tree's build.
#
#   prev="$(scripts/previous.sh)"
#   "$prev" --version
#
# The previous release is PREVIOUS_RELEASE below, a tag or commit of this
# repository (MCP_PREVIOUS_RELEASE overrides it); docs/UPGRADING.md says
# when it moves. Its source is read from git with git archive (the work
# tree, index and branches are not touched), so the clone must hold that
# commit: after a shallow clone, git fetch --unshallow (or fetch the tag).
#
# Cache: ${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}/server-COMMIT/server,
# keyed by the full commit. A cold build takes a minute or two on 2 cores;
# later calls only check the binary. Progress goes to stderr; only the path
# to stdout.
set -euo pipefail

PREVIOUS_RELEASE="${MCP_PREVIOUS_RELEASE:-dac849f}" # v0.1.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}"

log() { printf 'previous.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v git >/dev/null 2>&1 || die "git not found on PATH"
commit="$(git -C "$ROOT" rev-parse --verify --quiet "${PREVIOUS_RELEASE}^{commit}")" ||
  die "the previous release $PREVIOUS_RELEASE is not in this clone's history (git fetch --unshallow, or fetch its tag)"
DIR="$CACHE_ROOT/server-$commit"
BIN="$DIR/server"

installed() { [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; }

if ! installed; then
  command -v go >/dev/null 2>&1 || die "go not found on PATH"
  mkdir -p "$CACHE_ROOT"
  # Serialise concurrent builds of the same commit.
  exec 9>"$CACHE_ROOT/.lock-server-$commit"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! installed; then
    log "building cmd/server of $PREVIOUS_RELEASE ($commit) into $DIR"
    stage="$(mktemp -d "$CACHE_ROOT/.tmp-server.XXXXXX")"
    trap 'rm -rf "$stage"' EXIT
    start=$SECONDS
    mkdir -p "$stage/src"
    git -C "$ROOT" archive "$commit" | tar -x -C "$stage/src"
    # Outside a git work tree: no VCS stamp; the release is the version.
    if ! (cd "$stage/src" && GOFLAGS=-buildvcs=false go build -trimpath \
          -ldflags "-X main.version=$PREVIOUS_RELEASE" -o "$stage/server" ./cmd/server \
          >"$stage/build.log" 2>&1); then
      cat "$stage/build.log" >&2
      die "go build ./cmd/server of $PREVIOUS_RELEASE failed"
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    mv "$stage/server" "$BIN"
    installed || die "the built server does not run: $("$BIN" --version 2>&1 || true)"
    log "built $PREVIOUS_RELEASE in $(( SECONDS - start ))s"
  fi
fi
printf '%s\n' "$BIN"
