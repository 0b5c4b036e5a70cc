#!/usr/bin/env bash
# Validates the Helm chart against a real Kubernetes API server, on loopback
# and without containers: Debian's etcd-server plus a kube-apiserver built
# from the k8s.io/kubernetes Go module (no controllers, no kubelet: objects
# are validated, admitted and stored, nothing runs). Not part of
# scripts/test.sh: the first run builds kube-apiserver (many minutes).
#
# Usage: scripts/chart-apiserver.sh [--keep]
#
# For every value set in deploy/deploytest/testdata/values:
#   1. helm install --dry-run=server (lookup against the server, the
#      server's OpenAPI schema validation of every object, conflict checks);
#   2. helm install for real (each object goes through the API server's
#      validation and admission with strict field validation), then
#      helm upgrade (a generated state key must survive it), then uninstall.
# Then values that must be refused (schema violation, grace period too
# short) must make helm install fail. The Gateway API HTTPRoute and the
# Prometheus Operator ServiceMonitor CRDs are installed first, from the same
# Go modules deploy/deploytest uses.
#
# Environment: MCP_TOOLS_BIN (cache of helm and kube-apiserver, default
# ~/.cache/mcpcluster/bin), APISERVER_START_TIMEOUT (seconds, default 120).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# kube-apiserver release; its staging modules (k8s.io/api, ...) are v0.X.Y.
K8S_VERSION=v1.37.1
GATEWAY_API_VERSION=v1.6.3         # as in deploy/deploytest/go.mod
PROMETHEUS_OPERATOR_VERSION=v0.94.0  # as in deploy/deploytest/go.mod (pkg/apis/monitoring)
CACHE_ROOT="${MCP_TOOLS_BIN:-$HOME/.cache/mcpcluster/bin}"
APISERVER_START_TIMEOUT="${APISERVER_START_TIMEOUT:-120}"
KEEP=0
[[ "${1:-}" == --keep ]] && KEEP=1

say() { printf 'chart-apiserver: %s\n' "$*"; }
fail() { say "ERROR: $*"; exit 1; }



