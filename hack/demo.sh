#!/usr/bin/env bash
# The local demo: azsim (a local Azure), a Kubernetes cluster with simulated nodes for azsim's
# VMs, the CCM, and a sample Deployment with a LoadBalancer Service.
#   hack/demo.sh up     bring it up (state in _output/demo) and print how to use it
#   hack/demo.sh down   tear it down; nothing keeps running
#   hack/demo.sh status
# `make demo` / `make down` run these after installing tools and building the binaries.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
STATE="${ROOT}/_output/demo"
TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_TOOLS_BIN="${TOOLS_BIN}"
DEMOENV="${ROOT}/_output/bin/demoenv"
READY_TIMEOUT="${DEMO_READY_TIMEOUT:-300}"
IP_TIMEOUT="${DEMO_IP_TIMEOUT:-120}"

log() { printf '[demo] %s\n' "$*" >&2; }
running() { [[ -f "${STATE}/demoenv.pid" ]] && kill -0 "$(cat "${STATE}/demoenv.pid")" 2>/dev/null; }
kubectl() { "${TOOLS_BIN}/kubectl" --kubeconfig "${STATE}/env/kubeconfig" "$@"; }

up() {
  if running; then
    log "already up (pid $(cat "${STATE}/demoenv.pid")); \`make down\` first to start over"
    # shellcheck source=/dev/null
    source "${STATE}/ready"
    usage
    return 0
  fi
  [[ -x "${TOOLS_BIN}/kwokctl" ]] || { log "tools missing: run \`make tools\`"; return 1; }
  rm -rf "${STATE}"
  mkdir -p "${STATE}"
  go build -o "${DEMOENV}" ./test/framework/demoenv
  log "starting azsim, the cluster and the CCM (log: ${STATE}/demoenv.log)"
  setsid "${DEMOENV}" -state "${STATE}" >"${STATE}/demoenv.log" 2>&1 </dev/null &
  echo $! >"${STATE}/demoenv.pid"
  local waited=0
  until [[ -f "${STATE}/ready" ]]; do
    if ! running; then
      log "the demo environment failed to start:"
      tail -n 30 "${STATE}/demoenv.log" >&2
      return 1
    fi
    if ((waited >= READY_TIMEOUT)); then
      log "not ready after ${READY_TIMEOUT}s; see ${STATE}/demoenv.log"
      down
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "environment up in ${waited}s"
  # shellcheck source=/dev/null
  source "${STATE}/ready"
  kubectl apply -f hack/demo/sample.yaml
  local ip="" wait_ip="${IP_TIMEOUT}"
  if [[ "${DEMO_CCM_RUNNING}" != true ]]; then
    log "no CCM binary was built (cmd/azure-cloud-controller-manager): nodes stay uninitialized,"
    log "pods Pending and the service without an IP until it exists"
    wait_ip=0
  else
    log "waiting up to ${IP_TIMEOUT}s for the LoadBalancer IP of service hello"
  fi
  for ((i = 0; i < wait_ip; i++)); do
    ip="$(kubectl get svc hello -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null || true)"
    [[ -n "${ip}" ]] && break
    sleep 1
  done
  kubectl get nodes -o custom-columns='NAME:.metadata.name,PROVIDER-ID:.spec.providerID,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,TYPE:.metadata.labels.node\.kubernetes\.io/instance-type,TAINTS:.spec.taints[*].key'
  kubectl get pods -o wide
  kubectl get svc hello -o wide
  if [[ -z "${ip}" && "${DEMO_CCM_RUNNING}" == true ]]; then
    log "service hello has no external IP after ${IP_TIMEOUT}s. The CCM's load-balancer support may"
    log "not be built yet, or it failed: see the CCM log ${DEMO_CCM_LOG} and \`kubectl describe svc hello\`."
  elif [[ -n "${ip}" ]]; then
    log "service hello has external IP ${ip} (a public IP allocated in azsim)"
  fi
  usage
}

usage() {
  cat <<USAGE

The demo is running. Use the cluster with:
  export KUBECONFIG=${DEMO_KUBECONFIG} PATH=${TOOLS_BIN}:\$PATH
  kubectl get nodes,svc -o wide
  kubectl describe svc hello          # the CCM's events
  tail -f ${DEMO_CCM_LOG}
Inspect azsim, the local Azure the CCM manages (${DEMO_AZSIM_URL}):
  export AZSIM_URL=${DEMO_AZSIM_URL} AZSIM_CA=${DEMO_AZSIM_CA}
  _output/bin/azsim list Microsoft.Network/loadBalancers
  _output/bin/azsim list Microsoft.Network/publicIPAddresses
  _output/bin/azsim stats             # ARM requests per operation, as the CCM made them
  cat ${DEMO_CLOUD_CONFIG}   # the CCM's azure.json
Stop everything with: make down
USAGE
}

down() {
  if running; then
    local pid
    pid="$(cat "${STATE}/demoenv.pid")"
    log "stopping the demo environment (pid ${pid})"
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 120); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  # Belt and braces for a demo whose controller was killed: its reaper normally does this.
  local kwokwork="${STATE}/env/kwok"
  if [[ -d "${kwokwork}/clusters" ]]; then
    for c in "${kwokwork}"/clusters/*; do
      [[ -d "${c}" ]] || continue
      KWOK_WORKDIR="${kwokwork}" "${TOOLS_BIN}/kwokctl" delete cluster --name "$(basename "${c}")" \
        --kubeconfig "${STATE}/env/kubeconfig" >/dev/null 2>&1 || true
    done
  fi
  for f in "${STATE}"/env/pids/*.pid; do
    [[ -f "${f}" ]] && kill -KILL -- "-$(cat "${f}")" 2>/dev/null || true
  done
  rm -rf "${STATE}"
  log "down"
}

status() {
  if running; then
    log "up (pid $(cat "${STATE}/demoenv.pid"))"
    kubectl get nodes,svc -o wide
  else
    log "not running"
  fi
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*)
  echo "usage: $0 up|down|status" >&2
  exit 2
  ;;
esac
