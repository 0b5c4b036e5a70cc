#!/usr/bin/env bash
# Installs staticcheck (honnef.co/go/tools, pinned below) from the Go module
# proxy into a cache directory on first use, and prints the binary's path.
#
#   sc=$(scripts/staticcheck.sh) && "$sc" ./...
#
# Cache: ${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}/staticcheck-VERSION-GOVERSION/
# (keyed by the Go toolchain too: staticcheck must be built by the Go that
# compiles the code it checks). Progress goes to stderr; only the path goes
# to stdout.
set -euo pipefail

STATICCHECK_VERSION=v0.8.2

CACHE_ROOT="${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}"
goversion="$(go env GOVERSION)"
DIR="$CACHE_ROOT/staticcheck-$STATICCHECK_VERSION-$goversion"
BIN="$DIR/staticcheck"

log() { printf 'staticcheck.sh: %s\n' "$*" >&2; }

if [[ ! -x "$BIN" ]]; then
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-staticcheck-$STATICCHECK_VERSION-$goversion"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [[ ! -x "$BIN" ]]; then
    log "installing honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION with $goversion"
    stage="$(mktemp -d "$CACHE_ROOT/.tmp-staticcheck.XXXXXX")"
    # Outside any module, so the project's go.mod plays no part.
    if ! (cd "$stage" && GOBIN="$stage" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"); then
      rm -rf "$stage"
      log "ERROR: go install failed"
      exit 1
    fi
    rm -rf "$DIR"
    mv "$stage" "$DIR"
  fi
  exec 9>&-
fi
printf '%s\n' "$BIN"
