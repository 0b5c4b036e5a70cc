#!/usr/bin/env bash
# Builds the pinned helm (helm.sh/helm/v4, from the Go module proxy with
# `go install`) into a cache directory once, and prints the binary's path.
#
#   helm="$(scripts/helm.sh)"
#   "$helm" lint --strict deploy/helm/mcpcluster
#
# Cache: ${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}/helm-VERSION/helm. A cold
# build takes a few minutes (it compiles client-go and friends); later calls
# only check the binary. Progress goes to stderr; only the path to stdout.
set -euo pipefail

HELM_VERSION=v4.3.1
CACHE_ROOT="${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}"
DIR="$CACHE_ROOT/helm-$HELM_VERSION"
BIN="$DIR/helm"

log() { printf 'helm.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

installed() {
  [[ -x "$BIN" ]] && "$BIN" version --short 2>/dev/null | grep -qx "${HELM_VERSION}.*"
}

if ! installed; then
  command -v go >/dev/null 2>&1 || die "go not found on PATH"
  mkdir -p "$CACHE_ROOT"
  # Serialise concurrent builds of the same version.
  exec 9>"$CACHE_ROOT/.lock-helm-$HELM_VERSION"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! installed; then
    log "building helm $HELM_VERSION into $DIR (go install; a few minutes the first time)"
    stage="$(mktemp -d "$CACHE_ROOT/.tmp-helm.XXXXXX")"
    start=$SECONDS
    # Outside any module (go install pkg@version ignores it anyway); the
    # version ldflag makes `helm version` report the pinned tag. helm only
    # lints and renders here: built without optimisation (-N -l) it compiles
    # in about two thirds of the time, and the chart checks run a few
    # seconds slower.
    if ! (cd "$stage" && GOBIN="$stage" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
          go install -gcflags=all='-N -l' \
          -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
          "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >"$stage/build.log" 2>&1); then
      cat "$stage/build.log" >&2
      rm -rf "$stage"
      die "go install helm.sh/helm/v4/cmd/helm@$HELM_VERSION failed"
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    mv "$stage/helm" "$BIN"
    rm -rf "$stage"
    installed || die "the built helm does not report version $HELM_VERSION: $("$BIN" version 2>&1 || true)"
    log "built helm $HELM_VERSION in $(( SECONDS - start ))s"
  fi
fi
printf '%s\n' "$BIN"