# ------------------------------------------------------------------- tools ---
missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if (( ${#missing[@]} > 0 )); then
  say "installing ${missing[*]} (Debian packages)"
  apt_install "${missing[@]}" || fail "apt-get install ${missing[*]} failed"
fi
say "etcd: $(etcd --version | head -n 1)"

HELM="$(scripts/helm.sh)"
say "helm: $("$HELM" version --short)"

APISERVER_DIR="$CACHE_ROOT/kube-apiserver-$K8S_VERSION"
APISERVER="$APISERVER_DIR/kube-apiserver"
apiserver_ok() { [[ -x "$APISERVER" ]] && [[ "$("$APISERVER" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]; }
if ! apiserver_ok; then
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-kube-apiserver-$K8S_VERSION"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! apiserver_ok; then
    say "building kube-apiserver $K8S_VERSION from the k8s.io/kubernetes module (slow the first time)"
    start=$SECONDS
    build="$(mktemp -d "$CACHE_ROOT/.tmp-kube-apiserver.XXXXXX")"
    gomod="$(cd "$build" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
      | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -f "$gomod" ]] || fail "could not download k8s.io/kubernetes@$K8S_VERSION"
    # The version the server reports (and emulates): what its release build
    # stamps in.
    version_ldflags() {
      local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
      local p=k8s.io/component-base/version
      echo "-X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    }
    # k8s.io/kubernetes replaces its staging modules with directories of its
    # own repository; outside it they are the published v0.X.Y modules.
    staging="v0.${K8S_VERSION#v1.}"
    {
      echo "module localbuild/kube-apiserver"
      echo
      echo "go $(go env GOVERSION | sed 's/^go//')"
      echo
      echo "replace ("
      grep -oE '^[[:space:]]*k8s\.io/[A-Za-z0-9._-]+ => \./staging/' "$gomod" \
        | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >"$build/go.mod"
    if ! (cd "$build" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
          && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o kube-apiserver \
               -ldflags "-s -w $(version_ldflags)" k8s.io/kubernetes/cmd/kube-apiserver) \
          >"$build/build.log" 2>&1; then
      tail -n 40 "$build/build.log" >&2
      rm -rf "$build"
      fail "building kube-apiserver failed"
    fi
    rm -rf "$APISERVER_DIR"
    mkdir -p "$APISERVER_DIR"
    mv "$build/kube-apiserver" "$APISERVER"
    rm -rf "$build"
    apiserver_ok || fail "the built kube-apiserver does not report $K8S_VERSION: $("$APISERVER" --version 2>&1 || true)"
    say "built kube-apiserver in $(( SECONDS - start ))s"
  fi
fi

# CRDs from the Go modules of the types deploy/deploytest decodes with.
crd_file() { # MODULE@VERSION RELPATH
  local dir
  dir="$(cd /tmp && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "$dir/$2" ]] || fail "CRD $2 not found in $1"
  echo "$dir/$2"
}
HTTPROUTE_CRD="$(crd_file "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" config/crd/standard/gateway.networking.k8s.io_httproutes.yaml)"
SERVICEMONITOR_CRD="$(crd_file "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml)"

# ----------------------------------------------------------------- cleanup ---
PIDS=()
NAMES=()
TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcpapiserver.XXXXXX")"
cleanup() {
  local rc=$? i n
  trap - EXIT INT TERM
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    kill -TERM "${PIDS[$i]}" 2>/dev/null || true
    n=0
    while kill -0 "${PIDS[$i]}" 2>/dev/null && (( n < 100 )); do sleep 0.1; n=$(( n + 1 )); done
    kill -KILL "${PIDS[$i]}" 2>/dev/null || true
    wait "${PIDS[$i]}" 2>/dev/null || true
  done
  if (( rc != 0 )); then
    for f in "$TMP"/*.log; do
      [[ -s "$f" ]] || continue
      say "--- last 15 lines of ${f##*/} ---"
      tail -n 15 "$f" | sed 's/^/    /'
    done
  fi
  if (( KEEP )); then say "scratch directory kept: $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
USED_PORTS=" "
free_port() {
  local p i
  for (( i=0; i<200; i++ )); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
    [[ "$USED_PORTS" == *" $p "* ]] && continue
    if ! port_open "$p"; then USED_PORTS+="$p "; echo "$p"; return 0; fi
  done
  return 1
}

# -------------------------------------------------------------------- etcd ---
ETCD_CLIENT="$(free_port)"; ETCD_PEER="$(free_port)"; API_PORT="$(free_port)"
etcd --name local --data-dir "$TMP/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "local=http://127.0.0.1:$ETCD_PEER" >"$TMP/etcd.log" 2>&1 </dev/null &
PIDS+=("$!"); NAMES+=(etcd)
deadline=$(( SECONDS + 30 ))
until curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_CLIENT/health" >/dev/null 2>&1; do
  (( SECONDS < deadline )) || fail "etcd did not come up"
  sleep 0.2
done
say "etcd on 127.0.0.1:$ETCD_CLIENT"

# ----------------------------------------------------------- kube-apiserver ---
TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$TOKEN,admin,admin,system:masters" >"$TMP/tokens.csv"
openssl genrsa -out "$TMP/sa.key" 2048 2>/dev/null
openssl rsa -in "$TMP/sa.key" -pubout -out "$TMP/sa.pub" 2>/dev/null
# The service CIDR only feeds ClusterIP allocation: nothing is routed.
"$APISERVER" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --cert-dir "$TMP/certs" \
  --token-auth-file "$TMP/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$TMP/sa.pub" --service-account-signing-key-file "$TMP/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --endpoint-reconciler-type none \
  --enable-priority-and-fairness=false \
  >"$TMP/kube-apiserver.log" 2>&1 </dev/null &
PIDS+=("$!"); NAMES+=(kube-apiserver)
API="https://127.0.0.1:$API_PORT"
api() { curl -ksS --max-time 20 -H "Authorization: Bearer $TOKEN" "$@"; }
deadline=$(( SECONDS + APISERVER_START_TIMEOUT ))
until [[ "$(api "$API/readyz" 2>/dev/null)" == ok ]]; do
  kill -0 "${PIDS[-1]}" 2>/dev/null || fail "kube-apiserver exited"
  (( SECONDS < deadline )) || fail "kube-apiserver not ready within ${APISERVER_START_TIMEOUT}s"
  sleep 0.5
done
say "kube-apiserver $(api "$API/version" | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p') ready on $API"

export KUBECONFIG="$TMP/kubeconfig"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: local
    cluster: {server: "$API", insecure-skip-tls-verify: true}
users:
  - name: admin
    user: {token: "$TOKEN"}
contexts:
  - name: local
    context: {cluster: local, user: admin, namespace: mcp}
current-context: local
EOF
export HELM_CACHE_HOME="$TMP/helm/cache" HELM_CONFIG_HOME="$TMP/helm/config" HELM_DATA_HOME="$TMP/helm/data"

# create YAMLFILE PATH: POSTs a YAML object to the API.
create() {
  local code
  code="$(api -o "$TMP/create.out" -w '%{http_code}' -X POST "$API$2" -H 'Content-Type: application/yaml' --data-binary "@$1")"
  [[ "$code" == 201 ]] || { cat "$TMP/create.out" >&2; fail "creating $1 at $2: HTTP $code"; }
}
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: mcp}\n' >"$TMP/ns.yaml"
create "$TMP/ns.yaml" /api/v1/namespaces
for crd in "$HTTPROUTE_CRD" "$SERVICEMONITOR_CRD"; do
  create "$crd" /apis/apiextensions.k8s.io/v1/customresourcedefinitions
done
deadline=$(( SECONDS + 60 ))
until api -f -o /dev/null "$API/apis/gateway.networking.k8s.io/v1/httproutes" 2>/dev/null \
   && api -f -o /dev/null "$API/apis/monitoring.coreos.com/v1/servicemonitors" 2>/dev/null; do
  (( SECONDS < deadline )) || fail "CRDs not served within 60s"
  sleep 0.5
done
say "CRDs installed: httproutes.gateway.networking.k8s.io ($GATEWAY_API_VERSION), servicemonitors.monitoring.coreos.com ($PROMETHEUS_OPERATOR_VERSION)"

# ------------------------------------------------------------------ checks ---
CHART=deploy/helm/mcpcluster
failed=0
passed=0
ok() { say "PASS $*"; passed=$(( passed + 1 )); }
ko() { say "FAIL $*"; failed=$(( failed + 1 )); }

state_key() { # RELEASE: the state key in the release's Secret, if it has one
  api "$API/api/v1/namespaces/mcp/secrets/$1-mcpcluster" | sed -n 's/.*"MCP_STATE_KEY": "\(.*\)".*/\1/p'
}

# stored RELEASE: how many of the release's objects the API server holds.
stored() {
  local n=0 path
  for path in api/v1/namespaces/mcp/{configmaps,secrets,services,serviceaccounts} \
      apis/apps/v1/namespaces/mcp/{deployments,statefulsets} \
      apis/policy/v1/namespaces/mcp/poddisruptionbudgets \
      apis/autoscaling/v2/namespaces/mcp/horizontalpodautoscalers \
      apis/networking.k8s.io/v1/namespaces/mcp/ingresses \
      apis/gateway.networking.k8s.io/v1/namespaces/mcp/httproutes \
      apis/monitoring.coreos.com/v1/namespaces/mcp/servicemonitors; do
    n=$(( n + $(api "$API/$path?labelSelector=app.kubernetes.io%2Finstance%3D$1" | grep -c '"uid"' || true) ))
  done
  echo "$n"
}

i=0
for values in deploy/deploytest/testdata/values/*.yaml; do
  name="$(basename "$values" .yaml)"
  i=$(( i + 1 ))
  rel="v$i"
  if out="$("$HELM" install "$rel" "$CHART" -n mcp -f "$values" --dry-run=server 2>&1)"; then
    ok "$name: helm install --dry-run=server"
  else
    ko "$name: helm install --dry-run=server"; echo "$out" | tail -n 20; continue
  fi
  if out="$("$HELM" install "$rel" "$CHART" -n mcp -f "$values" 2>&1)"; then
    ok "$name: helm install ($(stored "$rel") objects stored)"
  else
    ko "$name: helm install"; echo "$out" | tail -n 20; continue
  fi
  key1="$(state_key "$rel")"
  if out="$("$HELM" upgrade "$rel" "$CHART" -n mcp -f "$values" 2>&1)"; then
    key2="$(state_key "$rel")"
    if [[ -z "$key1" ]]; then ok "$name: helm upgrade (state key from an existing Secret)"
    elif [[ "$key1" == "$key2" ]]; then ok "$name: helm upgrade (state key kept)"
    else ko "$name: helm upgrade changed the state key"; fi
  else
    ko "$name: helm upgrade"; echo "$out" | tail -n 20
  fi
  "$HELM" uninstall "$rel" -n mcp >/dev/null 2>&1 || ko "$name: helm uninstall"
done

# must_fail NAME VALUES WANT: helm install must fail, naming WANT.
must_fail() {
  printf '%s\n' "$2" >"$TMP/bad.yaml"
  if out="$("$HELM" install bad "$CHART" -n mcp -f "$TMP/bad.yaml" 2>&1)"; then
    ko "$1: helm install accepted it"; "$HELM" uninstall bad -n mcp >/dev/null 2>&1 || true
  elif [[ "$out" == *"$3"* ]]; then
    ok "$1: refused ($(grep -m1 -oE "(- at .*|must be greater than.*)" <<<"$out" | cut -c1-120))"
  else
    ko "$1: failed without naming '$3'"; echo "$out" | tail -n 10
  fi
}
must_fail "schema violation" "replicaCount: three" "replicaCount"
must_fail "grace period too short" "shutdown: {drainTimeoutSeconds: 60}" "must be greater than"

say "$passed passed, $failed failed"
(( failed == 0 ))
