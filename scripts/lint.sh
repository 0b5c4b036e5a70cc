#!/usr/bin/env bash
# Checks every Go module git tracks (the main one and the sub-modules):
# go mod tidy -diff must print nothing, and staticcheck (pinned in
# scripts/staticcheck.sh, installed from the Go module proxy on first use)
# must report nothing. Exits non-zero if any module fails either check.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

sc="$(scripts/staticcheck.sh)"
echo "lint: $("$sc" -version)"
failed=0
for dir in $(git ls-files -- 'go.mod' '*/go.mod' | xargs -r -n1 dirname | sort); do
  echo "lint: module $dir"
  if ! (cd "$dir" && go mod tidy -diff); then
    echo "lint: go.mod/go.sum of $dir are not tidy (run go mod tidy there)"
    failed=1
  fi
  if ! (cd "$dir" && "$sc" ./...); then
    echo "lint: staticcheck reported findings in $dir"
    failed=1
  fi
done
exit "$failed"
